"""softmax and log_softmax: GB/s against cols in the DRAM regime, one line per
variant, with the copy ceilings measured in the same run drawn across; and
the fused/naive speedup against cols in the DRAM and cache regimes.

The regime of a case follows from its size: x of at least DRAM_BYTES is the
DRAM regime (256 MiB in the default suite), x of at most CACHE_BYTES the
cache regime (512 KiB); the one long row (rows:1/cols:1000000, 4 MB) is
in neither and appears in the table only."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt

from dlbench.figures._common import (GB, ceiling, fraction_of_ceiling, label_for, many_machines, noisy_mark,
                                     note_errors, plain_numbers, series)
from dlbench.names import split_name
from dlbench.results import Case, Results

FAMILY = "softmax"
LOG_FAMILY = "log_softmax"
CEILINGS = {"cpu": "roofline/cpu_copy", "gpu": "roofline/gpu_copy"}
# The GPU memory ceiling: gpu_memory, the fastest of several streaming
# kernels (a copy among them), where the run has it; older runs: the copy.
GPU_MEMORY = "roofline/gpu_memory"


def ceiling_name(results: Results, device: str) -> str:
    """The ceiling softmax on `device` is read against in this run."""
    if device == "gpu" and ceiling(results, GPU_MEMORY, "bytes_per_second") is not None:
        return GPU_MEMORY
    return CEILINGS[device]
DRAM_BYTES = 64 << 20
CACHE_BYTES = 1 << 20


def x_bytes(case: Case) -> int:
    return case.args.get("rows", 0) * case.args.get("cols", 0) * 4


def regime(case: Case) -> str:
    size = x_bytes(case)
    return "dram" if size >= DRAM_BYTES else "cache" if size <= CACHE_BYTES else "other"


def in_regime(cases: list[Case], name: str) -> list[Case]:
    return [c for c in cases if regime(c) == name]


def gbps(case: Case | None) -> float | None:
    if case is None or case.error is not None:
        return None
    m = case.median("bytes_per_second")
    return m / GB if m else None


def speedups(cases: list[Case], device: str):
    """cols -> median GB/s of <device>_fused / <device>_naive, per cols (same bytes, so a time ratio)."""
    by_variant = {v: dict(zip(xs, ys)) for v, (xs, ys) in series(cases, "cols", "bytes_per_second").items()}
    fused, naive = by_variant.get(f"{device}_fused", {}), by_variant.get(f"{device}_naive", {})
    cols = sorted(set(fused) & set(naive))
    return cols, [fused[c] / naive[c] if naive[c] > 0 else math.nan for c in cols]


def figures(results_list: list[Results]):
    softmax_all = [c for r in results_list for c in r.family(FAMILY) + r.family(LOG_FAMILY)]
    if not softmax_all:
        return {}
    fig, (ax, ax_speedup) = plt.subplots(1, 2, figsize=(13, 5.2), layout="constrained",
                                         gridspec_kw={"width_ratios": [3, 2]})
    many = many_machines(results_list)
    # One colour per variant, shared by its softmax (solid) and log_softmax (dashed) lines.
    variants = sorted({c.variant for c in softmax_all})
    colour = {v: f"C{i % 10}" for i, v in enumerate(variants)}
    for r in results_list:
        for op, style in ((FAMILY, "-"), (LOG_FAMILY, "--")):
            dram = in_regime(r.family(op), "dram")
            for variant, (xs, ys) in series(dram, "cols", "bytes_per_second", GB).items():
                name = variant if op == FAMILY else f"log_softmax {variant}"
                ax.plot(xs, ys, style, color=colour[variant], marker="o", markersize=3,
                        label=label_for(r, name, many))
        for i, device in enumerate(CEILINGS):
            name = ceiling_name(r, device)
            value = ceiling(r, name, "bytes_per_second")
            if value is not None:
                ax.axhline(value / GB, linestyle=":", linewidth=1.5, color=("black", "dimgray")[i],
                           label=label_for(r, f"{split_name(name).variant} ceiling {value / GB:.1f} GB/s", many))
        for device in CEILINGS:
            for regime_name, marker in (("dram", "o"), ("cache", "s")):
                xs, ys = speedups(in_regime(r.family(FAMILY), regime_name), device)
                if xs:
                    ax_speedup.plot(xs, ys, marker=marker, markersize=4,
                                    label=label_for(r, f"{device}_fused / {device}_naive, {regime_name}", many))
    cols_ticks = sorted({c.args["cols"] for c in softmax_all if regime(c) != "other"})
    ax.set_title("softmax, DRAM regime (x = 256 MiB): bandwidth against row length")
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain_numbers(ax.yaxis)
    ax.set_xlabel("cols (row length; rows = 2^26 / cols)")
    ax.set_ylabel("GB/s (2 * rows * cols * 4 bytes per call)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    note_errors(ax, softmax_all)

    ax_speedup.set_title("fusion: fused / naive (time ratio)")
    ax_speedup.set_xscale("log")
    for axis in (ax.xaxis, ax_speedup.xaxis):
        axis.set_ticks(cols_ticks, [str(c) for c in cols_ticks])
        axis.set_ticks([], minor=True)
    ax_speedup.axhline(1.0, color="gray", linewidth=1)
    ax_speedup.set_xlabel("cols")
    ax_speedup.set_ylabel("speedup")
    ax_speedup.grid(True, which="both", alpha=0.3)
    ax_speedup.legend(fontsize=7)
    return {"softmax": fig}


def _device_table(results: Results, device: str) -> list[str]:
    cases = {c.name: c for c in results.family(FAMILY) + results.family(LOG_FAMILY) if c.device == device}
    if not cases:
        return []
    columns = sorted({(c.op, c.variant) for c in cases.values()}, key=lambda ov: (ov[0] != FAMILY, ov[1]))
    shapes = sorted({(regime(c) != "dram", regime(c), c.args["cols"], c.args["rows"]) for c in cases.values()})
    name = ceiling_name(results, device)
    copy = ceiling(results, name, "bytes_per_second")
    head = [f"`{v}`" if op == FAMILY else f"log `{v}`" for op, v in columns]
    ratio_names = ["fused/naive", f"fused/{split_name(name).variant}"]
    lines = ["| shape | " + " | ".join(head + ratio_names) + " |", "|---|" + "---:|" * (len(head) + 2)]
    for _, regime_name, cols, rows in shapes:
        def cell(op, variant):
            return gbps(cases.get(f"{op}/{variant}/rows:{rows}/cols:{cols}"))
        values = [cell(op, v) for op, v in columns]
        fused, naive = cell(FAMILY, f"{device}_fused"), cell(FAMILY, f"{device}_naive")
        fused_case = cases.get(f"{FAMILY}/{device}_fused/rows:{rows}/cols:{cols}")
        of_ceiling, _ = fraction_of_ceiling(results, fused_case, name)
        ratios = [f"{fused / naive:.2f}" if fused and naive else "n/a",
                  f"{of_ceiling:.2f}{noisy_mark(fused_case)}" if of_ceiling else "n/a"]
        label = {"dram": f"DRAM, cols {cols}", "cache": f"cache, cols {cols}"}.get(regime_name,
                                                                                 f"rows {rows}, cols {cols}")
        lines.append(f"| {label} | " + " | ".join(f"{v:.1f}" if v else "n/a" for v in values) + " | " +
                     " | ".join(ratios) + " |")
    return lines


def table(results: Results) -> str:
    """Markdown, per device: GB/s of every variant at every shape (softmax,
    then log_softmax), fused/naive and fused against the copy ceiling of the
    same run."""
    parts = []
    for device in CEILINGS:
        lines = _device_table(results, device)
        if lines:
            name = ceiling_name(results, device)
            copy = ceiling(results, name, "bytes_per_second")
            parts.append("\n".join(lines))
            ceiling_text = (f"`{name}` {copy / GB:.1f} GB/s" if copy else
                            f"no `{name}` in this file")
            fused = [c for c in results.family(FAMILY) if c.variant == f"{device}_fused"]
            bracketed = any(fraction_of_ceiling(results, c, name)[1] for c in fused)
            how = (f"fused/{split_name(name).variant} is bracketed: the median over the repetitions of "
                   "each one's bytes per second over the copy ceiling measured right before and after it"
                   if bracketed else f"fused/{split_name(name).variant} divides by the run's ceiling case")
            parts.append(f"GB/s, median of the repetitions ({device}); {ceiling_text}; {how}.")
    return "\n\n".join(parts)
