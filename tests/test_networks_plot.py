"""The networks figure and README table on a committed fixture
(tests/data/networks_small.json: resnet20 and mnist_lenet cases of a real
`scripts/bench --peers` run on a 2-core AMD EPYC at f5f36a2, every CPU
backend and peer at batch 1, 16, 64 and 256, 2 repetitions)."""

import json
import statistics
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

from dlbench.figures import networks  # noqa: E402
from dlbench.names import device_of  # noqa: E402
from dlbench.results import load  # noqa: E402
from tests.plot_fixture import assert_drawn_missing, assert_plot_writes_png, results_with_planted_error  # noqa: E402

FIXTURE = ROOT / "tests" / "data" / "networks_small.json"
BACKENDS = ("cpu_own", "cpu_onednn", "cpu_eigen", "peer_torch", "peer_torchscript", "peer_ort", "peer_openvino")


def rate(results, name):
    return statistics.median(results.cases[name].values("items_per_second"))


class NetworksFigure(unittest.TestCase):
    def setUp(self):
        self.results = load(FIXTURE)
        self.fig = networks.figures([self.results])["networks"]

    def test_one_panel_per_network_one_line_per_backend(self):
        titles = [ax.get_title() for ax in self.fig.axes]
        self.assertEqual(titles, ["resnet20: images/s against batch size", "mnist_lenet: images/s against batch size"])
        ax = self.fig.axes[0]
        lines = {l.get_label(): l for l in ax.get_lines()}
        self.assertEqual(set(lines), set(BACKENDS))
        self.assertEqual(list(lines["cpu_onednn"].get_xdata()), [1, 16, 64, 256])
        self.assertAlmostEqual(lines["cpu_onednn"].get_ydata()[2], rate(self.results, "resnet20/cpu_onednn/batch:64"))
        self.assertEqual(lines["peer_ort"].get_linestyle(), "--")  # peers dashed

    def test_plot_script_writes_the_png(self):
        assert_plot_writes_png(self, FIXTURE, "networks")

    def test_errored_case_is_drawn_missing_and_listed(self):
        target = "resnet20/cpu_own/batch:16"
        results = results_with_planted_error(FIXTURE, target)
        fig = networks.figures([results])["networks"]
        assert_drawn_missing(self, fig.axes[0], "cpu_own", 16, target)
        self.assertIn(f"`{target}`: WRONG RESULT", networks.table(results))


class NetworksTable(unittest.TestCase):
    def setUp(self):
        self.results = load(FIXTURE)
        self.text = networks.table(self.results)

    def rows(self, network):
        block = self.text.split(f"**{network}**")[1].split("**")[0]
        return {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
                for line in block.splitlines() if line.startswith("| ") and "backend" not in line}

    def test_rows_are_backends_then_peers_with_medians(self):
        rows = self.rows("resnet20")
        self.assertEqual(list(rows), ["cpu_eigen", "cpu_onednn", "cpu_own", "peer_openvino", "peer_ort", "peer_torch",
                                      "peer_torchscript"])
        want = rate(self.results, "resnet20/cpu_own/batch:64")
        self.assertEqual(rows["cpu_own"][2], f"{want:,.0f}")
        self.assertEqual(rows["cpu_own"][5], "0.9262")  # accuracy
        p50 = statistics.median(self.results.cases["resnet20/cpu_own/batch:1"].values("latency_p50_us"))
        self.assertEqual(rows["cpu_own"][4], f"{p50:.0f} us")

    def test_best_against_peer_ratio_comes_from_the_same_run(self):
        ours = max(rate(self.results, f"resnet20/{b}/batch:64") for b in ("cpu_own", "cpu_onednn", "cpu_eigen"))
        peer = max(rate(self.results, f"resnet20/{b}/batch:64") for b in BACKENDS if device_of(b) == "peer")
        self.assertIn(f"batch 64 images/s {ours / peer:.2f}x", self.text.split("**mnist_lenet**")[0])

    def test_no_table_without_network_cases(self):
        with tempfile.TemporaryDirectory() as d:
            other = Path(d) / "other.json"
            data = json.loads(FIXTURE.read_text())
            data["benchmarks"] = []
            other.write_text(json.dumps(data))
            self.assertEqual(networks.table(load(other)), "")
            self.assertEqual(networks.figures([load(other)]), {})


if __name__ == "__main__":
    unittest.main()
