"""scripts/plot.py on a committed fixture (tests/data/bench_small.json, a real
run of bench on a 2-core Xeon: daxpy at a few sizes and the STREAM ceilings,
2 repetitions)."""

import math
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

from dlbench.figures import daxpy  # noqa: E402
from dlbench.results import load  # noqa: E402
from tests.plot_fixture import assert_plot_writes_png, run_plot, write_planted_error  # noqa: E402

FIXTURE = ROOT / "tests" / "data" / "bench_small.json"


class PlotFixture(unittest.TestCase):
    def test_a_default_suite_run_draws_every_figure(self):
        # A real default-suite run (layer cases at batch 1 only): every figure
        # is drawn; the top-ops figure once failed on its empty batches
        # ("Data cannot be log-scaled"), ending scripts/bench in a traceback.
        run = ROOT / "results" / "amd-epyc-zen4-2c" / "20261128T105426Z.json.gz"
        with tempfile.TemporaryDirectory() as d:
            p = run_plot(run, "--out-dir", d)
            self.assertEqual(p.returncode, 0, p.stderr[-2000:])
            for name in ("layers_top", "layers", "networks", "daxpy", "softmax", "conv_n1", "gemm"):
                self.assertTrue((Path(d) / f"{name}.png").exists(), name)

    def test_writes_daxpy_png(self):
        assert_plot_writes_png(self, FIXTURE, "daxpy")

    def test_figure_has_every_variant_and_the_ceilings(self):
        results = load(FIXTURE)
        fig = daxpy.figures([results])["daxpy"]
        labels = [line.get_label() for line in fig.axes[0].get_lines()]
        variants = sorted({c.variant for c in results.family("daxpy")})
        self.assertEqual(variants, ["cpu_eigen", "cpu_loop", "cpu_omp"])  # no GPU cases in the fixture
        for v in variants:
            self.assertIn(v, labels)
        self.assertTrue(any(l.startswith("cpu_copy ceiling") for l in labels), labels)
        self.assertTrue(any(l.startswith("cpu_triad ceiling") for l in labels), labels)
        # the plotted y values are the medians in GB/s
        case = results.cases["daxpy/cpu_loop/n:1024"]
        line = next(l for l in fig.axes[0].get_lines() if l.get_label() == "cpu_loop")
        self.assertAlmostEqual(line.get_ydata()[0], case.median("bytes_per_second") / 1e9)

    def test_errored_case_is_drawn_missing_and_listed(self):
        target = "daxpy/cpu_omp/n:4096"
        with tempfile.TemporaryDirectory() as d:
            bad = write_planted_error(FIXTURE, target, d)
            p = run_plot(bad, "--out-dir", d)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn(target, p.stderr)
            fig = daxpy.figures([load(bad)])["daxpy"]
            line = next(l for l in fig.axes[0].get_lines() if l.get_label() == "cpu_omp")
            xs = list(line.get_xdata())
            self.assertTrue(math.isnan(line.get_ydata()[xs.index(4096)]))

    def test_refuses_non_json_and_non_benchmark_files(self):
        with tempfile.TemporaryDirectory() as d:
            text = Path(d) / "console.txt"
            text.write_text("daxpy/cpu_loop/n:1024/real_time   110 ns\n")
            p = run_plot(text, "--out-dir", d)
            self.assertEqual(p.returncode, 2)
            self.assertIn("not JSON", p.stderr)
            other = Path(d) / "other.json"
            other.write_text('{"name": "something else"}')
            p = run_plot(other, "--out-dir", d)
            self.assertEqual(p.returncode, 2)
            self.assertIn("not Google Benchmark JSON", p.stderr)
            p = run_plot(Path(d) / "missing.json", "--out-dir", d)
            self.assertEqual(p.returncode, 2)
            self.assertIn("cannot read", p.stderr)


if __name__ == "__main__":
    unittest.main()
