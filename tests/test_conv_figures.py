"""The conv figures and README table on a committed fixture
(tests/data/conv_small.json: a real run of bench on a 2-core Xeon, the CPU
variants on ResNet20's 32->32 convolution at batch 1 and 64 and its 32->64
stride-2 one at batch 64, with the oneDNN SGEMM ceiling, 2 repetitions)."""

import copy
import json
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from dlbench.figures import conv  # noqa: E402
from dlbench.results import load  # noqa: E402

FIXTURE = ROOT / "tests" / "data" / "conv_small.json"


def best_cpu(results, key):
    measured = [(c.variant, c.median("flops")) for c in results.family("conv")
                if conv.shape_key(c) == key and c.device == "cpu" and c.error is None]
    return max(measured, key=lambda vr: vr[1])


class ConvFigures(unittest.TestCase):
    def setUp(self):
        self.results = load(FIXTURE)
        self.keys = list(conv.shapes(self.results.family("conv")))

    def test_fixture_has_what_the_tests_need(self):
        self.assertEqual(len(self.keys), 3)
        self.assertTrue(any(c.error for c in self.results.family("conv")))  # oneDNN Winograd at stride 2
        self.assertIsNotNone(conv.ceiling(self.results, conv.SGEMM_CEILING, "flops"))

    def test_one_figure_per_batch_one_row_per_shape_winner_marked(self):
        figs = conv.figures([self.results])
        self.assertEqual(sorted(figs), ["conv_n1", "conv_n64"])
        for stem, fig in figs.items():
            batch = int(stem.removeprefix("conv_n"))
            keys = [k for k in self.keys if k[0] == batch]
            self.assertEqual(len(fig.axes), len(keys))  # CPU panel only: no GPU cases
            for ax, key in zip(fig.axes, keys):
                variant, flops = best_cpu(self.results, key)
                bars = {t.get_text(): p for t, p in zip(ax.get_yticklabels(), ax.patches)}
                self.assertAlmostEqual(bars[variant].get_width(), flops / 1e9)
                self.assertEqual(bars[variant].get_facecolor(), ax.patches[-1].get_facecolor())
                others = [p for name, p in bars.items() if name != variant]
                self.assertTrue(all(p.get_facecolor() != bars[variant].get_facecolor() for p in others))

    def test_unsupported_case_is_listed_not_drawn(self):
        figs = conv.figures([self.results])
        texts = [t.get_text() for fig in figs.values() for ax in fig.axes for t in ax.texts]
        self.assertTrue(any("cpu_onednn_winograd: unsupported" in t for t in texts), texts)

    def test_table_winner_margin_and_ceiling_ratio(self):
        text = conv.table(self.results)
        rows = [line for line in text.splitlines() if line.startswith("| resnet20")]
        self.assertTrue(rows[0].startswith("| resnet20 stage2 32->32 16x16, n1 |"), rows[0])
        self.assertEqual(len(rows), 3)
        for key, row in zip(self.keys, rows):
            variant, flops = best_cpu(self.results, key)
            self.assertIn(f"`{variant}` | {flops / 1e9:.1f} |", row)
            self.assertIn("% over `", row)
        sgemm = conv.ceiling(self.results, conv.SGEMM_CEILING, "flops")
        ratios = [k for k in self.keys if k[0] == 64]
        self.assertEqual(len(ratios), 2)
        for key in ratios:
            variant, flops = best_cpu(self.results, key)
            self.assertIn(f"{conv.describe(key)}: {flops / sgemm:.2f} (`{variant}`)", text)
        self.assertIn("Own `cpu_winograd` over own `cpu_im2col`", text)

    def test_gpu_results_get_a_panel_and_table_columns(self):
        data = json.loads(FIXTURE.read_text())
        planted = []
        for entry in data["benchmarks"]:
            if entry["run_name"].startswith("conv/cpu_im2col/"):
                gpu = copy.deepcopy(entry)
                for field in ("name", "run_name"):
                    gpu[field] = gpu[field].replace("conv/cpu_im2col/", "conv/gpu_cudnn_find/").replace(
                        "/real_time", "/manual_time")
                planted.append(gpu)
        data["benchmarks"] += planted
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "with_gpu.json"
            path.write_text(json.dumps(data))
            results = load(path)
        fig = conv.figures([results])["conv_n64"]
        self.assertEqual(len(fig.axes), 2 * 2)  # two shapes, CPU and GPU panels
        self.assertTrue(fig.axes[1].get_title().startswith("GPU: "))
        text = conv.table(results)
        self.assertIn("| GPU winner |", text)
        self.assertIn("`gpu_cudnn_find`", text)
        self.assertIn("only one measured", text)


if __name__ == "__main__":
    unittest.main()
