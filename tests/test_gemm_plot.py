"""The gemm figures and README table on a committed fixture
(tests/data/gemm_small.json: a real run of bench on the 2-core Xeon, every CPU
gemm variant at 128^3, 1024^3 and the ResNet20 fc shape 64x10x64, with the
roofline cpu_fma and cpu_sgemm_onednn ceilings, 2 repetitions)."""

import math
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

from dlbench.figures import gemm  # noqa: E402
from dlbench.results import load  # noqa: E402
from tests.plot_fixture import results_with_planted_error  # noqa: E402

FIXTURE = ROOT / "tests" / "data" / "gemm_small.json"
PLOT = ROOT / "scripts" / "plot.py"
CPU_VARIANTS = ["cpu_eigen_f32", "cpu_naive_f32", "cpu_onednn_bf16", "cpu_onednn_f32", "cpu_onednn_s8",
                "cpu_ref_s8", "cpu_vnni_s8"]
REDUCED = ["cpu_onednn_bf16", "cpu_onednn_s8", "cpu_ref_s8", "cpu_vnni_s8"]


def line(ax, label):
    """The line of a variant; the throughput panel's labels go on with the ISA: "cpu_vnni_s8 (AVX-512 ...)"."""
    return next(l for l in ax.get_lines() if l.get_label().split(" (")[0] == label)


class GemmFigures(unittest.TestCase):
    def setUp(self):
        self.results = load(FIXTURE)

    def test_fixture_has_every_cpu_variant(self):
        self.assertEqual(sorted({c.variant for c in self.results.family("gemm")}), CPU_VARIANTS)

    def test_throughput_panel_has_every_variant_and_the_ceilings(self):
        fig = gemm.figures([self.results])["gemm"]
        speed, _ = fig.axes
        labels = [l.get_label() for l in speed.get_lines()]
        for v in CPU_VARIANTS:
            self.assertIn(v, [label.split(" (")[0] for label in labels])
        # reduced precision with the ISA it ran on and that ISA's peak over fp32
        self.assertIn("cpu_vnni_s8 (AVX-512 VNNI, peak 4x fp32)", labels)
        self.assertTrue(any(l.startswith("cpu_fma ceiling") for l in labels), labels)
        self.assertTrue(any(l.startswith("cpu_sgemm_onednn ceiling") for l in labels), labels)
        # x are the square sizes only (64x10x64 is not square), y the median GFLOP/s
        vnni = line(speed, "cpu_vnni_s8")
        self.assertEqual(list(vnni.get_xdata()), [128, 1024])
        case = self.results.cases["gemm/cpu_vnni_s8/m:1024/n:1024/k:1024"]
        self.assertAlmostEqual(vnni.get_ydata()[1], case.median("flops") / 1e9)
        self.assertEqual(speed.get_xscale(), "log")

    def test_error_panel_has_the_reduced_precisions_only(self):
        _, err = gemm.figures([self.results])["gemm"].axes
        self.assertEqual(sorted(l.get_label() for l in err.get_lines()), REDUCED)
        bf16 = line(err, "cpu_onednn_bf16")
        case = self.results.cases["gemm/cpu_onednn_bf16/m:128/n:128/k:128"]
        self.assertAlmostEqual(bf16.get_ydata()[0], case.median("err_vs_f32"))
        # every int8 path computes the same dequantized product: the same error
        int8 = {tuple(line(err, v).get_ydata()) for v in ("cpu_onednn_s8", "cpu_ref_s8", "cpu_vnni_s8")}
        self.assertEqual(len(int8), 1)

    def test_other_shapes_figure(self):
        fig = gemm.figures([self.results])["gemm_shapes"]
        ax = fig.axes[0]
        self.assertEqual([t.get_text() for t in ax.get_yticklabels()], ["64x10x64"])
        widths = {c.get_label(): bar.get_width() for c in ax.containers for bar in c}
        case = self.results.cases["gemm/cpu_onednn_s8/m:64/n:10/k:64"]
        self.assertAlmostEqual(widths["cpu_onednn_s8"], case.median("flops") / 1e9)

    def test_table_has_speeds_errors_and_the_ratios(self):
        text = gemm.table(self.results)
        for v in CPU_VARIANTS:
            self.assertIn(f"| {v} |", text)
        self.assertIn("brg:avx512_core_amx_int8", text)  # oneDNN's implementation, from the label
        vnni = self.results.cases["gemm/cpu_vnni_s8/m:1024/n:1024/k:1024"].median("flops")
        eigen = self.results.cases["gemm/cpu_eigen_f32/m:1024/n:1024/k:1024"].median("flops")
        self.assertIn(f"`cpu_vnni_s8` / `cpu_eigen_f32` at 1024^3: **{vnni / eigen:.1f}x**", text)
        self.assertNotIn("at 2048^3", text)  # no 2048 cases in the fixture: no ratio made up

    def test_errored_case_is_drawn_missing_and_listed(self):
        target = "gemm/cpu_vnni_s8/m:1024/n:1024/k:1024"
        results = results_with_planted_error(FIXTURE, target)
        speed, err = gemm.figures([results])["gemm"].axes
        for ax in (speed, err):
            vnni = line(ax, "cpu_vnni_s8")
            self.assertTrue(math.isnan(vnni.get_ydata()[list(vnni.get_xdata()).index(1024)]))
        self.assertIn("| cpu_vnni_s8 | ", gemm.table(results))
        self.assertNotIn("`cpu_vnni_s8` / `cpu_eigen_f32`", gemm.table(results))

    def test_plot_script_writes_both_pngs(self):
        with tempfile.TemporaryDirectory() as d:
            p = subprocess.run([sys.executable, str(PLOT), str(FIXTURE), "--out-dir", d],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            for stem in ("gemm", "gemm_shapes"):
                png = Path(d) / f"{stem}.png"
                self.assertEqual(png.read_bytes()[:8], b"\x89PNG\r\n\x1a\n")


if __name__ == "__main__":
    unittest.main()
