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
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from dlbench import seeded  # noqa: E402
from dlbench.peers import harness, networks, ops, training  # noqa: E402
from dlbench.names import precision_of, split_name, words_of  # noqa: E402
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


def _results(entries, context):
    """A run of one repetition per entry, under `context`."""
    from dlbench.results import Case, Results, parse_name
    cases = {}
    for e in entries:
        name, op, variant, args = parse_name(e["name"])
        cases[name] = Case(name, op, variant, args, [e])
    return Results(Path("t.json"), context, cases)


class PeerTable(unittest.TestCase):
    """figures/peers.py: what meets what."""

    def results(self):
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
        return _results(entries, {"peers": {"peer_ort": "onnxruntime"}})

    def test_same_precision_and_device(self):
        from dlbench.figures import peers as table_module
        r = self.results()
        cpu = table_module.pairs(r, "gemm", "cpu")
        self.assertEqual([(label, o[1], t[1]) for label, o, t in cpu],
                         [("64x64x64 fp32", "cpu_onednn_f32", "peer_torch_f32"),
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

    def test_gpu_networks_meet_peers_of_their_precision_in_a_block_each(self):
        from dlbench.figures import peers as table_module
        entries = [_entry("resnet20/gpu_cudnn_graph/batch:1024", items_per_second=200000.0),
                   _entry("resnet20/gpu_cudnn_f16/batch:1024", items_per_second=400000.0),
                   _entry("resnet20/gpu_cudnn_mixed_f16/batch:1024", items_per_second=380000.0),
                   _entry("resnet20/peer_torch_cuda_compile/batch:1024", items_per_second=250000.0),
                   _entry("resnet20/peer_torch_cuda_graph_f16/batch:1024", items_per_second=300000.0),
                   _entry("resnet20/peer_torch_cuda_compile_f16/batch:1024", items_per_second=350000.0),
                   _entry("resnet20/gpu_own_s8/batch:1024", items_per_second=900000.0)]  # no int8 peer: no row
        r = _results(entries, {})
        found = table_module.pairs(r, "networks", "gpu")
        self.assertEqual([(label, o[1], t[1]) for label, o, t in found],
                         [("resnet20, batch 1024", "gpu_cudnn_graph", "peer_torch_cuda_compile"),
                          ("resnet20, batch 1024 fp16", "gpu_cudnn_f16", "peer_torch_cuda_compile_f16")])
        text = table_module.table(r)
        self.assertIn("**networks** (GPU, images/s; dlbench / peer: geometric mean 0.80, 0 of 1 shapes >= 1)", text)
        self.assertIn("**networks** (GPU, fp16, images/s; dlbench / peer: geometric mean 1.14, 1 of 1 shapes >= 1)",
                      text)

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


class GpuTrainingPeers(unittest.TestCase):
    """The GPU training-step peers' names, order and registration, without
    PyTorch or a GPU (they run only where PyTorch sees one)."""

    MODES = ("peer_torch_cuda", "peer_torch_cuda_graph", "peer_torch_cuda_compile")

    def test_names_order_and_compiled_last(self):
        from dlbench.results import Case, parse_name
        gpu = harness.Session(harness.Selection("_train/"), 1, 0.001, 1, gpu=True)
        cases = training.wanted_cases(gpu)
        per_mode = len(training.NETWORK_NAMES) * len(training.BATCHES)  # 3 networks x 2 batches
        self.assertEqual(training.NETWORK_NAMES, ("resnet20", "mnist_cnn", "mnist_lenet"))
        cpu_modes = len(training.CPU_PEERS)
        self.assertEqual(len(cases), per_mode * (cpu_modes + len(self.MODES)))
        self.assertEqual(cases[0], ("resnet20", "peer_torch", 64))
        self.assertEqual([p for _, p, _ in cases[cpu_modes * per_mode:]],
                         [m for m in self.MODES for _ in range(per_mode)])
        self.assertEqual(training.wanted_cases(gpu, compiled=True),
                         [(n, p, b) for p in ("peer_torch_compile", "peer_torch_cuda_compile")
                          for n in training.NETWORK_NAMES for b in training.BATCHES])
        self.assertNotIn("peer_torch_cuda_compile", {p for _, p, _ in training.wanted_cases(gpu, compiled=False)})
        for mode in self.MODES:
            name, op, variant, args = parse_name(f"mnist_cnn_train/{mode}/batch:256/manual_time")
            self.assertEqual((op, variant, args), ("mnist_cnn_train", mode, {"batch": 256}))
            self.assertEqual(Case(name, op, variant, args).runs_on, "gpu")
        # bench's GPU step: the copy mode is part of the name, not an argument
        name, op, variant, args = parse_name("mnist_cnn_train/gpu_cudnn/batch:64/h2d:overlap/manual_time")
        self.assertEqual((name, variant, args), ("mnist_cnn_train/gpu_cudnn/batch:64/h2d:overlap", "gpu_cudnn",
                                                 {"batch": 64}))

    def test_none_without_a_gpu(self):
        cpu = harness.Session(harness.Selection("_train/"), 1, 0.001, 1, gpu=False)
        self.assertEqual({p for _, p, _ in training.wanted_cases(cpu)}, set(training.CPU_PEERS))
        self.assertEqual(training.wanted_cases(harness.Session(harness.Selection("cuda"), 1, 0.001, 1, gpu=False)), [])

    def test_listed_without_a_gpu_with_list_gpu(self):
        kit = "^(resnet20|mnist_cnn|mnist_lenet)_train/peer_torch_cuda[a-z_]*/batch:(64|256)$"  # scripts/gpu-kit's
        p = peers("--benchmark_list_tests", "--list_gpu", f"--benchmark_filter={kit}", venv="system")
        self.assertEqual(p.returncode, 0, p.stderr)
        listed = p.stdout.split()
        self.assertEqual(len(listed), 18)
        self.assertEqual(listed[0], "resnet20_train/peer_torch_cuda/batch:64/manual_time")
        self.assertEqual({split_name(n).variant for n in listed}, set(self.MODES))
        p = peers("--benchmark_list_tests", f"--benchmark_filter={kit}")
        self.assertEqual((p.returncode, p.stdout.strip()), (0, ""))  # no GPU here: none registered


class GpuEpochPeers(unittest.TestCase):
    """The epoch peer (scripts/dlbench/peers/epoch.py, issue 46): listed for
    a GPU by the kit's filter, registered nowhere without one."""

    def test_listed_by_the_kits_filter_without_a_gpu_with_list_gpu(self):
        kit = re.search(r"^peers_filter='(.*)'$", (ROOT / "scripts" / "gpu-kit").read_text(), re.M)[1]
        p = peers("--benchmark_list_tests", "--list_gpu", f"--benchmark_filter={kit}", venv="system")
        self.assertEqual(p.returncode, 0, p.stderr)
        epochs = [n for n in p.stdout.split() if "_epoch/" in n]
        self.assertEqual(epochs, ["mnist_cnn_epoch/peer_torch_cuda_graph/batch:64/manual_time",
                                  "mnist_lenet_epoch/peer_torch_cuda_graph/batch:64/manual_time"])
        p = peers("--benchmark_list_tests", "--benchmark_filter=_epoch/")
        self.assertEqual((p.returncode, p.stdout.strip()), (0, ""))  # no GPU here: none registered


class CpuTrainingPeers(unittest.TestCase):
    """The CPU training-step peers' modes (issue 47: eager, channels_last,
    torch.compile): names, order, and what each mode sets up, on a fake
    torch (no PyTorch here; tests/test_peers_torch.py runs them on the real
    one)."""

    MODES = ("peer_torch", "peer_torch_cl", "peer_torch_compile")

    def test_names_order_and_compiled_last(self):
        from dlbench.results import Case, parse_name
        self.assertEqual(training.CPU_PEERS, self.MODES)
        cpu = harness.Session(harness.Selection("_train/"), 1, 0.001, 1, gpu=False)
        cases = training.wanted_cases(cpu)
        per_mode = len(training.NETWORK_NAMES) * len(training.BATCHES)
        self.assertEqual([p for _, p, _ in cases], [m for m in self.MODES for _ in range(per_mode)])
        self.assertEqual({p for _, p, _ in training.wanted_cases(cpu, compiled=True)}, {"peer_torch_compile"})
        self.assertNotIn("peer_torch_compile", {p for _, p, _ in training.wanted_cases(cpu, compiled=False)})
        for mode in self.MODES:
            name, op, variant, args = parse_name(f"resnet20_train/{mode}/batch:64/real_time")
            self.assertEqual((op, variant, args), ("resnet20_train", mode, {"batch": 64}))
            self.assertEqual(Case(name, op, variant, args).runs_on, "cpu")
        # the network peers' CPU compiled mode has the same name (networks.PEERS)
        self.assertIn("peer_torch_compile", networks.PEERS)
        self.assertFalse(networks.PEERS["peer_torch_compile"][0])

    def test_only_channels_last_gets_the_fp32_statistics_allowance(self):
        # cpu_onednn's allowance (kernels/nn/train/train.h) for PyTorch's
        # channels_last batch norm, which sums its statistics in fp32; the
        # eager NCHW mode sums in double and the compiled one passes without
        self.assertEqual(training.FP32_BATCH_STATS, {"peer_torch_cl"})

    @unittest.skipUnless(Path(BENCH).exists(), f"{BENCH} not built")
    def test_listed(self):
        p = peers("--benchmark_list_tests", "--benchmark_filter=^mnist_cnn_train/peer_torch", venv="system")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.split(), [f"mnist_cnn_train/{m}/batch:{b}/real_time" for m in self.MODES
                                            for b in training.BATCHES]
                         + [f"mnist_cnn_train/peer_torch/batch:{b}/workers:{w}/real_time"  # the loaded cases
                            for b in training.BATCHES for w in training.LOADED_WORKERS])

    def fake(self):
        """A fake torch, model, batch and loss that record what _cpu_step does to them."""
        from types import SimpleNamespace
        log = []

        class Tensor:
            def __init__(self, name):
                self.name = name

            def contiguous(self, memory_format=None):
                log.append(("contiguous", self.name, memory_format))
                return Tensor(f"{self.name}:{memory_format}")

            def detach(self):
                return self

            def double(self):
                return self

            def numpy(self):
                return np.ones(2)

        class Loss:
            def backward(self):
                log.append(("backward",))

            def __float__(self):
                return 0.5

        class Model:
            def __init__(self):
                self.weight = SimpleNamespace(grad=Tensor("grad"))

            def __call__(self, x):
                log.append(("forward", "eager", x.name))
                return Tensor("out")

            def to(self, memory_format=None):
                log.append(("model.to", memory_format))
                return self

            def parameters(self):
                return [self.weight]

            def named_parameters(self):
                return [("weight", self.weight)]

        class SGD:
            def __init__(self, params, lr, momentum):
                log.append(("SGD", lr, momentum))

            def zero_grad(self, set_to_none):
                log.append(("zero_grad", set_to_none))

            def step(self):
                log.append(("opt.step",))

        def compile_(model, dynamic=None, **kwargs):
            log.append(("compile", dynamic, tuple(sorted(kwargs))))

            def compiled(x):
                log.append(("forward", "compiled", x.name))
                return Tensor("out")
            return compiled

        config = SimpleNamespace(recompile_limit=8, fail_on_recompile_limit_hit=False)
        torch = SimpleNamespace(channels_last="channels_last", compile=compile_,
                                optim=SimpleNamespace(SGD=SGD),
                                _dynamo=SimpleNamespace(reset=lambda: log.append(("dynamo.reset",)), config=config))
        return torch, Model(), Tensor("x"), lambda out, y: Loss(), log

    def test_each_mode_sets_up_its_step(self):
        for mode in self.MODES:
            with self.subTest(mode):
                torch, model, x, loss_of, log = self.fake()
                step, gradients, memory, words = training._cpu_step(mode, model, x, "y", torch, loss_of)
                grads, loss, logits = gradients()
                self.assertEqual((list(grads), loss, list(logits)), (["weight"], 0.5, [1.0, 1.0]))
                step()
                forwards = [e for e in log if e[0] == "forward"]
                if mode == "peer_torch":
                    self.assertEqual(words, "eager")
                    self.assertEqual(forwards, [("forward", "eager", "x")] * 2)
                    self.assertIsNotNone(memory)  # bench's memory counters: the eager modes
                elif mode == "peer_torch_cl":
                    self.assertIn("channels_last", words)
                    self.assertIn(("model.to", "channels_last"), log)  # the weights NHWC
                    self.assertEqual(forwards, [("forward", "eager", "x:channels_last")] * 2)  # and the batch
                    self.assertIsNotNone(memory)
                else:
                    self.assertIn("torch.compile", words)
                    self.assertIn(("compile", False, ()), log)  # inductor's default mode, a graph per shape
                    self.assertLess(log.index(("dynamo.reset",)), log.index(("compile", False, ())))
                    self.assertGreaterEqual(torch._dynamo.config.recompile_limit, 64)
                    self.assertIs(torch._dynamo.config.fail_on_recompile_limit_hit, True)
                    self.assertEqual(forwards, [("forward", "compiled", "x")] * 2)
                    self.assertIsNone(memory)  # the hooks do not see inside inductor's kernels
                    self.assertIn("peer_torch_compile", training.COMPILED)  # watched: no compilation when timed
                if mode != "peer_torch_compile":
                    self.assertNotIn("compile", [e[0] for e in log])
                if mode != "peer_torch_cl":
                    self.assertNotIn("model.to", [e[0] for e in log])
                # the step: zero_grad, forward, backward, the optimizer's step, as bench's
                self.assertEqual([e[0] for e in log if e[0] in ("zero_grad", "forward", "backward", "opt.step")][-4:],
                                 ["zero_grad", "forward", "backward", "opt.step"])
                self.assertIn(("SGD", training.LR, training.MOMENTUM), log)


class GpuNetworkPeers(unittest.TestCase):
    """The GPU network peers' names, order, validation and time budget, without
    PyTorch or a GPU (the peers themselves run only where PyTorch sees one)."""

    MODES = ("peer_torch_cuda", "peer_torch_cudnn_benchmark", "peer_torch_cuda_graph", "peer_torch_cuda_graph_tf32",
             "peer_torch_cuda_f16", "peer_torch_cuda_f16_cl", "peer_torch_cuda_graph_f16",
             "peer_torch_cuda_graph_f16_cl", "peer_torch_cuda_compile", "peer_torch_cuda_compile_f16",
             "peer_torch_cuda_compile_f16_cl")
    PRECISION = {"peer_torch_cuda_graph_tf32": "tf32", "peer_torch_cuda_f16": "fp16", "peer_torch_cuda_f16_cl": "fp16",
                 "peer_torch_cuda_graph_f16": "fp16", "peer_torch_cuda_graph_f16_cl": "fp16",
                 "peer_torch_cuda_compile_f16": "fp16", "peer_torch_cuda_compile_f16_cl": "fp16"}

    def gpu_session(self, pattern="."):
        return harness.Session(harness.Selection(pattern), 1, 0.001, 1, gpu=True)

    def test_names_precision_and_batches(self):
        from dlbench.names import precision_of
        from dlbench.results import parse_name
        for mode in self.MODES:
            gpu, precision, _ = networks.PEERS[mode]
            self.assertTrue(gpu, mode)
            self.assertEqual(precision, self.PRECISION.get(mode, "fp32"), mode)
            self.assertEqual(precision, precision_of(mode), mode)  # what the figures read off the name
            name, op, variant, args = parse_name(f"resnet20/{mode}/batch:1024/manual_time")
            self.assertEqual((op, variant, args), ("resnet20", mode, {"batch": 1024}))
        from dlbench.results import Case
        self.assertEqual({Case("x", "resnet20", m, {}).runs_on for m in self.MODES}, {"gpu"})
        self.assertLessEqual({1, 64, 1024}, set(networks.GPU_BATCHES))

    def test_compiled_peers_run_last_network_by_network(self):
        cases = networks.wanted_cases(self.gpu_session(r"peer_torch_cud.*/batch:(1|1024)$"))
        self.assertEqual(len(cases), 3 * len(self.MODES) * 2)
        pairs = list(dict.fromkeys((net, peer) for net, peer, _ in cases))
        compiled = [p for p in pairs if p[1] in networks.COMPILED]
        self.assertEqual(pairs[-len(compiled):], compiled)  # every compiled peer after every other
        self.assertEqual(compiled, [(net, peer) for net in networks.NETWORK_NAMES
                                    for peer in ("peer_torch_cuda_compile", "peer_torch_cuda_compile_f16",
                                                 "peer_torch_cuda_compile_f16_cl")])
        # every fp16 mode has its channels_last twin, a mode of its own
        f16 = [m for m in self.MODES if precision_of(m) == "fp16" and words_of(m)[-1] != "cl"]
        self.assertEqual(len(f16), 3)
        self.assertEqual([m for m in self.MODES if precision_of(m) == "fp16" and words_of(m)[-1] == "cl"],
                         [m + "_cl" for m in f16])
        self.assertEqual(pairs[:3], [(net, "peer_torch_cuda") for net in networks.NETWORK_NAMES])
        self.assertEqual([b for net, p, b in cases if (net, p) == ("resnet20", "peer_torch_cuda")], [1, 1024])
        self.assertEqual(networks.wanted_cases(harness.Session(harness.Selection("cuda"), 1, 0.001, 1, gpu=False)),
                         [])

    @unittest.skipUnless(Path(BENCH).exists(), f"{BENCH} not built")
    def test_layers_are_bench_layers(self):
        """The L of the 16-bit bound is the layer count of bench's network (its <net>_layer cases)."""
        listed = subprocess.run([BENCH, "--benchmark_list_tests", "--benchmark_filter=_layer/cpu_own/batch:1/layer:"],
                                capture_output=True, text=True, check=True).stdout.split()
        for net, layers in networks.LAYERS.items():
            prefix = f"{net}_layer/cpu_own/batch:1/layer:"
            self.assertEqual(len({n for n in listed if n.startswith(prefix)}), layers, net)

    def test_f16_tolerance_is_bench_rule_with_three_roundings(self):
        self.assertEqual(networks.tolerance_for("fp32", "resnet20"), 1e-5)
        self.assertAlmostEqual(networks.tolerance_for("fp16", "resnet20"), math.sqrt(3 * 23) * 2.0 ** -11)
        self.assertAlmostEqual(networks.tolerance_for("fp16", "mnist_cnn"), math.sqrt(3 * 6) * 2.0 ** -11)
        # bench's gpu_cudnn_f16 (k = 2) on a 21-layer chain: the 3.2e-3 kernels/nn/infer/nn.cpp states
        self.assertAlmostEqual(networks.sixteen_bit_tolerance(2, 11, 21), 3.16e-3, places=5)
        for net in networks.NETWORK_NAMES:
            self.assertLess(networks.tolerance_for("fp16", net), 1e-2)  # a wrong layer (1e-1 or more) fails

    def planted(self, n=300, classes=10, seed=1):
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((n, 4)).astype(np.float32)
        w = rng.standard_normal((4, classes))
        logits = x.astype(np.float64) @ w
        return x, w, logits, logits.argmax(1)

    def test_chunked_validation_runs_only_the_timed_batch(self):
        x, w, logits, predictions = self.planted()
        seen = set()

        def predict(batch):
            seen.add(len(batch))
            return (batch.astype(np.float64) @ w).astype(np.float32)

        peer = networks.Peer(predict, "planted", static_shapes=True)
        problem, counters = networks._validate(peer, "fp16", x, predictions, logits[:64], predictions, 1e-3, chunk=128)
        self.assertIsNone(problem)
        self.assertEqual(seen, {128})  # 300 images in 3 batches of 128, the last filled up
        self.assertEqual(counters["torch_disagreements"], 0.0)
        self.assertEqual(counters["accuracy"], 1.0)

    def test_f16_rows_are_held_to_their_bound_and_to_one_percent(self):
        x, w, logits, predictions = self.planted(n=1000)
        off = networks.Peer(lambda b: (b.astype(np.float64) @ w * 1.01).astype(np.float32), "1% off")
        problem, _ = networks._validate(off, "fp16", x, predictions, logits[:64], predictions,
                                        networks.tolerance_for("fp16", "resnet20"))
        self.assertRegex(problem, r"max_rel_err .* \(tolerance 0.00406\)")
        flipped = predictions.copy()
        flipped[:11] = (flipped[:11] + 1) % 10  # 11 of 1000 differ: over 1%
        exact = networks.Peer(lambda b: (b.astype(np.float64) @ w).astype(np.float32), "exact")
        problem, counters = networks._validate(exact, "fp16", x, predictions, logits[:64], flipped, 1e-3)
        self.assertEqual(problem, "top-1 differs from PyTorch's on 11 test images (at most 10)")
        ten = np.r_[flipped[:10], predictions[10:]]
        problem, _ = networks._validate(exact, "fp16", x, predictions, logits[:64], ten, 1e-3)
        self.assertIsNone(problem)  # 10 of 1000: within 1%
        problem, _ = networks._validate(exact, "fp32", x, predictions, logits[:64], np.r_[flipped[:6], predictions[6:]])
        self.assertEqual(problem, "top-1 differs from PyTorch's on 6 test images (at most 5)")

    def test_time_budget_records_what_it_leaves_out(self):
        s = harness.Session(harness.Selection("."), 1, 0.001, 1, gpu=False, budget=1e-9)
        prepared = harness.Prepared(lambda: None, lambda: np.zeros(1), "x")
        s.measure("op/peer_x/n:1", prepared)
        self.assertTrue(s.out_of_time(["op/peer_y/n:2"], gpu=True))
        self.assertEqual(s.entries, [])
        self.assertEqual(s.not_run, ["op/peer_x/n:1/real_time", "op/peer_y/n:2/manual_time"])
        self.assertFalse(harness.Session(harness.Selection("."), 1, 0.001, 1, gpu=False).out_of_time(["a/b/c:1"]))

    def test_system_means_the_current_interpreter(self):
        from dlbench import venv
        old = os.environ.get("DLB_PEERS_VENV")
        try:
            os.environ["DLB_PEERS_VENV"] = "system"
            self.assertIsNone(venv.peers_venv())
            os.environ["DLB_PEERS_VENV"] = ".venv"
            self.assertEqual(venv.peers_venv(), venv.ROOT / ".venv")
        finally:
            if old is None:
                os.environ.pop("DLB_PEERS_VENV", None)
            else:
                os.environ["DLB_PEERS_VENV"] = old
        path = list(sys.path)
        try:
            venv.reexec("test", None)  # returns: nothing to re-execute, nothing installed
            # and takes scripts/ off the path: scripts/profile.py would shadow the standard library's
            # profile, which torch.compile imports (through cProfile), and re-execute the process in .venv
            self.assertNotIn(ROOT / "scripts", [Path(p or ".").resolve() for p in sys.path])
        finally:
            sys.path[:] = path  # reexec took scripts/ off it


def fake_torch(precision_api: bool = True, conv_precision: str = "tf32"):
    """The attributes of torch.backends the settings touch, at PyTorch's
    defaults (TF32 allowed for cuDNN, cudnn.benchmark off), with or without
    PyTorch 2.9's per-operator precisions, whose legacy setters write
    'none' for conv (left as a plain attribute here: set_fp32_math must read
    it back and set it itself where it still says 'tf32')."""
    from types import SimpleNamespace
    cudnn = SimpleNamespace(allow_tf32=True, benchmark=True, deterministic=False)
    matmul = SimpleNamespace(allow_tf32=True, allow_fp16_reduced_precision_reduction=True)
    if precision_api:
        cudnn.conv = SimpleNamespace(fp32_precision=conv_precision)
        matmul.fp32_precision = "tf32"
    return SimpleNamespace(backends=SimpleNamespace(cudnn=cudnn, cuda=SimpleNamespace(matmul=matmul)))


class Fp32Settings(unittest.TestCase):
    """What the GPU peers pin (finding 8 of the H200 run, issue 44's tf32 mode),
    on a fake torch: no PyTorch here."""

    def assert_strict(self, torch):
        self.assertIs(torch.backends.cudnn.allow_tf32, False)
        self.assertIs(torch.backends.cuda.matmul.allow_tf32, False)
        self.assertIs(torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction, False)
        self.assertEqual(torch.backends.cudnn.conv.fp32_precision, "ieee")
        self.assertEqual(torch.backends.cuda.matmul.fp32_precision, "ieee")

    def test_training_peers_pin_strict_fp32_through_both_apis(self):
        torch = fake_torch()
        self.assertEqual(training._cuda_torch(torch), "TF32 off")
        self.assert_strict(torch)
        self.assertIs(torch.backends.cudnn.benchmark, False)
        self.assertIs(torch.backends.cudnn.deterministic, False)  # PyTorch's default, kept (see _cuda_torch)
        old = fake_torch(precision_api=False)  # a PyTorch before 2.9: the legacy flags alone
        training._cuda_torch(old)
        self.assertIs(old.backends.cudnn.allow_tf32, False)
        self.assertIs(old.backends.cuda.matmul.allow_tf32, False)
        self.assertFalse(hasattr(old.backends.cudnn, "conv"))

    def test_network_peers_strict_and_tf32_modes(self):
        torch = fake_torch()
        self.assertEqual(networks._cuda_torch(torch, "fp16"), "TF32 off")
        self.assert_strict(torch)
        words = networks._cuda_torch(torch, "tf32")  # PyTorch's defaults: TF32 for cuDNN's convolutions only
        self.assertIn("TF32 on for convolutions", words)
        self.assertIs(torch.backends.cudnn.allow_tf32, True)
        self.assertEqual(torch.backends.cudnn.conv.fp32_precision, "tf32")
        self.assertIs(torch.backends.cuda.matmul.allow_tf32, False)
        self.assertEqual(torch.backends.cuda.matmul.fp32_precision, "ieee")
        networks._cuda_torch(torch, "fp32")  # back to strict after the tf32 mode: the settings are global
        self.assert_strict(torch)
        none = fake_torch(conv_precision="none")  # what the legacy setter leaves: deferring to 'ieee'
        networks._cuda_torch(none)
        self.assertEqual(none.backends.cudnn.conv.fp32_precision, "none")

    def test_tf32_tolerance_from_a_10_bit_mantissa(self):
        self.assertAlmostEqual(networks.tolerance_for("tf32", "resnet20"), math.sqrt(2 * 23) * 2.0 ** -10)
        self.assertAlmostEqual(networks.tolerance_for("tf32", "mnist_cnn"), math.sqrt(2 * 6) * 2.0 ** -10)
        self.assertAlmostEqual(networks.tolerance_for("tf32", "mnist_lenet"), math.sqrt(2 * 7) * 2.0 ** -10)
        for net in networks.NETWORK_NAMES:
            self.assertGreater(networks.tolerance_for("tf32", net), networks.tolerance_for("fp32", net))
            self.assertLess(networks.tolerance_for("tf32", net), 1e-2)  # a wrong layer (1e-1 or more) fails
        # judged like the 16-bit rows: up to 1% of the test images may differ from PyTorch's fp32 answers
        rng = np.random.default_rng(3)
        x = rng.standard_normal((1000, 4)).astype(np.float32)
        w = rng.standard_normal((4, 10))
        logits = x.astype(np.float64) @ w
        predictions = logits.argmax(1)
        exact = networks.Peer(lambda b: (b.astype(np.float64) @ w).astype(np.float32), "exact")
        ten = np.r_[(predictions[:10] + 1) % 10, predictions[10:]]
        self.assertIsNone(networks._validate(exact, "tf32", x, predictions, logits[:64], ten, 1e-3)[0])
        self.assertIsNotNone(networks._validate(exact, "fp32", x, predictions, logits[:64], ten, 1e-3)[0])

    def test_precision_read_off_the_new_names(self):
        from dlbench.names import is_fp32, precision_of
        self.assertEqual(precision_of("peer_torch_cuda_graph_f16_cl"), "fp16")
        self.assertEqual(precision_of("peer_torch_cuda_compile_f16_cl"), "fp16")
        self.assertEqual(precision_of("peer_torch_cuda_graph_tf32"), "tf32")
        self.assertEqual(precision_of("peer_torch_cuda_graph"), "fp32")
        self.assertEqual(precision_of("peer_torch_channels_last"), "fp32")  # the CPU conv peer: fp32
        self.assertFalse(is_fp32("peer_torch_cuda_graph_tf32"))  # not PyTorch's best fp32 mode
        # the GPU targets' best PyTorch mode per precision: channels_last counts as fp16, tf32 not as fp32
        from dlbench.figures import gpu_targets
        from dlbench.results import Case, parse_name
        cases = []
        for variant, rate in (("peer_torch_cuda_graph", 100.0), ("peer_torch_cuda_graph_tf32", 300.0),
                              ("peer_torch_cuda_graph_f16", 400.0), ("peer_torch_cuda_graph_f16_cl", 500.0)):
            name, op, v, args = parse_name(f"resnet20/{variant}/batch:64/manual_time")
            cases.append(Case(name, op, v, args, [_entry(name, items_per_second=rate)]))
        self.assertEqual(gpu_targets.best(cases, 64, True, ("fp32",))[1].variant, "peer_torch_cuda_graph")
        self.assertEqual(gpu_targets.best(cases, 64, True, ("fp16", "bf16"))[1].variant, "peer_torch_cuda_graph_f16_cl")
        self.assertEqual(gpu_targets.best(cases, 64, True, ("tf32",))[1].variant, "peer_torch_cuda_graph_tf32")


class RecompileWatch(unittest.TestCase):
    """Finding 9: a compiled peer that compiles inside its timed loop is refused, not timed."""

    def counters(self):
        from collections import Counter, defaultdict
        c = defaultdict(Counter)
        c["frames"]["total"], c["frames"]["ok"], c["stats"]["unique_graphs"] = 3, 3, 3
        return c

    def test_a_moved_counter_is_a_problem(self):
        c = self.counters()
        watch = harness.CompileWatch(c)
        self.assertIsNone(watch.problem())  # calls that hit what was compiled move nothing
        c["frames"]["total"] += 1  # a cache miss: dynamo converts the frame again
        c["stats"]["unique_graphs"] += 1
        problem = watch.problem()
        self.assertIn("compiled inside the timed loop", problem)
        self.assertIn("frames.total +1", problem)
        self.assertIn("stats.unique_graphs +1", problem)
        skips = self.counters()
        watch = harness.CompileWatch(skips)
        skips["inductor"]["cudagraph_skips"] += 1  # inductor gave up its CUDA graph: eager kernels
        self.assertIn("inductor.cudagraph_skips +1", watch.problem())

    def test_measure_refuses_what_the_watch_finds(self):
        c = self.counters()
        watch = harness.CompileWatch(c)

        def run():  # converts a frame again, as a guard failure would
            c["frames"]["total"] += 1
        s = harness.Session(harness.Selection("."), 2, 0.001, 1, gpu=False)
        s.measure("resnet20/peer_torch_compile/batch:1", harness.Prepared(run, lambda: None, "x", watch.problem))
        self.assertEqual(len(s.entries), 1)
        self.assertTrue(s.entries[0]["error_occurred"])
        self.assertIn("frames.total +", s.entries[0]["error_message"])
        clean = harness.CompileWatch(self.counters())
        s.measure("resnet20/peer_torch_compile/batch:16", harness.Prepared(lambda: None, lambda: None, "x",
                                                                          clean.problem))
        self.assertEqual(len(s.entries), 3)  # the error, then two timed repetitions
        self.assertFalse(s.entries[1].get("error_occurred"))

    def test_recompile_limit_raised_and_made_an_error(self):
        from types import SimpleNamespace
        config = SimpleNamespace(recompile_limit=8, fail_on_recompile_limit_hit=False)
        harness.no_recompile_limit(SimpleNamespace(_dynamo=SimpleNamespace(config=config)))
        self.assertEqual((config.recompile_limit, config.fail_on_recompile_limit_hit), (64, True))
        old = SimpleNamespace(cache_size_limit=8)  # before PyTorch 2.6
        harness.no_recompile_limit(SimpleNamespace(_dynamo=SimpleNamespace(config=old)))
        self.assertEqual(old.cache_size_limit, 64)


class Descriptors(unittest.TestCase):
    """Issue 42's descriptors in scripts/peers: bench's syntax, the family's case names."""

    def test_parsed_and_repeated(self):
        from dlbench.peers import descriptors
        p = descriptors.problems(["rows:4/cols:8", "cols:16/rows:2", "rows:4/cols:8"], ["m:3/n:5/k:7"],
                                 ["resnet20/batch:32", "resnet20/batch:1", "mnist_cnn_train/batch:16"])
        self.assertEqual(p.softmax, [(4, 8), (2, 16)])  # fields in any order; a repeat adds nothing
        self.assertEqual(p.gemm, [(3, 5, 7)])
        self.assertEqual(p.networks, {"resnet20": [32, 1]})
        self.assertEqual(p.training, {"mnist_cnn": [16]})
        self.assertTrue(p.given)
        self.assertFalse(descriptors.problems().given)

    def test_bad_descriptors_name_the_field(self):
        from dlbench.peers import descriptors
        for flag, text, expected in (
                ("softmax", "rows:4", "missing field 'cols'"),
                ("softmax", "rows:4/cols:x", "field 'cols': 'x' is not a positive integer"),
                ("softmax", "rows:-1/cols:3", "field 'rows': '-1' is not a positive integer"),
                ("softmax", "rows:4/cols:\u00b2", "is not a positive integer"),
                ("softmax", "rows:65536/cols:65536", "rows x cols is 4,294,967,296 elements"),
                ("gemm", "m:1/n:0/k:3", "field 'n' must be between 1 and 65,536 (got 0)"),
                ("gemm", "m:1/q:2/n:1/k:1", "unknown field 'q' (fields: m, n, k)"),
                ("gemm", "m:65536/n:65536/k:1", "m x n (C) is 4,294,967,296 elements"),
                ("gemm", "m:1/m:2/n:1/k:1", "field 'm' given twice"),
                ("gemm", "m:1/n:1/k:1/", "'' is not a name:value field"),
                ("net", "foo/batch:3", "unknown network 'foo'"),
                ("net", "resnet20", "missing field 'batch'"),
                ("net", "resnet20/batch", "'batch' is not a name:value field"),
                ("net", "resnet20/batch:0", "field 'batch' must be between 1 and 65,536 (got 0)"),
                ("net", "resnet20_train/batch:64/workers:2", "unknown field 'workers'")):
            with self.subTest(flag=flag, text=text):
                with self.assertRaises(descriptors.DescriptorError) as raised:
                    descriptors.problems(**{flag: [text]})
                self.assertIn(f"--{flag}={text}: ", str(raised.exception))
                self.assertIn(expected, str(raised.exception))

    def test_a_descriptor_runs_its_problem_alone(self):
        from dlbench.peers import descriptors
        given = descriptors.problems(net=["resnet20/batch:32", "mnist_lenet_train/batch:8"])
        gpu = harness.Session(harness.Selection("."), 1, 0.001, 1, gpu=True, problems=given)
        cases = networks.wanted_cases(gpu)
        self.assertEqual({(net, b) for net, _, b in cases}, {("resnet20", 32)})
        self.assertEqual(len(cases), len(networks.PEERS))  # every peer, CPU and GPU, at that batch
        self.assertEqual({(net, b) for net, _, b in training.wanted_cases(gpu)}, {("mnist_lenet", 8)})
        self.assertEqual(len(training.wanted_cases(gpu)), len(training.CPU_PEERS) + len(training.GPU_PEERS))
        default = harness.Session(harness.Selection("."), 1, 0.001, 1, gpu=False)
        self.assertEqual({b for _, _, b in networks.wanted_cases(default)}, set(networks.CPU_BATCHES))


@unittest.skipUnless(Path(BENCH).exists(), f"{BENCH} not built")
class DescriptorCommandLine(unittest.TestCase):
    def test_listed_under_the_families_names(self):
        p = peers("--benchmark_list_tests", "--list_gpu", "--softmax=rows:4/cols:8", "--softmax=rows:2/cols:3",
                  "--gemm=m:3/n:5/k:7", "--net=mnist_cnn/batch:32", "--net=resnet20_train/batch:16", venv="system")
        self.assertEqual(p.returncode, 0, p.stderr)
        listed = p.stdout.split()
        self.assertIn("softmax/peer_numpy/rows:4/cols:8/real_time", listed)
        self.assertIn("log_softmax/peer_torch_cuda/rows:2/cols:3/manual_time", listed)
        self.assertIn("gemm/peer_torch_cuda_tf32/m:3/n:5/k:7/manual_time", listed)
        self.assertIn("mnist_cnn/peer_torch_cuda_graph_f16_cl/batch:32/manual_time", listed)
        self.assertIn("resnet20_train/peer_torch_cuda_compile/batch:16/manual_time", listed)
        shapes = {"/".join(split_name(n).parts) for n in listed}
        self.assertEqual(shapes, {"rows:4/cols:8", "rows:2/cols:3", "m:3/n:5/k:7", "batch:32", "batch:16"})
        self.assertEqual({split_name(n).op for n in listed},
                         {"softmax", "log_softmax", "gemm", "mnist_cnn", "resnet20_train"})  # nothing else

    def test_numpy_peers_run_at_the_given_shape(self):
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "p.json"
            p = peers("--softmax=rows:20/cols:7", "--gemm=m:3/n:5/k:7", "--benchmark_filter=peer_numpy",
                      "--benchmark_repetitions=1", "--benchmark_min_time=0.01", f"--benchmark_out={out}")
            self.assertEqual(p.returncode, 0, p.stderr)
            results = load(out)
            self.assertEqual(sorted(results.cases), ["gemm/peer_numpy_f32/m:3/n:5/k:7",
                                                     "log_softmax/peer_numpy/rows:20/cols:7",
                                                     "softmax/peer_numpy/rows:20/cols:7"])
            for case in results.cases.values():
                self.assertIsNone(case.error, case.name)

    def test_bad_descriptor_is_one_line_and_exit_2(self):
        for args, expected in ((["--gemm=m:64/n:0/k:8"], "--gemm=m:64/n:0/k:8: field 'n' must be between"),
                               (["--softmax=rows:4", "--benchmark_list_tests"], "missing field 'cols'"),
                               (["--net=alexnet/batch:1"], "unknown network 'alexnet'"),
                               (["--net"], "expected one argument")):
            p = peers(*args)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn(expected, p.stderr)
            self.assertNotIn("Traceback", p.stderr)

    def test_help_names_every_training_network_and_the_descriptors(self):
        p = peers("--help")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("training step of resnet20, mnist_cnn and mnist_lenet", " ".join(p.stdout.split()))
        for flag in ("--softmax=rows:R/cols:C", "--gemm=m:M/n:N/k:K", "--net=NET/batch:B"):
            self.assertIn(flag, p.stdout)


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
            n = split_name(name)
            return (n.op, "/".join(n.parts))
        ours = {shape(n) for n in bench.stdout.split() if split_name(n).op in ("softmax", "conv", "gemm", "daxpy")}
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

    def test_gpu_cases_listed_without_a_gpu_with_list_gpu(self):
        kit = "^(resnet20|mnist_cnn|mnist_lenet)/peer_torch_cud[a-z0-9_]*/batch:(1|64|1024)$"  # scripts/gpu-kit's
        p = peers("--benchmark_list_tests", "--list_gpu", f"--benchmark_filter={kit}", venv="system")
        self.assertEqual(p.returncode, 0, p.stderr)
        listed = p.stdout.split()
        self.assertEqual(len(listed), 99)  # 3 networks x 11 modes x 3 batches
        self.assertEqual(listed[0], "resnet20/peer_torch_cuda/batch:1/manual_time")
        self.assertEqual(listed[-1], "mnist_lenet/peer_torch_cuda_compile_f16_cl/batch:1024/manual_time")
        self.assertIn("resnet20/peer_torch_cuda_graph_tf32/batch:64/manual_time", listed)
        self.assertIn("mnist_cnn/peer_torch_cuda_graph_f16_cl/batch:1024/manual_time", listed)
        kit_script = (ROOT / "scripts" / "gpu-kit").read_text()  # the kit's count: these, the training step's 18
        self.assertIn(f"peers_cases={len(listed) + 18 + 2}\n", kit_script)  # and the 2 epochs
        self.assertEqual({split_name(n).variant for n in listed}, set(GpuNetworkPeers.MODES))
        p = peers("--benchmark_list_tests", f"--benchmark_filter={kit}")
        self.assertEqual((p.returncode, p.stdout.strip()), (0, ""))  # no GPU here: none registered

    def test_time_budget_and_sigterm_keep_what_finished(self):
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "p.json"
            p = peers("--benchmark_filter=^daxpy/peer_numpy/n:1024$", "--time_budget=0.000001",
                      f"--benchmark_out={out}")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("1 cases not run within the time budget of 1e-06 s: daxpy/peer_numpy/n:1024/real_time",
                          p.stderr)
            self.assertFalse(out.exists())
            env = dict(os.environ, DLB_PEERS_VENV=".venv", DLB_BENCH=BENCH, PYTHONUNBUFFERED="1")
            run = subprocess.Popen([sys.executable, str(PEERS), "--benchmark_filter=^daxpy/peer_numpy/n:(1024|65536)$",
                                    "--benchmark_repetitions=200", "--benchmark_min_time=0.05",
                                    f"--benchmark_out={out}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, env=env)
            first = run.stdout.readline()  # the first case finished (10 s), the second under way
            self.assertIn("daxpy/peer_numpy/n:1024", first)
            run.terminate()
            stdout, stderr = run.communicate(timeout=120)
            self.assertEqual(run.returncode, 0, stderr)
            self.assertIn("stopped by SIGTERM: the 200 entries finished are written", stderr)
            results = load(out)
            self.assertEqual(sorted(results.cases), ["daxpy/peer_numpy/n:1024"])
            self.assertEqual(results.context["peers_stopped"], "SIGTERM")

    def test_bad_arguments_are_one_line_and_exit_2(self):
        for args, expected in ((["--benchmark_filter=("], "not a regular expression"),
                               (["--benchmark_repetitions=0"], "must be >= 1"),
                               (["--benchmark_min_time=soon"], "not a time in seconds"),
                               (["--list_gpu"], "--list_gpu goes with --benchmark_list_tests"),
                               (["--time_budget=0"], "--time_budget must be > 0"),
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
