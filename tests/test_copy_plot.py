"""scripts/dlbench/figures/copy.py on SYNTHETIC input.

The copy family is GPU only and no GPU run exists yet to take a fixture
from, so this test builds its Google Benchmark JSON here, in code, with
round made-up numbers: input for the plotting and table logic only. It is
never written under results/ and is not a measurement of anything.
"""

import json
import math
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from dlbench.figures import copy as copy_figures  # noqa: E402
from dlbench.names import case_name  # noqa: E402
from dlbench.results import load  # noqa: E402

PLOT = ROOT / "scripts" / "plot.py"
MiB = 1 << 20
SIZES = [4096, 256 * 1024, 16 * MiB, 256 * MiB, 1024 * MiB]
# Synthetic GB/s, chosen so that every derived figure is easy to check:
# pinned / pageable = 2.5 for every direction, call and size.
SYNTHETIC_GBPS = {"pinned": 25.0, "registered": 24.0, "wc": 26.0, "pageable": 10.0}
SYNTHETIC_REGISTER_GBPS = 8.0
SYNTHETIC_D2D_GBPS = 1500.0
SYNTHETIC_PIPELINE = {  # (kind, streams): (GB/s of bytes in + out, overlap_fraction)
    ("pinned", 1): (12.0, 0.01), ("pinned", 2): (22.0, 0.85), ("pinned", 4): (24.0, 0.93),
    ("pageable", 1): (5.0, -0.02), ("pageable", 2): (5.0, 0.01), ("pageable", 4): (5.0, 0.0),
}
PIPELINE_SIZES = [4 * MiB, 1024 * MiB]


def entry(name: str, gbps: float, nbytes: int, spread: float, **counters) -> dict:
    """One repetition of a GPU case as Google Benchmark writes it (manual time, ns)."""
    rate = gbps * 1e9 * spread
    return {"name": f"{name}/manual_time", "run_name": f"{name}/manual_time", "run_type": "iteration",
            "repetitions": 3, "iterations": 10, "real_time": nbytes / rate * 1e9, "cpu_time": 1.0,
            "time_unit": "ns", "bytes_per_second": rate, "max_rel_err": 0.0, **counters}


def synthetic_run(drop: tuple[str, ...] = (), oom: tuple[str, ...] = ()) -> dict:
    """Every case name the copy family registers, 3 repetitions each (median = the value above).
    `drop`: case names left out; `oom`: case names reported as skipped for lack of memory."""
    cases = []  # (name, gbps, bytes, counters)
    for direction in ("h2d", "d2h"):
        for kind, gbps in SYNTHETIC_GBPS.items():
            if kind == "wc" and direction == "d2h":
                continue
            for call in ("sync", "async"):
                cases += [(f"copy/gpu_{direction}_{kind}_{call}/bytes:{b}", gbps, b, {}) for b in SIZES]
    cases += [(f"copy/gpu_d2d/bytes:{b}", SYNTHETIC_D2D_GBPS, b, {}) for b in SIZES if b >= MiB]  # as registered
    cases += [(f"copy/gpu_register_cost/bytes:{b}", SYNTHETIC_REGISTER_GBPS, b, {}) for b in SIZES]
    for (kind, streams), (gbps, fraction) in SYNTHETIC_PIPELINE.items():
        for b in PIPELINE_SIZES:
            name = (f"copy/gpu_serial_{kind}/chunks:16/bytes:{b}" if streams == 1
                    else f"copy/gpu_overlap_{kind}/streams:{streams}/chunks:16/bytes:{b}")
            cases.append((name, gbps, 2 * b, {"overlap_fraction": fraction}))
    benchmarks = []
    for name, gbps, nbytes, counters in cases:
        if name in drop:
            continue
        if name in oom:
            benchmarks.append({"name": f"{name}/manual_time", "run_name": f"{name}/manual_time",
                               "run_type": "iteration", "error_occurred": True,
                               "error_message": "error: cudaMalloc(&p, bytes) failed: cudaErrorMemoryAllocation: "
                                                "out of memory"})
            continue
        benchmarks += [entry(name, gbps, nbytes, s, **counters) for s in (0.9, 1.0, 1.1)]
    return {"context": {"machine": "synthetic-plot-test-input", "git_commit": "synthetic"}, "benchmarks": benchmarks}


def load_synthetic(directory: str, **kwargs):
    path = Path(directory) / "synthetic-copy.json"
    path.write_text(json.dumps(synthetic_run(**kwargs)))
    return path, load(path)


def line(ax, label):
    return next(l for l in ax.get_lines() if l.get_label() == label)


class CopyFigure(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path, self.results = load_synthetic(self.dir.name)

    def tearDown(self):
        self.dir.cleanup()

    def test_bandwidth_panels_have_a_line_per_kind_and_call_at_the_medians(self):
        fig = copy_figures.figures([self.results])["copy"]
        h2d, d2h = fig.axes[0], fig.axes[1]
        h2d_labels = {l.get_label() for l in h2d.get_lines()}
        for kind in ("pageable", "pinned", "registered", "wc"):
            for call in ("sync", "async"):
                self.assertIn(f"gpu_h2d_{kind}_{call}", h2d_labels)
        d2h_labels = {l.get_label() for l in d2h.get_lines()}
        self.assertNotIn("gpu_d2h_wc_sync", d2h_labels)
        self.assertIn("gpu_d2h_registered_async", d2h_labels)
        pinned = line(h2d, "gpu_h2d_pinned_sync")
        self.assertEqual(list(pinned.get_xdata()), SIZES)
        for y in pinned.get_ydata():
            self.assertAlmostEqual(y, SYNTHETIC_GBPS["pinned"])
        self.assertAlmostEqual(line(h2d, "gpu_d2d (device side)").get_ydata()[0], SYNTHETIC_D2D_GBPS)

    def test_pinned_on_the_fly_is_derived_from_register_cost_and_the_registered_copy(self):
        fig = copy_figures.figures([self.results])["copy"]
        derived = line(fig.axes[0], "register + registered sync copy + unregister")
        expected = 1.0 / (1.0 / SYNTHETIC_REGISTER_GBPS + 1.0 / SYNTHETIC_GBPS["registered"])
        self.assertEqual(list(derived.get_xdata()), SIZES)
        for y in derived.get_ydata():
            self.assertAlmostEqual(y, expected)

    def test_ratio_panel_is_pinned_over_pageable(self):
        ratios = copy_figures.ratios(self.results)
        self.assertEqual(sorted(ratios), ["d2h async", "d2h sync", "h2d async", "h2d sync"])
        fig = copy_figures.figures([self.results])["copy"]
        for name in ratios:
            for y in line(fig.axes[2], name).get_ydata():
                self.assertAlmostEqual(y, SYNTHETIC_GBPS["pinned"] / SYNTHETIC_GBPS["pageable"])

    def test_overlap_bars_are_the_largest_pipeline_size_with_their_fraction(self):
        size, by_kind = copy_figures.overlap(self.results)
        self.assertEqual(size, max(PIPELINE_SIZES))
        self.assertEqual(sorted(by_kind), ["pageable", "pinned"])
        self.assertEqual(list(by_kind["pinned"]), [1, 2, 4])
        ax = copy_figures.figures([self.results])["copy"].axes[3]
        heights = [p.get_height() for p in ax.patches]
        expected = [SYNTHETIC_PIPELINE[(k, s)][0] for k in ("pageable", "pinned") for s in (1, 2, 4)]
        for got, want in zip(heights, expected, strict=True):
            self.assertAlmostEqual(got, want)
        texts = [t.get_text() for t in ax.texts]
        self.assertIn("24.0\noverlap 0.93", texts)

    def test_table_gives_256_mib_figures_ratios_and_overlap_speedup(self):
        text = copy_figures.table(self.results)
        self.assertIn("| direction, call | pageable | pinned | registered | wc | pinned / pageable |", text)
        self.assertIn("| h2d sync | 10.0 | 25.0 | 24.0 | 26.0 | 2.50 |", text)
        self.assertIn("| d2h async | 10.0 | 25.0 | 24.0 | n/a | 2.50 |", text)  # no wc d2h
        self.assertIn("device to device 1500.0 GB/s", text)
        register_ms = 256 * MiB / (SYNTHETIC_REGISTER_GBPS * 1e9) * 1e3
        self.assertIn(f"cudaHostRegister + cudaHostUnregister {register_ms:.1f} ms", text)
        self.assertIn("of 1 GiB", text)
        self.assertIn("| pinned | 12.0 | 22.0 | 24.0 | 2.00 | 0.93 |", text)
        self.assertIn("| pageable | 5.0 | 5.0 | 5.0 | 1.00 | 0.00 |", text)

    def test_out_of_memory_is_drawn_missing_listed_and_n_a_in_the_table(self):
        name = f"copy/gpu_h2d_pinned_sync/bytes:{256 * MiB}"
        path, results = load_synthetic(self.dir.name, oom=(name,))
        fig = copy_figures.figures([results])["copy"]
        pinned = line(fig.axes[0], "gpu_h2d_pinned_sync")
        self.assertTrue(math.isnan(pinned.get_ydata()[SIZES.index(256 * MiB)]))
        self.assertTrue(math.isnan(line(fig.axes[2], "h2d sync").get_ydata()[SIZES.index(256 * MiB)]))
        notes = " ".join(t.get_text() for ax in fig.axes for t in ax.texts)
        self.assertIn(name, notes)
        self.assertIn("| h2d sync | 10.0 | n/a | 24.0 | 26.0 | n/a |", copy_figures.table(results))
        p = subprocess.run([sys.executable, str(PLOT), str(path), "--out-dir", self.dir.name],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(f"not measured, drawn as missing: {name}: error: cudaMalloc", p.stderr)

    def test_a_run_without_the_pipeline_or_register_cost_still_draws(self):
        drop = tuple(c for c in (case_name(e["run_name"]) for e in synthetic_run()["benchmarks"])
                     if "serial" in c or "overlap" in c or "register_cost" in c)
        _, results = load_synthetic(self.dir.name, drop=drop)
        fig = copy_figures.figures([results])["copy"]
        labels = {l.get_label() for l in fig.axes[0].get_lines()}
        self.assertNotIn("register + registered sync copy + unregister", labels)
        self.assertEqual(len(fig.axes[3].patches), 0)
        self.assertNotIn("Chunk pipeline", copy_figures.table(results))

    def test_plot_py_writes_copy_png(self):
        p = subprocess.run([sys.executable, str(PLOT), str(self.path), "--out-dir", self.dir.name],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        png = Path(self.dir.name) / "copy.png"
        self.assertEqual(png.read_bytes()[:8], b"\x89PNG\r\n\x1a\n")

    def test_nothing_without_copy_cases(self):
        cpu_only = load(ROOT / "tests" / "data" / "bench_small.json")  # a real CPU run: no GPU cases
        self.assertEqual(copy_figures.figures([cpu_only]), {})
        self.assertEqual(copy_figures.table(cpu_only), "")


if __name__ == "__main__":
    unittest.main()
