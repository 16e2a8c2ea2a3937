"""The reduced-precision figure and README table (scripts/dlbench/figures/
precision.py) on the real binary's output (DLB_BENCH, set by ctest):
mnist_lenet at batch 64 with its fp32, bf16 and int8 rows. Checks that the
table says what the JSON says (the speedup is the row's images/s over the
fastest fp32 row of the same run, the drop is in points, the ISA is the
one the row's kernels name), never how fast anything was."""

import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
BENCH = os.environ.get("DLB_BENCH", str(ROOT / "build" / "bench"))

from dlbench.figures import precision  # noqa: E402
from dlbench.names import precision_of  # noqa: E402
from dlbench.results import Case, load  # noqa: E402


class PrecisionTable(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        out = Path(cls.tmp.name) / "precision.json"
        subprocess.run([BENCH, "--benchmark_filter=^mnist_lenet/cpu_[a-z_0-9]+/batch:64/", "--benchmark_min_time=0.01",
                        f"--benchmark_out={out}", "--benchmark_out_format=json"],
                       capture_output=True, text=True, check=True, env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
        cls.results = load(out)
        cls.rows = {r["variant"]: r for r in precision.rows(cls.results, "mnist_lenet")}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def rate(self, variant):
        return self.results.cases[f"mnist_lenet/{variant}/batch:64"].median("items_per_second")

    def test_every_reduced_row_and_no_fp32_row(self):
        variants = {c.variant for c in self.results.family("mnist_lenet")}
        self.assertEqual(set(self.rows), {v for v in variants if precision_of(v) in ("int8", "bf16", "fp16")})
        self.assertIn("cpu_fakequant_s8", self.rows)  # fp32 arithmetic: on every CPU
        # oneDNN's int8 is registered where it is exact (VNNI or AMX; its AVX2
        # kernels saturate), bf16 where oneDNN has it (AVX-512 and up).
        extensions = self.results.context["cpu_extensions"].split()
        self.assertEqual("cpu_onednn_s8" in self.rows, "avx512_vnni" in extensions or "amx_int8" in extensions)
        self.assertEqual("cpu_onednn_bf16" in self.rows, self.results.context["onednn_isa"].startswith("avx512"))
        self.assertNotIn("cpu_own", self.rows)

    def test_speedup_over_the_fastest_fp32_row(self):
        fp32 = {c.variant: self.rate(c.variant) for c in self.results.family("mnist_lenet")
                if c.device == "cpu" and precision_of(c.variant) not in ("int8", "bf16", "fp16")}
        self.assertIn("cpu_onednn", fp32)
        best = max(fp32, key=fp32.get)
        for variant, row in self.rows.items():
            self.assertEqual(row["baseline"][1], best)
            self.assertAlmostEqual(row["speedup"], self.rate(variant) / fp32[best])
            drop = self.results.cases[f"mnist_lenet/{variant}/batch:64"].median("accuracy_drop")
            self.assertAlmostEqual(row["drop_points"], 100 * drop)
            self.assertLess(abs(row["drop_points"]), 1.0)  # the gate: at most 1% of the answers flip

    def test_isa_from_the_kernels(self):
        self.assertEqual(self.rows["cpu_fakequant_s8"]["peak"], None)
        if "cpu_onednn_s8" not in self.rows:
            self.skipTest("no oneDNN int8 row on this CPU (no VNNI or AMX)")
        label = self.results.cases["mnist_lenet/cpu_onednn_s8/batch:64"].runs[0]["label"]
        isa, peak = precision.isa_of(self.results.cases["mnist_lenet/cpu_onednn_s8/batch:64"], self.results.context)
        if "amx" in label:
            self.assertEqual((isa, peak), ("AMX int8", 32.0))
        elif "vnni" in label:
            self.assertEqual((isa, peak), ("AVX-512 VNNI", 4.0))

    def test_gpu_rows_name_the_gpu_units(self):
        def isa(variant):
            case = Case(name=f"resnet20/{variant}/batch:64", op="resnet20", variant=variant, args={"batch": 64},
                        runs=[{"label": "bf16 NHWC, fp32 accumulation: cuDNN ..."}])
            return precision.isa_of(case, {"cpu_extensions": "avx512f avx512_vnni avx512_bf16"})
        self.assertEqual(isa("gpu_own_s8"), ("GPU dp4a", None))
        self.assertEqual(isa("gpu_cublaslt_s8"), ("GPU int8 tensor cores (IMMA)", None))
        self.assertEqual(isa("gpu_own_mma_s8"), ("GPU int8 tensor cores (mma.sync)", None))
        self.assertEqual(isa("gpu_cudnn_bf16"), ("GPU bf16 tensor cores", None))
        self.assertEqual(isa("gpu_cudnn_mixed_f16"), ("GPU fp16 tensor cores", None))  # the one vocabulary: dlbench.names

    def test_table_and_figure(self):
        text = precision.table(self.results)
        self.assertIn("**mnist_lenet** (batch 64; fp32 baseline", text)
        for variant, row in self.rows.items():
            line = next(l for l in text.splitlines() if l.startswith(f"| {variant} |"))
            self.assertIn(f"{row['speedup']:.2f}x", line)
            self.assertIn(f"{row['drop_points']:+.2f}", line)
        fig = precision.figures([self.results])["precision"]
        self.assertEqual(fig.axes[0].get_title(), "mnist_lenet, batch 64")
        points = {l.get_label() for l in fig.axes[0].get_lines() if l.get_marker() not in (None, "None", "")}
        self.assertEqual(points, set(self.rows))  # one point per row


if __name__ == "__main__":
    unittest.main()
