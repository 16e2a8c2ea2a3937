"""The softmax figure and README table on a committed fixture
(tests/data/softmax_small.json, a real run of bench on a 2-core Xeon: the CPU
softmax and log_softmax variants at cols 1024 and 4096 in the DRAM regime,
cols 128 in the cache regime, the one long row, and roofline/cpu_copy;
2 repetitions)."""

import re
import statistics
import sys
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

from dlbench.figures import softmax  # noqa: E402
from dlbench.results import load  # noqa: E402
from tests.plot_fixture import assert_drawn_missing, assert_plot_writes_png, results_with_planted_error  # noqa: E402

FIXTURE = ROOT / "tests" / "data" / "softmax_small.json"


def gbps(results, name):
    return results.cases[name].median("bytes_per_second") / 1e9


class SoftmaxFigure(unittest.TestCase):
    def setUp(self):
        self.results = load(FIXTURE)
        self.fig = softmax.figures([self.results])["softmax"]
        self.dram_ax, self.speedup_ax = self.fig.axes

    def line(self, ax, label):
        return next(l for l in ax.get_lines() if l.get_label() == label)

    def test_regimes_follow_the_size(self):
        regimes = {c.name: softmax.regime(c) for c in self.results.family("softmax")}
        self.assertEqual(regimes["softmax/cpu_fused/rows:65536/cols:1024"], "dram")
        self.assertEqual(regimes["softmax/cpu_fused/rows:1024/cols:128"], "cache")
        self.assertEqual(regimes["softmax/cpu_fused/rows:1/cols:1000000"], "other")

    def test_dram_panel_has_every_variant_and_the_copy_ceiling(self):
        labels = [l.get_label() for l in self.dram_ax.get_lines()]
        for variant in ("cpu_naive", "cpu_fused", "cpu_eigen", "cpu_onednn"):
            self.assertIn(variant, labels)
        for variant in ("cpu_fused", "cpu_onednn"):
            self.assertIn(f"log_softmax {variant}", labels)
        self.assertTrue(any(l.startswith("cpu_copy ceiling") for l in labels), labels)
        # DRAM cases only, at their cols, in GB/s (medians)
        line = self.line(self.dram_ax, "cpu_fused")
        self.assertEqual(list(line.get_xdata()), [1024, 4096])
        self.assertAlmostEqual(line.get_ydata()[1], gbps(self.results, "softmax/cpu_fused/rows:16384/cols:4096"))

    def test_speedup_panel_is_fused_over_naive_per_regime(self):
        dram = self.line(self.speedup_ax, "cpu_fused / cpu_naive, dram")
        want = (gbps(self.results, "softmax/cpu_fused/rows:65536/cols:1024") /
                gbps(self.results, "softmax/cpu_naive/rows:65536/cols:1024"))
        self.assertEqual(list(dram.get_xdata()), [1024, 4096])
        self.assertAlmostEqual(dram.get_ydata()[0], want)
        cache = self.line(self.speedup_ax, "cpu_fused / cpu_naive, cache")
        self.assertEqual(list(cache.get_xdata()), [128])

    def test_plot_script_writes_the_png(self):
        assert_plot_writes_png(self, FIXTURE, "softmax")

    def test_errored_case_is_drawn_missing_and_listed(self):
        target = "softmax/cpu_onednn/rows:16384/cols:4096"
        fig = softmax.figures([results_with_planted_error(FIXTURE, target)])["softmax"]
        assert_drawn_missing(self, fig.axes[0], "cpu_onednn", 4096, target)


class SoftmaxTable(unittest.TestCase):
    def setUp(self):
        self.results = load(FIXTURE)
        self.text = softmax.table(self.results)
        self.rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
                     for line in self.text.splitlines() if line.startswith("| ") and "shape" not in line}
        header = next(line for line in self.text.splitlines() if line.startswith("| shape"))
        self.columns = [c.strip() for c in header.split("|")[2:-1]]

    def cell(self, shape, column):
        return float(self.rows[shape][self.columns.index(column)])

    def test_one_row_per_shape_and_a_column_per_variant(self):
        self.assertEqual(set(self.rows), {"DRAM, cols 1024", "DRAM, cols 4096", "cache, cols 128",
                                          "rows 1, cols 1000000"})
        for column in ("`cpu_naive`", "`cpu_fused`", "`cpu_eigen`", "`cpu_onednn`", "log `cpu_fused`",
                       "log `cpu_onednn`", "fused/naive", "fused/cpu_copy"):
            self.assertIn(column, self.columns)

    def test_cells_are_medians_and_ratios_of_this_run(self):
        fused = gbps(self.results, "softmax/cpu_fused/rows:16384/cols:4096")
        naive = gbps(self.results, "softmax/cpu_naive/rows:16384/cols:4096")
        copy = statistics.median(self.results.cases["roofline/cpu_copy/n:134217728"].values("bytes_per_second")) / 1e9
        self.assertAlmostEqual(self.cell("DRAM, cols 4096", "`cpu_fused`"), fused, places=1)
        self.assertAlmostEqual(self.cell("DRAM, cols 4096", "fused/naive"), fused / naive, places=2)
        self.assertAlmostEqual(self.cell("DRAM, cols 4096", "fused/cpu_copy"), fused / copy, places=2)
        self.assertRegex(self.text, re.escape(f"`roofline/cpu_copy` {copy:.1f} GB/s"))

    def test_no_gpu_table_without_gpu_cases(self):
        self.assertNotIn("gpu", self.text)


if __name__ == "__main__":
    unittest.main()
