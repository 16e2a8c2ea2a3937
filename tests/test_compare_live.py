"""compare.py on output of the real benchmark binary (the fixtures-based
test_compare covers the statistics on committed files).

LiveOutput (default ctest, deterministic): one small run of the binary,
pooled three processes as DLB_PROCESSES=3 does, compared with itself (every
case `same`, exit 0) and with a copy whose daxpy/cpu_loop per-call times are
planted 30% longer (exactly those cases `slower`; exit 1, or 3 where the
run recorded a disturbed machine around every planted case: a noisy
slowdown is a rerun, not a regression). It proves what
the fixtures cannot: that the JSON the binary writes today, merged by
merge_runs.py, is what compare.py reads. It times nothing that it judges.

LiveAA (label `timing`, not in the default run: `ctest --test-dir build -C
timing -L timing`): the same binary run twice, three processes a side;
compare.py must call nothing slower. It measures this machine, so a busy
machine can fail it; run it alone. The binary comes from DLB_BENCH (set by
ctest)."""

import copy
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from dlbench.quality import case_reason  # noqa: E402
from dlbench.results import load  # noqa: E402

# Single-threaded, in cache and in L2/L3: the cases whose A/A changes stay
# under 7% pooled three processes a side (docs/methodology.md, "Regression statistics").
FILTER = "^daxpy/cpu_(loop|eigen)/n:(16384|262144)/"
PLANTED = "daxpy/cpu_loop/"


def run_side(d: Path, name: str, repetitions: int, min_time: str) -> Path:
    runs = []
    for p in range(3):
        out = d / f"{name}{p}.json"
        subprocess.run([os.environ["DLB_BENCH"], f"--benchmark_filter={FILTER}",
                        f"--benchmark_repetitions={repetitions}", f"--benchmark_min_time={min_time}",
                        f"--benchmark_out={out}", "--benchmark_out_format=json"],
                       check=True, capture_output=True)
        runs.append(out)
    merged = d / f"{name}.json"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "merge_runs.py"), *map(str, runs), "-o", str(merged)],
                   check=True)
    return merged


def compare(base: Path, new: Path, verdicts: Path) -> tuple[subprocess.CompletedProcess, dict]:
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "compare.py"), str(base), str(new),
                        "--json", str(verdicts)], capture_output=True, text=True)
    cases = {c["name"]: c["verdict"] for c in json.loads(verdicts.read_text())["cases"]} if verdicts.exists() else {}
    return p, cases


class LiveOutput(unittest.TestCase):
    def test_bench_output_against_itself_and_a_planted_slowdown(self):
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            base = run_side(d, "base", repetitions=5, min_time="0.01")
            p, cases = compare(base, base, d / "same.json")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertTrue({"daxpy/cpu_loop/n:16384", "daxpy/cpu_loop/n:262144",
                             "daxpy/cpu_eigen/n:16384", "daxpy/cpu_eigen/n:262144"} <= cases.keys(), cases)
            self.assertEqual(set(cases.values()), {"same"}, p.stdout)

            # The planted factor is larger than anything this run's noise can hide: every
            # slowed sample lies above every original one (the rank test's strongest
            # verdict) and the median moves by more than 3 x the relative MAD (at most
            # max/min - 1), whatever the machine was doing during the run.
            run = json.loads(base.read_text())
            slowed = copy.deepcopy(run)
            planted = 0
            for name in {b["run_name"] for b in run["benchmarks"] if b["name"].startswith(PLANTED)}:
                times = [b["real_time"] for b in run["benchmarks"]
                         if b["run_name"] == name and b.get("run_type") == "iteration"]
                factor = 1 + max(0.3, 4 * (max(times) / min(times) - 1))
                for b in slowed["benchmarks"]:
                    if b["run_name"] == name and b.get("run_type") == "iteration":
                        b["real_time"] *= factor
                        b["cpu_time"] *= factor
                        planted += 1
            self.assertEqual(planted, 2 * 15, "3 processes x 5 repetitions of each of the 2 planted cases")
            new = d / "slowed.json"
            new.write_text(json.dumps(slowed))
            p, cases = compare(base, new, d / "slowed_verdicts.json")
            # The machine's state is in the data, so the expected verdict is too.
            # A planted case measured on a quiet machine is a regression (exit 1);
            # if every one was noisy, the slowdowns are reruns (exit 3).
            all_noisy = all(case_reason(c) for c in load(base).cases.values() if c.name.startswith(PLANTED))
            self.assertEqual(p.returncode, 3 if all_noisy else 1, p.stdout + p.stderr)
            self.assertEqual(sorted(n for n, v in cases.items() if v == "slower"),
                             ["daxpy/cpu_loop/n:16384", "daxpy/cpu_loop/n:262144"], p.stdout)


class LiveAA(unittest.TestCase):
    @unittest.skipUnless(os.environ.get("DLB_TIMING_TESTS") == "1", "timing test: ctest -C timing -L timing")
    def test_same_binary_twice_is_not_slower(self):
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            base = run_side(d, "base", repetitions=5, min_time="0.05")
            new = run_side(d, "new", repetitions=5, min_time="0.05")
            p, cases = compare(base, new, d / "verdicts.json")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertTrue({"daxpy/cpu_loop/n:16384", "daxpy/cpu_loop/n:262144"} <= cases.keys(), cases)
            self.assertFalse([n for n, v in cases.items() if v == "slower"], p.stdout)


if __name__ == "__main__":
    unittest.main()
