"""The per-layer cases, profile.py on their output, and --trace, on the real
binary (DLB_BENCH, set by ctest) with mnist_lenet on cpu_own at batch 1 (a few
seconds). Checks structure and consistency only, never how fast anything
was: the times themselves are the machine's."""

import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = os.environ.get("DLB_BENCH", str(ROOT / "build" / "bench"))
sys.path.insert(0, str(ROOT / "scripts"))
from dlbench.names import split_name  # noqa: E402
LENET = ["conv1 conv+bias+relu 1->20 5x5", "max_pool2d_1 max_pool 2x2", "conv2 conv+bias+relu 20->50 5x5",
         "max_pool2d_2 max_pool 2x2", "fc1 fc+bias+relu 800->500", "fc2 fc+bias 500->10", "log_softmax log_softmax"]


def bench(*args, check=True):
    return subprocess.run([BENCH, *args], capture_output=True, text=True, check=check,
                          env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})


class LayerCases(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.out = Path(cls.tmp.name) / "layers.json"
        bench("--benchmark_filter=^mnist_lenet_layer/cpu_own/batch:1/", "--benchmark_min_time=0.02",
              f"--benchmark_out={cls.out}", "--benchmark_out_format=json")
        cls.results = json.loads(cls.out.read_text())
        cls.by_name = {b["run_name"]: b for b in cls.results["benchmarks"]}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def layer(self, i):
        return self.by_name[f"mnist_lenet_layer/cpu_own/batch:1/layer:{i}/iterations:100/manual_time"]

    def test_one_case_per_layer_in_order_with_its_label(self):
        self.assertEqual([self.layer(i)["label"] for i in range(len(LENET))], LENET)
        self.assertNotIn(f"mnist_lenet_layer/cpu_own/batch:1/layer:{len(LENET)}/iterations:100/manual_time",
                         self.by_name)

    def test_layer_counters(self):
        for i, label in enumerate(LENET):
            b = self.layer(i)
            self.assertNotIn("error_occurred", b, b.get("error_message"))
            self.assertEqual(b["iterations"], 100, label)
            self.assertGreater(b["real_time"], 0, label)
            self.assertTrue(0 <= b["share"] <= 1, (label, b["share"]))
            self.assertGreater(b["bytes_per_second"], 0, label)
            self.assertLess(b["max_rel_err"], 1e-5, label)
            if " conv" in label or " fc" in label:
                self.assertGreater(b["flops"], 0, label)
            else:
                self.assertEqual(b["flops"], 0, label)

    def test_pass_case_states_its_gap(self):
        b = self.by_name["mnist_lenet_layer/cpu_own/batch:1/pass/manual_time"]
        self.assertNotIn("error_occurred", b, b.get("error_message"))
        self.assertGreater(b["pass_us"], 0)
        self.assertGreater(b["layers_us"], 0)
        self.assertAlmostEqual(b["gap_us"], b["pass_us"] - b["layers_us"], delta=1e-9 * b["pass_us"])
        self.assertAlmostEqual(b["gap_frac"], b["gap_us"] / b["pass_us"], delta=1e-12)
        self.assertGreater(b["items_per_second"], 0)

    def test_profile_prints_the_top_ops(self):
        p = subprocess.run([sys.executable, str(ROOT / "scripts" / "profile.py"), str(self.out), "--batch", "1"],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("mnist_lenet cpu_own", p.stdout)
        rows = [l for l in p.stdout.splitlines() if l.startswith("| `")]
        self.assertEqual(sorted(r.split("`")[1] for r in rows),
                         sorted({"conv+bias+relu", "max_pool", "fc+bias+relu", "fc+bias", "log_softmax"}))
        calls = {r.split("`")[1]: int(r.split("|")[2]) for r in rows}
        self.assertEqual(calls, {"conv+bias+relu": 2, "max_pool": 2, "fc+bias+relu": 1, "fc+bias": 1,
                                 "log_softmax": 1})
        self.assertIn("(gap: pass - layers)", p.stdout)
        p = subprocess.run([sys.executable, str(ROOT / "scripts" / "profile.py"), str(self.out), "--batch", "1",
                            "--by-shape", "--row-limit", "3"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(len([l for l in p.stdout.splitlines() if l.startswith("| `")]), 3)

    def test_figures_draw_the_layers(self):
        p = subprocess.run([sys.executable, "-c", f"""
import sys; sys.path.insert(0, {str(ROOT / 'scripts')!r})
from dlbench.figures import layers
from dlbench.results import load
figs = layers.figures([load({str(self.out)!r})])
print(sorted(figs))
top = figs["layers_top"].axes
lenet_b1 = [ax for ax in top if ax.get_title() == "mnist_lenet, batch 1: top ops"][0]
print(len(lenet_b1.patches))
print(sorted(t.get_text() for t in lenet_b1.get_yticklabels()))
"""], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        names, bars, ops = p.stdout.splitlines()
        self.assertEqual(names, "['layers', 'layers_gap', 'layers_top']")
        self.assertEqual(bars, "5")  # one backend, five ops (their order is the measured times')
        self.assertEqual(ops, "['conv+bias+relu', 'fc+bias', 'fc+bias+relu', 'log_softmax', 'max_pool']")

    def test_profile_bad_inputs_exit_2(self):
        script = str(ROOT / "scripts" / "profile.py")
        for args in ([str(self.out), "--network", "resnet20"], [str(self.out), "--backend", "gpu_cudnn"],
                     [str(self.out), "--batch", "one"], [str(self.out), "--batch", "64"],
                     [str(self.out), "--row-limit", "0"], [str(Path(self.tmp.name) / "missing.json")]):
            p = subprocess.run([sys.executable, script, *args], capture_output=True, text=True)
            self.assertEqual(p.returncode, 2, (args, p.stdout, p.stderr))
            self.assertTrue(p.stderr.startswith("profile.py: "), p.stderr)


class NetworkCases(unittest.TestCase):
    """The network cases of two rows at batch 1, run once: what a pass holds
    and allocates, and where it goes."""

    @classmethod
    def setUpClass(cls):
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "networks.json"
            bench("--benchmark_filter=^mnist_lenet/cpu_(own|eigen)/batch:1/", "--benchmark_min_time=0.01",
                  f"--benchmark_out={out}", "--benchmark_out_format=json")
            cls.doc = json.loads(out.read_text())
        cls.cases = {split_name(b["run_name"]).variant: b for b in cls.doc["benchmarks"]}

    def test_what_a_pass_holds_and_what_it_allocates(self):
        cases = self.cases
        self.assertEqual(set(cases), {"cpu_own", "cpu_eigen"})
        for b in cases.values():
            self.assertGreater(b["peak_bytes"], 0)
        if self.doc["context"]["alloc_counting"] != "yes":
            self.assertTrue(self.doc["context"]["alloc_counting"].startswith("no"))
            self.assertNotIn("allocations_per_pass", cases["cpu_own"])
            return
        # cpu_own allocates everything in prepare; Eigen's GEMM allocates its
        # packing blocks in every product.
        self.assertEqual(cases["cpu_own"]["allocations_per_pass"], 0)
        self.assertEqual(cases["cpu_own"]["allocated_bytes_per_pass"], 0)
        self.assertGreater(cases["cpu_eigen"]["allocations_per_pass"], 0)
        self.assertGreater(cases["cpu_eigen"]["allocated_bytes_per_pass"], 0)

    def test_every_network_case_times_its_layers(self):
        for row, b in self.cases.items():
            with self.subTest(row=row):
                self.assertNotIn("error_occurred", b, b.get("error_message"))
                layers = [b[f"layer_us.{i}"] for i in range(len(LENET))]
                self.assertNotIn(f"layer_us.{len(LENET)}", b)
                for i, us in enumerate(layers):
                    self.assertGreater(us, 0, LENET[i])
                self.assertAlmostEqual(b["layers_us"], sum(layers), delta=1e-6 * b["layers_us"])


class Trace(unittest.TestCase):
    def test_trace_of_one_network_case(self):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "trace.json"
            p = bench("--benchmark_filter=^mnist_lenet/cpu_own/batch:1/", "--benchmark_min_time=0.01",
                      f"--trace={path}")
            self.assertIn(f"written to {path}", p.stderr)
            trace = json.loads(path.read_text())
        self.assertEqual(trace["otherData"]["case"], "mnist_lenet/cpu_own/batch:1")
        events = trace["traceEvents"]
        spans = [e for e in events if e["ph"] == "X"]
        named = {(e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
        processes = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
        self.assertEqual(processes, {1, 2})
        for e in spans:
            for field in ("name", "cat", "ph", "ts", "dur", "pid", "tid"):
                self.assertIn(field, e)
            self.assertGreaterEqual(e["ts"], 0)
            self.assertGreaterEqual(e["dur"], 0)
            self.assertIn((e["pid"], e["tid"]), named, e)
        # The first pass (with prepare) apart from the steady ones.
        self.assertEqual([e["name"] for e in spans if e["cat"] == "prepare"], ["prepare"])
        passes = [e for e in spans if e["cat"] == "pass"]
        self.assertEqual([(e["pid"], e["args"]["pass"]) for e in passes], [(1, 0)] + [(2, i) for i in range(1, 6)])
        for p in passes:
            layers = [e for e in spans if e["cat"] == "layer" and e["args"].get("pass") == p["args"]["pass"]]
            self.assertEqual([e["args"]["label"] for e in layers], LENET)
            end = p["ts"]
            for e in layers:  # in order, not overlapping, inside their pass (begin/end match)
                self.assertGreaterEqual(e["ts"], end - 1e-3)
                end = e["ts"] + e["dur"]
                self.assertLessEqual(end, p["ts"] + p["dur"] + 1e-3)
        self.assertTrue(all(a["ts"] <= b["ts"] for a, b in zip(passes, passes[1:])))

    def test_bad_trace_flags_exit_2(self):
        with tempfile.TemporaryDirectory() as d:
            for args, message in ((["--trace="], "--trace= needs a value, e.g. --trace="),
                                  ([f"--trace={d}/no/such/dir/t.json"], "cannot write"),
                                  ([f"--trace={d}/t.json", "--benchmark_filter=^daxpy/cpu_loop/n:1024/",
                                    "--benchmark_min_time=0.001"], "selects no case that writes a trace")):
                p = bench(*args, check=False)
                self.assertEqual(p.returncode, 2, (args, p.stderr))
                self.assertIn(message, p.stderr)


if __name__ == "__main__":
    unittest.main()
