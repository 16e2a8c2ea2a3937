"""Where the time of a forward pass goes (the <net>_layer cases): per-layer
times stacked by op, per backend and batch size; the gap between a whole pass
and its layers; the top-10 table of ops (PyTorch profiler's key_averages()
view) and the per-layer roofline table that scripts/profile.py prints."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import matplotlib.pyplot as plt

from dlbench.figures._common import ceiling, note_errors, tables_with_note
from dlbench.names import device_of
from dlbench.results import Case, Results

FAMILY = "layers"  # the README block; the cases are <net>_layer
NETWORKS = ("resnet20", "mnist_cnn", "mnist_lenet")
BATCHES = (1, 16, 64)


@dataclass
class Layer:
    index: int
    name: str  # PyTorch's module path
    op: str  # the fused op, "conv+bias+relu"
    shape: str  # "16->16 3x3"
    seconds: float  # median over the repetitions, per pass
    flops: float | None  # achieved FLOP/s
    bytes_per_second: float | None
    share: float | None


def _split_label(label: str) -> tuple[str, str, str]:
    name, _, rest = label.partition(" ")
    op, _, shape = rest.partition(" ")
    return name, op, shape


def layers_of(results: Results, network: str, variant: str, batch: int) -> list[Layer] | None:
    """The layers of one backend at one batch, in order; None if any layer is missing or errored."""
    cases = [c for c in results.family(f"{network}_layer")
             if c.variant == variant and c.args.get("batch") == batch and "layer" in c.args]
    if not cases or any(c.error is not None or not c.runs for c in cases):
        return None
    out = []
    for c in sorted(cases, key=lambda c: c.args["layer"]):
        name, op, shape = _split_label(str(c.runs[0].get("label", "")))
        out.append(Layer(c.args["layer"], name, op, shape, c.median_seconds(), c.median("flops"),
                         c.median("bytes_per_second"), c.median("share")))
    return out


def pass_case(results: Results, network: str, variant: str, batch: int) -> Case | None:
    c = results.cases.get(f"{network}_layer/{variant}/batch:{batch}/pass")
    return c if c is not None and c.error is None and c.runs else None


def variants_of(results: Results, network: str) -> list[str]:
    return sorted({c.variant for c in results.family(f"{network}_layer")})


def top_ops(layers: list[Layer], by_shape: bool = False) -> list[tuple[str, int, float]]:
    """[(op or 'op shape', calls, total seconds)], largest total first."""
    groups: dict[str, list[float]] = defaultdict(list)
    for l in layers:
        groups[f"{l.op} {l.shape}".strip() if by_shape else l.op].append(l.seconds)
    return sorted(((k, len(v), sum(v)) for k, v in groups.items()), key=lambda t: -t[2])


def top10_table(results: Results, network: str, variant: str, batches=BATCHES, by_shape: bool = False,
                limit: int = 10) -> str:
    """Markdown: per op (or op and shape), calls, and at each batch size total time per pass, its % of the
    summed layer times and the average per call; the time at each batch over batch 1's (work grows with
    the batch); the gap (the pass against its layers) as the last row."""
    per_batch = {b: layers_of(results, network, variant, b) for b in batches}
    per_batch = {b: l for b, l in per_batch.items() if l}
    if not per_batch:
        return ""
    first = next(iter(per_batch))
    order = [op for op, _, _ in top_ops(per_batch[max(per_batch)], by_shape)][:limit]
    head = "| op | calls | " + " | ".join(f"batch {b}: total (% of layers), avg/call" for b in per_batch)
    growth = [b for b in per_batch if b != first]
    head += "".join(f" | time b{b} / b{first}" for b in growth) + " |"
    lines = [head, "|---|---:|" + "---:|" * (len(per_batch) + len(growth))]
    totals = {b: {op: (calls, t) for op, calls, t in top_ops(l, by_shape)} for b, l in per_batch.items()}
    sums = {b: sum(l.seconds for l in layers) for b, layers in per_batch.items()}
    for op in order:
        calls = totals[max(per_batch)][op][0]
        cells = []
        for b in per_batch:
            _, t = totals[b].get(op, (0, math.nan))
            cells.append(f"{t * 1e6:,.1f} us ({100 * t / sums[b]:.1f}%), {t / calls * 1e6:,.1f} us")
        ratios = [f"{totals[b][op][1] / totals[first][op][1]:.1f}x" for b in growth]
        lines.append(f"| `{op}` | {calls} | " + " | ".join(cells + ratios) + " |")
    gap_cells = []
    for b in per_batch:
        p = pass_case(results, network, variant, b)
        gap_cells.append("n/a" if p is None else
                         f"{p.median('gap_us'):,.1f} us ({100 * p.median('gap_frac'):.1f}% of the pass)")
    lines.append("| (gap: pass - layers) | | " + " | ".join(gap_cells) + " |" + " |" * len(growth))
    return "\n".join(lines)


def roofline_table(results: Results, network: str, variant: str, batch: int) -> str:
    """Markdown, per layer: time, achieved GFLOP/s and GB/s, arithmetic intensity, which ceiling bounds it
    at that intensity (the run's roofline/cpu_fma and roofline/cpu_triad, or the GPU's), and the fraction of
    that bound reached."""
    layers = layers_of(results, network, variant, batch)
    if not layers:
        return ""
    gpu = device_of(variant) == "gpu"
    fma = ceiling(results, "roofline/gpu_fma" if gpu else "roofline/cpu_fma", "flops")
    if gpu:  # the GPU memory ceiling (gpu_memory, the fastest of its parts; older runs: copy or triad)
        found = [v for v in (ceiling(results, n, "bytes_per_second")
                             for n in ("roofline/gpu_memory", "roofline/gpu_copy", "roofline/gpu_triad"))
                 if v is not None]
        bw = max(found) if found else None
    else:
        bw = ceiling(results, "roofline/cpu_triad", "bytes_per_second")
    lines = ["| layer | op | time | GFLOP/s | GB/s | FLOP/byte | bound | of the bound |",
             "|---|---|---:|---:|---:|---:|---|---:|"]
    for l in layers:
        ai = l.flops / l.bytes_per_second if l.flops and l.bytes_per_second else 0.0
        if fma and bw:
            roof = min(fma, ai * bw) if ai > 0 else bw
            bound = "compute" if ai * bw >= fma else "memory"
            reached = (l.flops / roof) if ai > 0 else (l.bytes_per_second or 0) / bw
            bound_cells = f"{bound} | {100 * reached:.0f}%"
        else:
            bound_cells = "n/a (no ceilings in this run) | n/a"
        lines.append(f"| `{l.name}` {l.shape} | `{l.op}` | {l.seconds * 1e6:,.1f} us | "
                     f"{(l.flops or 0) / 1e9:,.1f} | {(l.bytes_per_second or 0) / 1e9:,.1f} | {ai:.1f} | {bound_cells} |")
    lines.append("")
    lines.append("FLOP/s count a direct convolution's multiply-adds and bytes each operand once; over 100% of the "
                 "bound means fewer multiplications than that (Winograd) or data served from cache (the memory "
                 "bound is the run's DRAM triad).")
    return "\n".join(lines)


def figures(results_list: list[Results]):
    figs = {}
    for r in results_list[:1]:  # one run: stacked times are not comparable across machines
        present = [n for n in NETWORKS if variants_of(r, n)]
        if not present:
            return {}
        fig, axes = plt.subplots(len(present), len(BATCHES), figsize=(5.0 * len(BATCHES), 4.2 * len(present)),
                                 layout="constrained", squeeze=False)
        colors = {}
        cmap = plt.get_cmap("tab10")
        for row, network in zip(axes, present):
            for ax, batch in zip(row, BATCHES):
                variants = variants_of(r, network)
                for x, v in enumerate(variants):
                    layers = layers_of(r, network, v, batch)
                    bottom = 0.0
                    for op, _, t in (top_ops(layers) if layers else []):
                        color = colors.setdefault(op, cmap(len(colors) % 10))
                        ax.bar(x, t * 1e3, bottom=bottom, color=color, label=op)
                        bottom += t * 1e3
                    p = pass_case(r, network, v, batch)
                    if p is not None and p.median("gap_us") > 0:
                        ax.bar(x, p.median("gap_us") * 1e-3, bottom=bottom, color="white", edgecolor="black",
                               hatch="//", label="gap (pass - layers)")
                ax.set_xticks(range(len(variants)), variants, rotation=30, ha="right", fontsize=8)
                ax.set_title(f"{network}, batch {batch}")
                ax.set_ylabel("ms per pass")
                ax.grid(True, axis="y", alpha=0.3)
                note_errors(ax, [c for c in r.family(f"{network}_layer") if c.args.get("batch") == batch])
        handles = {}
        for ax in axes.flat:
            for h, l in zip(*ax.get_legend_handles_labels()):
                handles.setdefault(l, h)
        fig.legend(handles.values(), handles.keys(), loc="outside right upper", fontsize=8)
        fig.suptitle("Where a forward pass goes: per-layer time stacked by op (medians), and the gap")
        figs["layers"] = fig

        fig, axes = plt.subplots(1, len(present), figsize=(5.2 * len(present), 4.2), layout="constrained",
                                 squeeze=False)
        for ax, network in zip(axes[0], present):
            for v in variants_of(r, network):
                xs = [b for b in BATCHES if pass_case(r, network, v, b)]
                ys = [pass_case(r, network, v, b).median("gap_us") for b in xs]
                ax.plot(xs, ys, marker="o", label=v)
            ax.set_xscale("log", base=2)
            ax.set_xticks(BATCHES, [str(b) for b in BATCHES])
            ax.axhline(0, color="black", linewidth=0.6)
            ax.set_title(f"{network}: pass - sum of its layers")
            ax.set_xlabel("batch")
            ax.set_ylabel("gap per pass (us)")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
        figs["layers_gap"] = fig

        # The top ops per batch size (the profiler table's bars): time per pass of each op, one bar per
        # backend, the ops of the largest batch's order.
        fig, axes = plt.subplots(len(present), len(BATCHES), figsize=(5.0 * len(BATCHES), 3.6 * len(present)),
                                 layout="constrained", squeeze=False)
        for row, network in zip(axes, present):
            variants = variants_of(r, network)
            for ax, batch in zip(row, BATCHES):
                per_variant = {v: {op: t for op, _, t in top_ops(layers_of(r, network, v, batch) or [])}
                               for v in variants}
                # The order of the largest batch measured (the time this batch's bars compare with).
                measured = [(b, v) for b in sorted(BATCHES, reverse=True) for v in variants
                            if layers_of(r, network, v, b)]
                ops = [op for op, _, _ in top_ops(layers_of(r, network, measured[0][1], measured[0][0]))][:10] \
                    if measured else []
                height = 0.8 / max(len(variants), 1)
                ax.set_title(f"{network}, batch {batch}: top ops")
                values = {v: [per_variant[v].get(op, math.nan) * 1e6 for op in ops] for v in variants}
                if not any(x > 0 for vs in values.values() for x in vs):
                    # A run without layer cases at this batch (the default suite profiles one):
                    # nothing to put on a log axis.
                    ax.text(0.5, 0.5, "no layer cases at this batch", ha="center", va="center",
                            transform=ax.transAxes, fontsize=9)
                    ax.set_xticks([])
                    ax.set_yticks([])
                    continue
                for j, v in enumerate(variants):
                    ax.barh([i + j * height for i in range(len(ops))], values[v], height=height, label=v)
                ax.set_yticks([i + 0.4 - height / 2 for i in range(len(ops))], ops, fontsize=8)
                ax.invert_yaxis()
                ax.set_xscale("log")
                ax.set_xlabel("us per pass")
                ax.grid(True, axis="x", which="both", alpha=0.3)
                ax.legend(fontsize=7)
        figs["layers_top"] = fig
    return figs


def table(results: Results) -> str:
    """README: for resnet20 and mnist_cnn, the top ops of every backend at batch 1, 16 and 64
    (scripts/profile.py prints any network's)."""
    blocks = []
    for network in NETWORKS[:2]:
        for v in variants_of(results, network):
            body = top10_table(results, network, v)
            if body:
                blocks.append(f"**{network}, `{v}`**\n\n{body}")
    return tables_with_note(
        blocks, "Times per pass, medians of the repetitions; % of the summed layer times; "
        "each op is a fused layer (conv with its bias, residual add and ReLU), so an op's self time is its "
        "total. Gap: median whole pass (called as a user calls it, result waited for) minus the median sum "
        "of its layers timed in the same case.")
