"""The placement dynamic program against brute force on small random chains,
and its answers on chains whose best placement is known; then
scripts/placement.py on fixtures trimmed from real runs:

- tests/data/placement_cpu_small.json: resnet20_layer/cpu_own at batch 64
  (3 repetitions) and 16 (1), and resnet20/cpu_own/batch:64, of
  results/amd-epyc-zen4-2c/20261125T152402Z.json.gz (2-core AMD EPYC Zen 4,
  commit 8d98973); its context without the peers' entries;
- tests/data/placement_gpu_small.json: every repetition of
  resnet20_layer/gpu_cudnn/batch:64 of the first H100 run (commit 6a1e772,
  results/nvidia-h100-80gb-hbm3/20261126T151404Z-layers.json.gz), without
  the aggregate rows;
- tests/data/placement_gpu_more_small.json: the same H100 run's
  copy/gpu_d2h_pinned_{sync,async}/bytes:268435456 (20261126T151758Z-copy)
  and resnet20/{gpu_cudnn,gpu_hybrid_first_conv}/batch:{16,64}
  (20261126T151205Z-resnet20) repetitions, under the copy file's context.

The printed table's numbers must be the dynamic program's on the layers
built here independently: the fixture's medians and ResNet20's activation
sizes written out below (not derived from the byte counters as the command
does)."""

import json
import random
import re
import statistics
import subprocess
import sys
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

from dlbench.names import case_name  # noqa: E402
from dlbench.placement import CPU, GPU, Copy, Layer, best_placement, brute_force, placement_cost  # noqa: E402
from tests.temp_dir import TempDirTestCase  # noqa: E402


class Placement(unittest.TestCase):
    def test_matches_brute_force_on_random_chains(self):
        rng = random.Random(13)
        for _ in range(300):
            n = rng.randint(1, 10)
            layers = [Layer(rng.uniform(0, 1e-3), rng.uniform(0, 1e-3), rng.uniform(0, 1e6)) for _ in range(n)]
            copy = Copy(rng.uniform(1e8, 2e10), rng.uniform(1e8, 2e10), rng.uniform(0, 2e-5))
            out = rng.uniform(0, 1e5)
            total, devices = best_placement(layers, out, copy)
            self.assertAlmostEqual(total, brute_force(layers, out, copy), delta=1e-15)
            self.assertAlmostEqual(placement_cost(layers, out, copy, devices), total, delta=1e-15)

    def test_known_answers(self):
        slow_copy = Copy(1e6, 1e6, 1e-3)
        # Copies dearer than any layer: everything stays on the CPU.
        layers = [Layer(2e-4, 1e-5, 4e5) for _ in range(5)]
        self.assertEqual(best_placement(layers, 40.0, slow_copy)[1], [CPU] * 5)
        # Free copies: each layer where it is faster.
        free = Copy(float("inf"), float("inf"), 0.0)
        layers = [Layer(1.0, 2.0, 1.0), Layer(3.0, 1.0, 1.0), Layer(1.0, 2.0, 1.0)]
        self.assertEqual(best_placement(layers, 1.0, free), (3.0, [CPU, GPU, CPU]))
        # The lab's split (every other layer on the GPU) pays two copies per GPU layer.
        layers = [Layer(1e-4, 5e-5, 1e6) for _ in range(4)]
        copy = Copy(1e10, 1e10, 1e-5)
        lab = placement_cost(layers, 4e4, copy, [GPU, CPU, GPU, CPU])
        self.assertGreater(lab, best_placement(layers, 4e4, copy)[0])
        self.assertEqual(best_placement([], 0.0, copy), (0.0, []))

    def test_wrong_length_refused(self):
        with self.assertRaises(ValueError):
            placement_cost([Layer(1, 1, 1)], 1.0, Copy(1, 1), [CPU, GPU])


DATA = ROOT / "tests" / "data"
CPU_RUN = DATA / "placement_cpu_small.json"
GPU_RUN = DATA / "placement_gpu_small.json"
GPU_MORE = DATA / "placement_gpu_more_small.json"
SCRIPT = ROOT / "scripts" / "placement.py"

# ResNet20's per-sample input elements of its 23 layers (3x32x32 input; 16, 32, 64 channels at 32, 16, 8
# pixels square; the downsample convs read the block's input; avgpool reads 64x8x8, fc 64) and its output.
RESNET20_INPUTS = [3 * 32 * 32] + [16 * 32 * 32] * 8 + [32 * 16 * 16] * 7 + [64 * 8 * 8] * 6 + [64]
RESNET20_OUTPUT = 10
BLOCK_CONV1 = {1, 3, 5, 7, 10, 12, 14, 17, 19}  # stage*.conv1: gpu_hybrid_first_conv's GPU layers


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


def medians(path: Path, prefix: str, key: str = "real_time") -> dict[str, float]:
    """{case name without suffixes: median of `key` over its repetitions}, of the iteration entries."""
    values: dict[str, list[float]] = {}
    for b in json.loads(path.read_text())["benchmarks"]:
        name = case_name(b["run_name"])
        if name.startswith(prefix):
            scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3}[b["time_unit"]] if key == "real_time" else 1.0
            values.setdefault(name, []).append(float(b[key]) * scale)
    return {k: statistics.median(v) for k, v in values.items()}


def expected_chain(batch: int = 64) -> list[Layer]:
    cpu = medians(CPU_RUN, f"resnet20_layer/cpu_own/batch:{batch}/layer:")
    gpu = medians(GPU_RUN, f"resnet20_layer/gpu_cudnn/batch:{batch}/layer:")
    return [Layer(cpu[f"resnet20_layer/cpu_own/batch:{batch}/layer:{i}"],
                  gpu[f"resnet20_layer/gpu_cudnn/batch:{batch}/layer:{i}"], 4 * batch * n)
            for i, n in enumerate(RESNET20_INPUTS)]


def expected_copy(latency_s: float = 0.0) -> Copy:
    rate = medians(GPU_MORE, "copy/gpu_d2h_pinned_async/bytes:268435456", "bytes_per_second")
    rate = rate["copy/gpu_d2h_pinned_async/bytes:268435456"]
    return Copy(rate, rate, latency_s)  # no H2D case: H2D taken equal to D2H


def us(seconds: float) -> str:
    v = seconds * 1e6
    return f"{v:,.1f}" if v < 1e4 else f"{v:,.0f}"


def batch_block(out: str, batch: int) -> str:
    return out.split(f"\nbatch {batch}:\n", 1)[1].split("\nbatch ", 1)[0]


class PlacementCommand(TempDirTestCase):
    def output(self, *extra):
        p = run(CPU_RUN, GPU_RUN, GPU_MORE, *extra)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout

    def test_table_is_the_dynamic_program_on_the_measured_layers(self):
        out = self.output()
        chain, copy = expected_chain(), expected_copy()
        out_bytes = 4 * 64 * RESNET20_OUTPUT
        total, devices = best_placement(chain, out_bytes, copy)
        block = batch_block(out, 64)
        rows = [line.split() for line in block.splitlines() if re.match(r"^\s+\d+\s+\S", line)]
        self.assertEqual([int(r[0]) for r in rows], list(range(23)))
        where = CPU
        for r, layer, d in zip(rows, chain, devices):
            i = int(r[0])
            dev = next(x for x in r if x in ("CPU", "GPU"))
            k = r.index(dev)
            self.assertEqual(r[k - 4], f"{layer.in_bytes / 1024:,.1f}", f"layer {i} input")
            self.assertEqual(r[k - 2], us(layer.cpu_s), f"layer {i} CPU time")
            self.assertEqual(r[k - 1], us(layer.gpu_s), f"layer {i} GPU time")
            self.assertEqual(dev, "GPU" if d == GPU else "CPU", f"layer {i} device")
            move = " ".join(r[k + 1:])
            self.assertEqual(move, "-" if d == where else
                             f"{'H2D' if d == GPU else 'D2H'} {us(copy.cost(where, d, layer.in_bytes))}")
            where = d
        self.assertRegex(block, rf"best placement\s+{re.escape(us(total))} us")
        all_cpu = placement_cost(chain, out_bytes, copy, [CPU] * 23)
        all_gpu = placement_cost(chain, out_bytes, copy, [GPU] * 23)
        self.assertRegex(block, rf"all-CPU\s+{re.escape(us(all_cpu))} us")
        self.assertRegex(block, rf"all-GPU\s+{re.escape(us(all_gpu))} us")
        hybrid = placement_cost(chain, out_bytes, copy, [GPU if i in BLOCK_CONV1 else CPU for i in range(23)])
        self.assertRegex(block, rf"gpu_hybrid_first_conv placed\s+{re.escape(us(hybrid))} us")
        # On these runs: everything on the H100 but the fc: one copy back to the host either way (its 16 KiB
        # input instead of the 2.5 KiB output), and the 2-core EPYC's fc is 4 us faster than the H100's.
        self.assertEqual(devices, [GPU] * 22 + [CPU])
        self.assertIn("GPU 0-21, CPU 22", block)

    def test_measured_passes_and_hosts_are_named(self):
        out = self.output()
        block = batch_block(out, 64)
        hybrid = medians(GPU_MORE, "resnet20/gpu_hybrid_first_conv/batch:64")["resnet20/gpu_hybrid_first_conv/batch:64"]
        cudnn = medians(GPU_MORE, "resnet20/gpu_cudnn/batch:64")["resnet20/gpu_cudnn/batch:64"]
        own = medians(CPU_RUN, "resnet20/cpu_own/batch:64")["resnet20/cpu_own/batch:64"]
        self.assertRegex(block, rf"gpu_hybrid_first_conv\s+{re.escape(us(hybrid))} us.*nvidia-h100-80gb-hbm3")
        self.assertRegex(block, rf"gpu_cudnn\s+{re.escape(us(cudnn))} us.*nvidia-h100-80gb-hbm3")
        self.assertRegex(block, rf"cpu_own\s+{re.escape(us(own))} us.*amd-epyc-zen4-2c")
        self.assertIn("WARNING: the placement mixes hosts", out)
        self.assertIn("hybrid backends' measured times are from the GPU run's host", out)
        self.assertIn("CPU run: " + str(CPU_RUN), out)
        self.assertIn("machine amd-epyc-zen4-2c, CPU AMD EPYC", out)
        self.assertIn("machine nvidia-h100-80gb-hbm3, CPU Intel(R) Xeon(R) Processor", out)
        self.assertIn("residual joins' copies are NOT charged", out)
        self.assertIn("lower bound", out)
        self.assertIn("copy/gpu_d2h_pinned_async/bytes:268435456 (256 MiB)", out)
        self.assertIn("H2D: no copy/gpu_h2d_pinned_* case in the runs given: taken equal to D2H", out)
        self.assertIn("fixed cost per copy 0 us ASSUMED", out)

    def test_a_batch_in_one_run_only_is_said_plainly(self):
        out = self.output()
        self.assertIn("batch 16:\n  CPU layer times (cpu_own, placement_cpu_small.json) but no GPU layer times "
                      "(gpu_cudnn) in placement_gpu_small.json: no placement at this batch", out)
        self.assertNotIn("\nbatch 1:", out)
        out = self.output("--batch", "64", "1")
        self.assertIn("batch 1: no layer times in either run", out)
        self.assertNotIn("\nbatch 16:", out)

    def test_flags_override_the_copy_costs(self):
        out = self.output("--h2d-gbps", "10", "--d2h-gbps", "20", "--latency-us", "10")
        self.assertIn("H2D 10 GB/s: from --h2d-gbps", out)
        self.assertIn("D2H 20 GB/s: from --d2h-gbps", out)
        self.assertIn("fixed cost per copy 10 us: from --latency-us", out)
        copy = Copy(10e9, 20e9, 10e-6)
        total, devices = best_placement(expected_chain(), 4 * 64 * RESNET20_OUTPUT, copy)
        self.assertRegex(batch_block(out, 64), rf"best placement\s+{re.escape(us(total))} us")
        self.assertEqual(devices, [GPU] * 22 + [CPU])  # a fixed cost per copy changes nothing: one copy back either way

    def test_copy_cases_give_rate_and_fixed_cost(self):
        from dlbench.placement_runs import copy_model
        from dlbench.results import load

        doc = json.loads(GPU_MORE.read_text())
        base = next(b for b in doc["benchmarks"] if "gpu_d2h_pinned_async" in b["name"])
        for size, ns in ((4096, 9656.0), (268435456, 4862377.0)):
            name = f"copy/gpu_h2d_pinned_async/bytes:{size}/manual_time"
            doc["benchmarks"].append({**base, "name": name, "run_name": name, "real_time": ns,
                                      "bytes_per_second": size / (ns * 1e-9)})
        path = self.dir / "with_h2d.json"
        path.write_text(json.dumps(doc))
        model = copy_model([load(path)])
        self.assertAlmostEqual(model.copy.h2d_bytes_per_s, 268435456 / 4862377e-9)
        self.assertAlmostEqual(model.copy.latency_s, 9656e-9 - 4096 / (268435456 / 4862377e-9))
        self.assertIn("copy/gpu_h2d_pinned_async/bytes:4096 (4 KiB) takes 9.7 us", " ".join(model.notes))

    def test_activation_sizes_from_traffic_and_label(self):
        from dlbench.placement_runs import _sizes

        # Padded ('same') and unpadded convolutions 0.5% apart in traffic: mnist_cnn's conv1 reads 28x28, not 26x26.
        self.assertEqual(_sizes("conv+bias+relu", "3->16 3x3", 3 * 32 * 32 + 16 * 32 * 32, None), (3072, 16384))
        self.assertEqual(_sizes("conv+bias+relu", "1->32 3x3", 28 * 28 + 32 * 26 * 26, None), (784, 21632))
        self.assertEqual(_sizes("conv+bias+add+relu", "32->32 3x3", 8192 * 3, None), (8192, 8192))
        self.assertEqual(_sizes("conv+bias", "16->32 1x1 s2", 16384 + 8192, None), (16384, 8192))
        self.assertEqual(_sizes("fc+bias", "64->10", 74, 4096), (64, 10))
        self.assertEqual(_sizes("avg_pool", "", 4096 + 64, 4096), (4096, 64))
        self.assertIsNone(_sizes("avg_pool", "", 4096 + 64, None))  # first layer, no shape: cannot be told
        self.assertIsNone(_sizes("conv+bias+relu", "3->16 3x3", 12345.6, None))

    def test_the_plot_is_written(self):
        png = self.dir / "sub" / "placement.png"
        out = self.output("--plot", png)
        self.assertIn(f"wrote {png}", out)
        self.assertEqual(png.read_bytes()[:8], b"\x89PNG\r\n\x1a\n")

    def assert_refused(self, p, *words):
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertNotIn("Traceback", p.stderr)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        for w in words:
            self.assertIn(w, p.stderr)

    def test_bad_input_exits_2_with_one_line(self):
        missing = self.dir / "missing.json"
        self.assert_refused(run(missing, GPU_RUN, GPU_MORE), str(missing), "cannot read")
        foreign = self.dir / "foreign.json"
        foreign.write_text(json.dumps({"rows": [1, 2]}))
        self.assert_refused(run(CPU_RUN, foreign, GPU_MORE), str(foreign), "not Google Benchmark JSON")
        no_layers = DATA / "bench_small.json"
        self.assert_refused(run(no_layers, GPU_RUN, GPU_MORE), str(no_layers), "no resnet20_layer/cpu_own/")
        self.assert_refused(run(CPU_RUN, GPU_RUN, GPU_MORE, "--cpu-backend", "cpu_eigen"),
                            "no resnet20_layer/cpu_eigen/", "it has cpu_own")
        self.assert_refused(run(CPU_RUN, GPU_RUN), "give --h2d-gbps and --d2h-gbps")
        self.assertEqual(run(CPU_RUN, GPU_RUN, "--h2d-gbps", "50", "--d2h-gbps", "50").returncode, 0)
        self.assert_refused(run(CPU_RUN, GPU_RUN, GPU_MORE, "--batch", "16"), "no batch has layer times in both")
        p = run(CPU_RUN, GPU_RUN, GPU_MORE, "--latency-us", "-1")
        self.assertEqual(p.returncode, 2)
        self.assertNotIn("Traceback", p.stderr)

    def test_help(self):
        p = subprocess.run(["python3", str(SCRIPT), "--help"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("CPU_RUN GPU_RUN", p.stdout)


if __name__ == "__main__":
    unittest.main()
