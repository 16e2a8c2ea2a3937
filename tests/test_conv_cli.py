"""bench's own flags (--help lists them; an unknown one exits 2) and --conv=...:
a valid non-default shape runs every CPU variant (and
is validated before it is timed); a malformed descriptor exits 2 naming the
problem. DLB_BENCH is the bench binary (set by ctest)."""

import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

BENCH = os.environ.get("DLB_BENCH", str(Path(__file__).resolve().parents[1] / "build" / "bench"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from dlbench.names import split_name  # noqa: E402


def bench(*args):
    return subprocess.run([BENCH, *args], capture_output=True, text=True, timeout=300)


class OwnFlags(unittest.TestCase):
    def test_help_lists_dlbench_flags_before_google_benchmarks(self):
        p = bench("--help")
        self.assertEqual(p.returncode, 0, p.stderr)
        ours, theirs = p.stdout.index("dlbench's own flags:"), p.stdout.index("[--benchmark_filter=<regex>]")
        self.assertLess(ours, theirs)
        for flag in ("--conv=DESCRIPTOR", "--trace=FILE.json"):
            self.assertIn(flag, p.stdout[ours:theirs])

    def test_unknown_flag_exits_2(self):
        p = bench("--frobnicate", "--benchmark_list_tests")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("bench: unknown argument '--frobnicate'", p.stderr)
        self.assertEqual(p.stdout.strip(), "")

    def test_scripts_test_refuses_unknown_arguments(self):
        p = subprocess.run([str(Path(__file__).resolve().parents[1] / "scripts" / "test"), "--frobnicate"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("scripts/test: unknown argument '--frobnicate'", p.stderr)


class ConvFlag(unittest.TestCase):
    def test_non_default_shape_runs_every_cpu_variant(self):
        # The CPU variants this build has for a 3x3 stride-1 convolution: those
        # of a default shape of that kind (the build may lack oneDNN or Eigen).
        p = bench("--benchmark_list_tests", "--benchmark_filter=^conv/cpu_.*/n:64/c:32/h:16/w:16/k:32/r:3/s:3/stride:1/pad:1/")
        self.assertEqual(p.returncode, 0, p.stderr)
        variants = {split_name(name).variant for name in p.stdout.split()}
        self.assertIn("cpu_direct", variants)
        self.assertIn("cpu_winograd", variants)
        shape = "n3c5h9w11k7r3s3stride1pad1"  # in no default list: odd sizes everywhere
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "conv.json"
            p = bench(f"--conv={shape}", "--benchmark_filter=^conv/cpu_", "--benchmark_min_time=0.001",
                      f"--benchmark_out={out}", "--benchmark_out_format=json")
            self.assertEqual(p.returncode, 0, p.stderr)
            runs = json.loads(out.read_text())["benchmarks"]
        names = {r["run_name"] for r in runs}
        expected = "/n:3/c:5/h:9/w:11/k:7/r:3/s:3/stride:1/pad:1/real_time"
        # cpu_winograd_nhwc takes channels in multiples of 16 only: not registered for c = 5, k = 7.
        self.assertIn("cpu_winograd_nhwc", variants)
        self.assertEqual(names, {f"conv/{variant}{expected}" for variant in variants - {"cpu_winograd_nhwc"}})
        self.assertTrue(all(n.endswith(expected) for n in names), names)  # the defaults are replaced
        for r in runs:
            if r.get("error_occurred"):
                # Only a library may decline a shape, and says so.
                self.assertIn("onednn", r["run_name"])
                self.assertTrue(r["error_message"].startswith("unsupported: "), r["error_message"])
                continue
            self.assertGreater(r["flops"], 0)
            self.assertLessEqual(r["max_rel_err"], 1e-5)
            self.assertEqual(r["label"].split(";")[0], "command line")

    def test_stride_2_shape_registers_no_winograd(self):
        p = bench("--conv=n1c3h7w7k5r3s3stride2pad1", "--benchmark_list_tests", "--benchmark_filter=^conv/")
        self.assertEqual(p.returncode, 0, p.stderr)
        listed = p.stdout.split()
        self.assertIn("conv/cpu_direct/n:1/c:3/h:7/w:7/k:5/r:3/s:3/stride:2/pad:1/real_time", listed)
        self.assertFalse([n for n in listed if "winograd" in n and n.startswith("conv/cpu_winograd")], listed)


if __name__ == "__main__":
    unittest.main()
