"""GPU figures on a synthetic run (no GPU here, and no GPU run committed
yet): daxpy's table reads the best GPU daxpy against both GPU memory
ceilings, the triad (two reads to one write, as daxpy) and the copy; the
layer roofline takes the higher of the two. The file is made up and says
so in its context: never written under results/."""

import json
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from dlbench.figures import daxpy, softmax  # noqa: E402
from dlbench.results import load  # noqa: E402

GBS = 1e9


def entry(name, bytes_per_second, seconds=1e-3):
    return {"name": name + "/manual_time", "run_name": name + "/manual_time", "run_type": "iteration",
            "real_time": seconds * 1e9, "time_unit": "ns", "iterations": 10, "bytes_per_second": bytes_per_second}


def load_doc(doc: dict):
    """`doc` as dlbench.results loads it from a file, synthetic.json."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "synthetic.json"
        path.write_text(json.dumps(doc))
        return load(path)


class GpuDaxpy(unittest.TestCase):
    def test_table_reads_gpu_daxpy_against_triad_and_copy(self):
        n = 1 << 26
        doc = {"context": {"machine": "synthetic-gpu", "note": "made up by tests/test_gpu_figures.py"},
               "benchmarks": [entry("roofline/gpu_copy/n:134217728", 3.0e12),
                              entry("roofline/gpu_triad/n:67108864", 3.2e12),
                              entry(f"daxpy/gpu_naive/n:{n}", 3.1e12),
                              entry(f"daxpy/gpu_cublas/n:{n}", 3.15e12)]}
        text = daxpy.table(load_doc(doc))
        self.assertIn("Best GPU daxpy at n = 2^26: `gpu_cublas`, 3150.0 GB/s", text)
        self.assertIn("0.98 of `roofline/gpu_triad` (3200.0 GB/s)", text)
        self.assertIn("1.05 of `roofline/gpu_copy` (3000.0 GB/s)", text)

    def test_no_gpu_cases_no_gpu_line(self):
        doc = {"context": {"machine": "synthetic-cpu"}, "benchmarks": [entry("daxpy/cpu_loop/n:1024", 1e11)]}
        self.assertNotIn("GPU", daxpy.table(load_doc(doc)))

    def test_table_reads_gpu_daxpy_against_the_memory_ceiling_first(self):
        # The H200 run's figures (2026-11-27): daxpy gpu_naive above both the
        # copy and the triad; the memory ceiling, the fastest of its parts, above it.
        n = 1 << 26
        doc = {"context": {"machine": "synthetic-gpu", "note": "made up by tests/test_gpu_figures.py"},
               "benchmarks": [entry("roofline/gpu_copy/n:134217728", 4.24e12),
                              entry("roofline/gpu_triad/n:67108864", 4.09e12),
                              entry("roofline/gpu_memory/bytes:1610612736", 4.36e12),
                              entry(f"daxpy/gpu_naive/n:{n}", 4.34e12)]}
        text = daxpy.table(load_doc(doc))
        self.assertIn("1.00 of `roofline/gpu_memory` (4360.0 GB/s); 1.06 of `roofline/gpu_triad`", text)


class GpuSoftmax(unittest.TestCase):
    def table(self, ceilings):
        rows, cols = 65536, 1024  # x = 256 MiB: the DRAM regime
        doc = {"context": {"machine": "synthetic-gpu", "note": "made up by tests/test_gpu_figures.py"},
               "benchmarks": [entry(name, value) for name, value in ceilings] +
                             [entry(f"softmax/gpu_fused/rows:{rows}/cols:{cols}", 4.20e12),
                              entry(f"softmax/gpu_naive/rows:{rows}/cols:{cols}", 2.0e12)]}
        return softmax.table(load_doc(doc))

    def test_reads_gpu_softmax_against_the_memory_ceiling(self):
        text = self.table([("roofline/gpu_copy/n:134217728", 4.24e12),
                           ("roofline/gpu_memory/bytes:1610612736", 4.36e12)])
        self.assertIn("`roofline/gpu_memory` 4360.0 GB/s", text)
        self.assertIn("fused/gpu_memory", text)
        self.assertIn("| 0.96 |", text)

    def test_older_runs_read_it_against_the_copy(self):
        text = self.table([("roofline/gpu_copy/n:134217728", 4.24e12)])
        self.assertIn("`roofline/gpu_copy` 4240.0 GB/s", text)
        self.assertIn("| 0.99 |", text)


if __name__ == "__main__":
    unittest.main()


def net_entry(name, images_per_second, **counters):
    e = entry(name, 0.0)
    e.pop("bytes_per_second")
    e.update(items_per_second=images_per_second, **counters)
    return e


class GpuTargets(unittest.TestCase):
    """dlbench/figures/gpu_targets.py on a synthetic run: each target's
    verdict from our rows and the PyTorch modes side by side."""

    def table(self, benchmarks):
        from dlbench.figures import gpu_targets
        doc = {"context": {"machine": "synthetic-gpu", "gpu_name": "Synthetic GPU"}, "benchmarks": benchmarks}
        return gpu_targets.table(load_doc(doc))

    def row(self, text, start):
        return next(line for line in text.splitlines() if line.startswith("| " + start))

    def test_verdicts(self):
        text = self.table([
            net_entry("mnist_cnn/gpu_onekernel/batch:1", 1e5, latency_p50_us=12.0),
            net_entry("mnist_cnn/peer_torch_cuda_graph/batch:1", 3e4, latency_p50_us=36.0),
            net_entry("mnist_cnn/gpu_cudnn/batch:64", 6.0e5),
            net_entry("mnist_cnn/peer_torch_cuda_graph/batch:64", 4.0e5),  # 1.5x: met
            net_entry("mnist_cnn/peer_torch_cuda/batch:64", 2.0e5),
            net_entry("mnist_cnn/gpu_cudnn/batch:1024", 1.3e6),
            net_entry("mnist_cnn/peer_torch_cuda_compile/batch:1024", 1.0e6),  # 1.3x < 1.5x: not met
            net_entry("mnist_cnn/gpu_cudnn_f16/batch:1024", 2.0e6),
            net_entry("mnist_cnn/peer_torch_cuda_graph_f16/batch:1024", 1.5e6),  # 1.33x < 1.5x: not met
            net_entry("mnist_cnn/gpu_cudnn_fused_f16/batch:1", 1e5, latency_p50_us=20.0),
            net_entry("mnist_cnn/peer_torch_cuda_graph_f16_cl/batch:1", 3e4, latency_p50_us=30.0),  # 1.5x: met
            net_entry("mnist_cnn/gpu_cudnn_graph_tf32/batch:64", 6.0e5),
            net_entry("mnist_cnn/peer_torch_cuda_graph_tf32/batch:64", 5.0e5),  # 1.2x: not met
            net_entry("mnist_cnn/gpu_own_s8/batch:1024", 3.0e6, accuracy_drop=0.006),  # 1.5x but drop > 0.005
            net_entry("mnist_cnn/peer_torch/batch:64", 9e9),  # a CPU peer: not a PyTorch GPU mode
        ])
        self.assertIn("**mnist_cnn** on Synthetic GPU", text)
        # (the row that starts so, what it must say)
        for start, says in [("batch 1 p50 <= 15 us", "| met |"),
                            ("batch 1 p50", "3.00x faster"),
                            ("fp32 batch 64", "`peer_torch_cuda_graph` 400,000"),
                            ("fp32 batch 64", "| 1.50x | met |"),
                            ("fp32 batch 1024", "| 1.30x | **not met** |"),
                            ("fp16/bf16 batch 1024", "| 1.33x | **not met** |"),
                            ("fp16/bf16 batch 1 ", "| 1.50x faster | met |"),
                            ("tf32 batch 64", "`gpu_cudnn_graph_tf32` 600,000"),
                            ("tf32 batch 64", "| 1.20x | **not met** |"),
                            ("tf32 batch 1024", "| - | n/a |"),
                            ("fp16/bf16 batch 64", "| - | n/a |"),  # no 16-bit side at 64
                            ("int8 batch 1024", "**not met**"),
                            ("int8 batch 1024", "accuracy drop 0.0060")]:
            with self.subTest(row=start, says=says):
                self.assertIn(says, self.row(text, start))
        # The tf32 rows are neither side of the fp32 target.
        self.assertNotIn("tf32", self.row(text, "fp32 batch 64"))
        self.assertNotIn("resnet20", text)

    def test_cpu_run_has_no_table(self):
        self.assertEqual(self.table([net_entry("resnet20/cpu_onednn/batch:64", 3e4)]), "")
