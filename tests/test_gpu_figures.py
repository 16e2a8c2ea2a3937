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

from dlbench.figures import daxpy  # noqa: E402
from dlbench.results import load  # noqa: E402

GBS = 1e9


def entry(name, bytes_per_second, seconds=1e-3):
    return {"name": name + "/manual_time", "run_name": name + "/manual_time", "run_type": "iteration",
            "real_time": seconds * 1e9, "time_unit": "ns", "iterations": 10, "bytes_per_second": bytes_per_second}


class GpuDaxpy(unittest.TestCase):
    def test_table_reads_gpu_daxpy_against_triad_and_copy(self):
        n = 1 << 26
        doc = {"context": {"machine": "synthetic-gpu", "note": "made up by tests/test_gpu_figures.py"},
               "benchmarks": [entry("roofline/gpu_copy/n:134217728", 3.0e12),
                              entry("roofline/gpu_triad/n:67108864", 3.2e12),
                              entry(f"daxpy/gpu_naive/n:{n}", 3.1e12),
                              entry(f"daxpy/gpu_cublas/n:{n}", 3.15e12)]}
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "synthetic.json"
            path.write_text(json.dumps(doc))
            text = daxpy.table(load(path))
        self.assertIn("Best GPU daxpy at n = 2^26: `gpu_cublas`, 3150.0 GB/s", text)
        self.assertIn("0.98 of `roofline/gpu_triad` (3200.0 GB/s)", text)
        self.assertIn("1.05 of `roofline/gpu_copy` (3000.0 GB/s)", text)

    def test_no_gpu_cases_no_gpu_line(self):
        doc = {"context": {"machine": "synthetic-cpu"}, "benchmarks": [entry("daxpy/cpu_loop/n:1024", 1e11)]}
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "synthetic.json"
            path.write_text(json.dumps(doc))
            self.assertNotIn("GPU", daxpy.table(load(path)))


if __name__ == "__main__":
    unittest.main()
