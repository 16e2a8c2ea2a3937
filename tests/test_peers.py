"""scripts/peers and its package, without PyTorch: the seeded inputs are
bench's bit for bit, the comparison is reference/compare.cpp's, a peer whose
output is wrong gets an error entry and no time, the filter is bench's, and
the command line runs the NumPy peers (in .venv, DLB_PEERS_VENV) with the
others skipped in one line each, writing JSON the result scripts read.
tests/test_peers_torch.py runs the PyTorch, ONNX Runtime and OpenVINO peers
where .venv-peers exists."""

import json
import math
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from dlbench import seeded  # noqa: E402
from dlbench.peers import harness, ops  # noqa: E402
from dlbench.quality import quality  # noqa: E402
from dlbench.results import load  # noqa: E402

PEERS = ROOT / "scripts" / "peers"
BENCH = os.environ.get("DLB_BENCH", str(ROOT / "build" / "bench"))


def peers(*args, venv=".venv"):
    env = dict(os.environ, DLB_PEERS_VENV=venv, DLB_BENCH=BENCH)
    return subprocess.run([sys.executable, str(PEERS), *args], capture_output=True, text=True, env=env,
                          timeout=600)


class Seeded(unittest.TestCase):
    """The values tests/test_common.cpp (FillRandom.GoldenValues) pins on the C++ side."""

    def test_floats_match_bench(self):
        f = seeded.fill_random(4096, 51)
        self.assertEqual(seeded.fnv1a(f.tobytes()), 0xE954D11870D5C32A)
        self.assertEqual(float(f[578]), float.fromhex("-0x1.3d785cp+2"))

    def test_doubles_and_unit_random_match_bench(self):
        self.assertEqual(float(seeded.fill_random(1001, 51, np.float64)[1000]), float.fromhex("-0x1.02ce57e5f931cp-2"))
        self.assertEqual(float(seeded.unit_random(52, 7)), float.fromhex("0x1.827a53b5dd029p-1"))

    def test_prefix_stable_and_chunked_fills_agree(self):
        big = seeded.fill_random(seeded._CHUNK + 5, 3)
        np.testing.assert_array_equal(big[:100], seeded.fill_random(100, 3))
        self.assertNotEqual(float(seeded.fill_random(1, 4)[0]), float(big[0]))

    def test_outliers_about_one_in_a_thousand(self):
        f = seeded.fill_random(1 << 16, 5)
        share = float((np.abs(f) > 1).mean())
        self.assertGreater(share, 0.0005)
        self.assertLess(share, 0.002)


class Compare(unittest.TestCase):
    def test_scaled_by_the_block_max(self):
        ref = np.array([1000.0, 1.0, 1.0, 1.0])
        self.assertTrue(harness.compare(ref + [0, 0.005, 0, 0], ref, 1e-5).ok)  # 0.005 / 1000
        rows = harness.compare(np.array([1000.0, 1.0, 1.0, 1.005]), ref, 1e-5, block=2)
        self.assertFalse(rows.ok)  # the second row is scaled by its own max, 1
        self.assertEqual(rows.mismatches, 1)
        self.assertAlmostEqual(rows.max_rel_err, 0.005)
        self.assertIn("[3] got 1.005", rows.summary())

    def test_non_finite(self):
        ref = np.array([np.nan, np.inf, -np.inf, 1.0])
        self.assertTrue(harness.compare(ref.copy(), ref, 1e-5).ok)
        self.assertFalse(harness.compare([0.0, np.inf, -np.inf, 1.0], ref, 1e-5).ok)  # NaN expected
        self.assertFalse(harness.compare([np.nan, -np.inf, -np.inf, 1.0], ref, 1e-5).ok)  # wrong infinity
        wrong = harness.compare([1.0, np.nan], [1.0, 2.0], 1e-5)
        self.assertFalse(wrong.ok)
        self.assertTrue(math.isinf(wrong.max_rel_err))

    def test_shape(self):
        self.assertFalse(harness.compare(np.zeros(3), np.zeros(4), 1e-5).ok)


class Select(unittest.TestCase):
    def test_suffix_and_negative(self):
        s = harness.Selection("n:1024/real_time$")
        self.assertTrue(s("daxpy/peer_numpy/n:1024", "real_time"))
        self.assertFalse(s("daxpy/peer_numpy/n:10240", "real_time"))
        exclude = harness.Selection("-peer_torch")
        self.assertFalse(exclude("daxpy/peer_torch/n:1024", "real_time"))
        self.assertTrue(exclude("daxpy/peer_numpy/n:1024", "real_time"))

    def test_gpu_cases_only_with_a_device(self):
        session = harness.Session(harness.Selection("."), 1, 0.01, 1, gpu=False)
        self.assertFalse(session.selected("daxpy/peer_torch_cuda/n:1024", gpu=True))
        self.assertTrue(session.selected("daxpy/peer_numpy/n:1024"))


class Harness(unittest.TestCase):
    def session(self):
        return harness.Session(harness.Selection("."), 2, 0.001, 1, gpu=False)

    def test_wrong_output_gets_an_error_entry_and_no_time(self):
        s = self.session()
        out = np.arange(8.0)
        prepared = harness.Prepared(lambda: None, lambda: out + np.eye(8)[7], "planted")
        self.assertIsNone(s.check("op/peer_x/n:8", prepared, out, 1e-5))
        self.assertEqual(len(s.entries), 1)
        self.assertTrue(s.entries[0]["error_occurred"])
        self.assertIn("WRONG RESULT", s.entries[0]["error_message"])
        self.assertEqual(s.entries[0]["name"], "op/peer_x/n:8/real_time")

    def test_measured_entries_carry_rates_and_machine_state(self):
        s = self.session()
        prepared = harness.Prepared(lambda: sum(range(100)), lambda: np.zeros(1), "label")
        s.measure("op/peer_x/n:8", prepared, bytes_per_call=800.0, items_per_call=1.0, latency=True,
                  counters={"max_rel_err": 0.0})
        self.assertEqual(len(s.entries), 2)
        for e in s.entries:
            self.assertGreater(e["iterations"], 0)
            self.assertAlmostEqual(e["bytes_per_second"] * e["real_time"] * 1e-9, 800.0)
            self.assertLessEqual(e["latency_p50_us"], e["latency_p99_us"])
            self.assertIn(e["noisy"], (0.0, 1.0))
            self.assertEqual(e["label"], "label")

    def test_softmax_input_is_bench_mixed(self):
        x = ops.softmax_input(16, 10)
        self.assertTrue(np.isinf(x[1, 1::3]).all() and np.isfinite(x[1, 0::3]).all())
        self.assertEqual(int(np.isfinite(x[2]).sum()), 1)
        self.assertTrue((x[3] == x[3, 0]).all())
        self.assertGreater(float(np.abs(x[0]).min()), 9000)
        np.testing.assert_array_equal(x[4:], seeded.fill_random(160, 51).reshape(16, 10)[4:])
        ref = ops.softmax_reference(x, log=False)
        np.testing.assert_allclose(ref[1:].sum(axis=1), 1.0, rtol=1e-12)

    def test_conv_reference_against_a_direct_loop(self):
        x = seeded.fill_random(2 * 3 * 5 * 5, 1).reshape(2, 3, 5, 5)
        w = seeded.fill_random(4 * 3 * 3 * 3, 2).reshape(4, 3, 3, 3)
        got = ops.conv_reference(x, w, stride=2, pad=1)
        self.assertEqual(got.shape, (2, 4, 3, 3))
        xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
        want = np.zeros((2, 4, 3, 3))
        for n in range(2):
            for k in range(4):
                for i in range(3):
                    for j in range(3):
                        want[n, k, i, j] = (xp[n, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3] * w[k]).sum()
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)

    def test_round_bf16_ties_to_even(self):
        values = np.array([1.0 + 2**-8, 1.0 + 3 * 2**-8, 1.0 + 2**-9], dtype=np.float32)
        np.testing.assert_array_equal(ops.round_bf16(values), np.array([1.0, 1.0 + 2**-6, 1.0], dtype=np.float32))


def _entry(name, **counters):
    return {"name": name + "/real_time", "run_type": "iteration", "real_time": 1.0, "time_unit": "ns", **counters}


class PeerTable(unittest.TestCase):
    """figures/peers.py: what meets what."""

    def results(self):
        from dlbench.results import Results, parse_name, Case
        entries = [_entry("gemm/cpu_onednn_f32/m:64/n:64/k:64", flops=200e9),
                   _entry("gemm/cpu_onednn_bf16/m:64/n:64/k:64", flops=500e9),
                   _entry("gemm/peer_torch_f32/m:64/n:64/k:64", flops=100e9),
                   _entry("gemm/peer_torch_bf16/m:64/n:64/k:64", flops=1000e9),
                   _entry("gemm/gpu_cublas_f32/m:64/n:64/k:64", flops=9000e9),
                   _entry("gemm/peer_torch_cuda_f32/m:64/n:64/k:64", flops=3000e9),
                   _entry("resnet20/cpu_onednn/batch:64", items_per_second=5000.0),
                   _entry("resnet20/cpu_onednn_s8/batch:64", items_per_second=20000.0),
                   _entry("resnet20/peer_ort/batch:64", items_per_second=4000.0),
                   _entry("resnet20/peer_openvino_bf16/batch:64", items_per_second=9000.0),
                   _entry("daxpy/peer_numpy/n:1024", bytes_per_second=1e9)]  # no dlbench daxpy: no row
        cases = {}
        for e in entries:
            name, op, variant, args = parse_name(e["name"])
            cases[name] = Case(name, op, variant, args, [e])
        return Results(Path("t.json"), {"peers": {"peer_ort": "onnxruntime"}}, cases)

    def test_same_precision_and_device(self):
        from dlbench.figures import peers as table_module
        r = self.results()
        cpu = table_module.pairs(r, "gemm", "cpu")
        self.assertEqual([(label, o[1], t[1]) for label, o, t in cpu],
                         [("64x64x64 f32", "cpu_onednn_f32", "peer_torch_f32"),
                          ("64x64x64 bf16", "cpu_onednn_bf16", "peer_torch_bf16")])
        gpu = table_module.pairs(r, "gemm", "gpu")
        self.assertEqual([(o[1], t[1]) for _, o, t in gpu], [("gpu_cublas_f32", "peer_torch_cuda_f32")])
        nets = table_module.pairs(r, "networks", "cpu")
        self.assertEqual([(o[1], t[1]) for _, o, t in nets], [("cpu_onednn", "peer_ort")])  # fp32 only
        self.assertEqual(table_module.pairs(r, "daxpy", "cpu"), [])
        text = table_module.table(r)
        self.assertIn("| 64x64x64 bf16 | `cpu_onednn_bf16` | 500.0 | `peer_torch_bf16` | 1,000.0 | 0.50 |", text)
        self.assertIn("| resnet20, batch 64 | `cpu_onednn` | 5,000.0 | `peer_ort` | 4,000.0 | 1.25 |", text)
        self.assertIn("**gemm** (GPU", text)

    def test_plot_pairs_a_bench_file_with_a_peers_file(self):
        from dlbench.figures import peers as table_module
        from dlbench.results import Results
        r = self.results()
        ours = Results(Path("run.json"), {"machine": "m"}, {n: c for n, c in r.cases.items() if not c.is_peer})
        theirs = Results(Path("peers.json"), {"machine": "m"}, {n: c for n, c in r.cases.items() if c.is_peer})
        self.assertEqual(table_module.pairs(ours, "gemm", "cpu"), [])
        both = table_module.combined([ours, theirs])
        self.assertEqual(len(table_module.pairs(both, "gemm", "cpu")), 2)
        self.assertIn("peers", table_module.figures([ours, theirs]))
        elsewhere = Results(Path("x.json"), {"machine": "other"}, theirs.cases)
        self.assertEqual(table_module.figures([ours, elsewhere]), {})


@unittest.skipUnless(Path(BENCH).exists(), f"{BENCH} not built")
class CommandLine(unittest.TestCase):
    FILTER = ("^daxpy/peer_(numpy|torch)/n:1024$|^softmax/peer_(numpy|torch)/rows:1/|^log_softmax/peer_numpy/rows:128/"
              "|^gemm/peer_numpy_f32/m:64/n:10/|^conv/peer_torch/n:1/c:3/")

    def test_numpy_peers_run_and_the_rest_are_skipped_in_one_line(self):
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "p.json"
            p = peers(f"--benchmark_filter={self.FILTER}", "--benchmark_repetitions=2", "--benchmark_min_time=0.01",
                      f"--benchmark_out={out}")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertNotIn("Traceback", p.stderr)
            self.assertEqual(p.stderr.count("peer_torch skipped: torch not installed"), 1, p.stderr)
            results = load(out)
            names = sorted(results.cases)
            self.assertEqual(names, ["daxpy/peer_numpy/n:1024", "gemm/peer_numpy_f32/m:64/n:10/k:64",
                                     "log_softmax/peer_numpy/rows:128/cols:1024",
                                     "softmax/peer_numpy/rows:1/cols:1000000"])
            for case in results.cases.values():
                self.assertIsNone(case.error, case.name)
                self.assertEqual(len(case.runs), 2)
                self.assertLess(case.median("max_rel_err"), 1e-5)
            self.assertIsNotNone(results.cases["daxpy/peer_numpy/n:1024"].median("bytes_per_second"))
            self.assertIsNotNone(results.cases["gemm/peer_numpy_f32/m:64/n:10/k:64"].median("flops"))
            self.assertTrue(quality(results).recorded)
            self.assertIn("numpy", results.context["peers"]["daxpy/peer_numpy"])
            self.assertEqual(results.context["executable"], "scripts/peers")
            self.assertRegex(results.context["peers_git_commit"], r"^[0-9a-f]{40}(-dirty)?$")
            # the result scripts take it as they take bench's files
            plotted = subprocess.run([sys.executable, str(ROOT / "scripts" / "plot.py"), str(out), "--out-dir", d],
                                     capture_output=True, text=True)
            self.assertEqual(plotted.returncode, 0, plotted.stderr)
            self.assertTrue((Path(d) / "daxpy.png").exists())
            compared = subprocess.run([sys.executable, str(ROOT / "scripts" / "compare.py"), str(out), str(out)],
                                      capture_output=True, text=True)
            self.assertIn(compared.returncode, (0, 3), compared.stdout + compared.stderr)
            self.assertIn("daxpy/peer_numpy/n:1024", compared.stdout)

    def test_list_tests_matches_bench_names(self):
        p = peers("--benchmark_list_tests", "--benchmark_filter=^(softmax|conv|gemm|daxpy)/")
        self.assertEqual(p.returncode, 0, p.stderr)
        listed = p.stdout.split()
        bench = subprocess.run([BENCH, "--benchmark_list_tests"], capture_output=True, text=True, check=True)

        def shape(name):  # the part after the variant
            parts = name.split("/")
            return (parts[0], "/".join(parts[2:]))
        ours = {shape(n) for n in bench.stdout.split() if n.split("/")[0] in ("softmax", "conv", "gemm", "daxpy")}
        self.assertIn("daxpy/peer_numpy/n:67108864/real_time", listed)
        self.assertIn("conv/peer_torch_channels_last/n:64/c:32/h:26/w:26/k:64/r:3/s:3/stride:1/pad:0/real_time",
                      listed)
        # every shape a peer runs is one bench runs too (same names after the variant)
        self.assertLessEqual({shape(n) for n in listed}, ours)
        self.assertFalse([n for n in listed if "cuda" in n])  # no GPU here: GPU peers not registered

    def test_append_to_adds_to_a_run_of_the_same_machine(self):
        with tempfile.TemporaryDirectory() as d:
            run = Path(d) / "run.json"
            subprocess.run([BENCH, "--benchmark_filter=^daxpy/cpu_loop/n:1024/", "--benchmark_min_time=0.001",
                            f"--benchmark_out={run}", "--benchmark_out_format=json"], capture_output=True, check=True)
            p = peers("--benchmark_filter=^daxpy/peer_numpy/n:1024$", "--benchmark_repetitions=1",
                      "--benchmark_min_time=0.01", f"--append-to={run}")
            self.assertEqual(p.returncode, 0, p.stderr)
            names = sorted(load(run).cases)
            self.assertEqual(names, ["daxpy/cpu_loop/n:1024", "daxpy/peer_numpy/n:1024"])
            other = json.loads(run.read_text())
            other["context"]["machine"] = "elsewhere"
            run.write_text(json.dumps(other))
            p = peers("--benchmark_filter=^daxpy/peer_numpy/n:1024$", "--benchmark_repetitions=1",
                      "--benchmark_min_time=0.01", f"--append-to={run}")
            self.assertEqual(p.returncode, 2)
            self.assertIn("is from machine 'elsewhere'", p.stderr)
            self.assertNotIn("daxpy/peer_numpy/n:1024", p.stdout)  # refused before the peers ran
            run.write_text("{not json")
            p = peers("--benchmark_filter=^daxpy/peer_numpy/n:1024$", f"--append-to={run}")
            self.assertEqual(p.returncode, 2)
            self.assertIn("not JSON", p.stderr)
            self.assertNotIn("Traceback", p.stderr)

    def test_bad_arguments_are_one_line_and_exit_2(self):
        for args, expected in ((["--benchmark_filter=("], "not a regular expression"),
                               (["--benchmark_repetitions=0"], "must be >= 1"),
                               (["--benchmark_min_time=soon"], "not a time in seconds"),
                               (["--append-to=/nonexistent/run.json"], "no such file"),
                               (["--frobnicate"], "unrecognized arguments")):
            p = peers(*args)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn(expected, p.stderr)
            self.assertNotIn("Traceback", p.stderr)

    def test_nothing_matched_says_so(self):
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "p.json"
            p = peers("--benchmark_filter=^no_such_case$", f"--benchmark_out={out}")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("no peer case ran", p.stderr)
            self.assertFalse(out.exists())  # no empty file in results/


if __name__ == "__main__":
    unittest.main()
