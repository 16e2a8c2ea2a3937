"""A live A/A test: the benchmark binary run twice on a tiny subset, three
processes a side, as DLB_PROCESSES=3 does; compare.py must call nothing
slower. Run alone (ctest RUN_SERIAL): it measures this machine. The binary
comes from the DLB_BENCH environment variable (set by ctest)."""

import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Single-threaded, in cache and in L2/L3: the cases whose A/A changes stay
# under 7% pooled three processes a side (README, "Tracking regressions in CI").
FILTER = "^daxpy/cpu_(loop|eigen)/n:(16384|262144)/"


class LiveAA(unittest.TestCase):
    def run_side(self, d: Path, name: str) -> Path:
        runs = []
        for p in range(3):
            out = d / f"{name}{p}.json"
            subprocess.run([os.environ["DLB_BENCH"], f"--benchmark_filter={FILTER}", "--benchmark_repetitions=5",
                            "--benchmark_min_time=0.05", f"--benchmark_out={out}", "--benchmark_out_format=json"],
                           check=True, capture_output=True)
            runs.append(out)
        merged = d / f"{name}.json"
        subprocess.run([sys.executable, str(ROOT / "scripts" / "merge_runs.py"), *map(str, runs), "-o", str(merged)],
                       check=True)
        return merged

    def test_same_binary_twice_is_not_slower(self):
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            base, new = self.run_side(d, "base"), self.run_side(d, "new")
            verdicts = d / "verdicts.json"
            p = subprocess.run([sys.executable, str(ROOT / "scripts" / "compare.py"), str(base), str(new),
                                "--json", str(verdicts)], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            cases = json.loads(verdicts.read_text())["cases"]
            names = {c["name"] for c in cases}
            self.assertTrue({"daxpy/cpu_loop/n:16384", "daxpy/cpu_loop/n:262144"} <= names, names)
            self.assertTrue(all(c["verdict"] in ("same", "faster") for c in cases), p.stdout)
            self.assertFalse([c["name"] for c in cases if c["verdict"] == "slower"], p.stdout)


if __name__ == "__main__":
    unittest.main()
