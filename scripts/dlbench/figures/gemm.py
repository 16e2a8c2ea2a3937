"""gemm: throughput of every variant against the square size m = n = k (log
x), with the fp32 ceilings measured in the same run drawn across
(roofline/cpu_fma, roofline/cpu_sgemm_onednn and their GPU twins), and beside
it err_vs_f32 of every reduced-precision variant: speed and the accuracy it
costs side by side. A second figure gives the throughput at the other shapes
(fully connected layers, DeepBench inference GEMMs)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt

from dlbench.figures._common import GFLOP, ceiling, label_for, many_machines, note_errors, plain_numbers, series
from dlbench.isa import isa_note
from dlbench.names import split_name
from dlbench.results import Case, Results

FAMILY = "gemm"
CEILINGS = ("roofline/cpu_fma", "roofline/cpu_sgemm_onednn", "roofline/gpu_fma", "roofline/gpu_sgemm_cublas")
TABLE_SIZES = (1024, 2048)
# (numerator, denominator, size, at least): the ratios the issue asks for.
RATIOS = (("cpu_onednn_s8", "cpu_onednn_f32", 2048, 8.0),
          ("cpu_vnni_s8", "cpu_eigen_f32", 1024, 2.0),
          ("cpu_vnni_s8", "cpu_eigen_f32", 2048, 2.0))


def is_square(c: Case) -> bool:
    return c.args.get("m") == c.args.get("n") == c.args.get("k")


def shape_label(c: Case) -> str:
    return f"{c.args['m']}x{c.args['n']}x{c.args['k']}"


def has_error_counter(c: Case) -> bool:
    return bool(c.values("err_vs_f32")) or c.error is not None


def gflops(c: Case | None) -> float | None:
    if c is None or c.error is not None:
        return None
    m = c.median("flops")
    return m / GFLOP if m else None


def find(results: Results, variant: str, size: int) -> Case | None:
    return results.cases.get(f"{FAMILY}/{variant}/m:{size}/n:{size}/k:{size}")


MARKERS = "os^vD<>px*"


def styles(results_list: list[Results]) -> dict[str, dict]:
    """One colour and marker per (machine, variant) label, the same in every panel."""
    many = many_machines(results_list)
    labels = sorted({label_for(r, c.variant, many) for r in results_list for c in r.family(FAMILY)})
    return {label: {"color": f"C{i % 10}", "marker": MARKERS[i % len(MARKERS)]} for i, label in enumerate(labels)}


def square_figure(results_list: list[Results]):
    fig, (ax, ax_err) = plt.subplots(1, 2, figsize=(14, 5.5), layout="constrained")
    fig.suptitle("gemm C[m,n] = A[m,k] B[k,n], m = n = k")
    many = many_machines(results_list)
    style = styles(results_list)
    sizes = set()
    for r in results_list:
        square = [c for c in r.family(FAMILY) if is_square(c)]
        sizes |= {c.args["m"] for c in square}
        for variant, (xs, ys) in series(square, "m", "flops", GFLOP).items():
            label = label_for(r, variant, many)
            # The ISA of the largest size and its peak over fp32 FMA: "3.9x" reads as "of a possible 4x".
            largest = max((c for c in square if c.variant == variant and c.runs), key=lambda c: c.args["m"],
                          default=None)
            isa = isa_note(largest, r.context) if largest is not None else None
            ax.plot(xs, ys, markersize=4, label=label + (f" ({isa})" if isa else ""), **style[label])
        for i, name in enumerate(CEILINGS):
            value = ceiling(r, name, "flops")
            if value is not None:
                short = split_name(name).variant
                ax.axhline(value / GFLOP, linestyle="--", linewidth=1, color="grey" if i % 2 == 0 else "black",
                           label=label_for(r, f"{short} ceiling {value / GFLOP:.0f} GFLOP/s", many))
        reduced = [c for c in square if has_error_counter(c)]
        for variant, (xs, ys) in series(reduced, "m", "err_vs_f32").items():
            label = label_for(r, variant, many)
            ax_err.plot(xs, ys, markersize=4, label=label, **style[label])
    ax_err.text(0.01, 0.01, "the int8 variants compute the same dequantized product bit for bit:\n"
                "their errors coincide (the scheme costs the accuracy, not the kernel)",
                transform=ax_err.transAxes, fontsize=7, va="bottom")
    ax.set_title("throughput (2mnk per call; int8 multiply-adds counted the same)")
    ax.set_ylabel("GFLOP/s (int8: GOP/s)")
    ax.set_yscale("log")
    plain_numbers(ax.yaxis)
    ax_err.set_title("err_vs_f32 = max|C - C_f32| / max|C_f32|, C_f32 from the fp32 inputs")
    ax_err.set_ylabel("relative max-norm error")
    ax_err.set_yscale("log")
    for a in (ax, ax_err):
        a.set_xscale("log", base=2)
        a.set_xticks(sorted(sizes), [str(s) for s in sorted(sizes)])
        a.minorticks_off()
        a.set_xlabel("m = n = k")
        a.grid(True, which="both", alpha=0.3)
        a.legend(fontsize=7)
    note_errors(ax, [c for r in results_list for c in r.family(FAMILY) if is_square(c)])
    return fig


def shapes_figure(results_list: list[Results]):
    other = [(r, c) for r in results_list for c in r.family(FAMILY) if not is_square(c)]
    if not other:
        return None
    many = many_machines(results_list)
    shapes = sorted({shape_label(c) for _, c in other}, key=lambda s: [int(v) for v in s.split("x")])
    variants = sorted({label_for(r, c.variant, many) for r, c in other})
    style = styles(results_list)
    fig, ax = plt.subplots(figsize=(10, 0.55 * len(shapes) * max(1, len(variants)) / 3 + 2), layout="constrained")
    height = 0.8 / len(variants)
    for vi, variant in enumerate(variants):
        values = {shape_label(c): gflops(c) for r, c in other if label_for(r, c.variant, many) == variant}
        ys = [si + vi * height for si in range(len(shapes))]
        xs = [values.get(s) or math.nan for s in shapes]
        ax.barh(ys, xs, height=height, label=variant, color=style[variant]["color"])
    ax.set_yticks([si + 0.4 - height / 2 for si in range(len(shapes))], shapes)
    ax.invert_yaxis()
    ax.set_xscale("log")
    plain_numbers(ax.xaxis)
    ax.set_xlabel("GFLOP/s (int8: GOP/s), 2mnk per call")
    ax.set_ylabel("m x n x k")
    ax.set_title("gemm at the fully connected and DeepBench inference shapes")
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ax.legend(fontsize=7)
    note_errors(ax, [c for _, c in other])
    return fig


def figures(results_list: list[Results]):
    if not any(r.family(FAMILY) for r in results_list):
        return {}
    out = {"gemm": square_figure(results_list)}
    shapes = shapes_figure(results_list)
    if shapes is not None:
        out["gemm_shapes"] = shapes
    return out


def table(results: Results) -> str:
    """Markdown: GFLOP/s and err_vs_f32 of each variant at 1024^3 and 2048^3,
    the implementation oneDNN chose, and the ratios the issue asks for."""
    cases = [c for c in results.family(FAMILY) if is_square(c) and c.args["m"] in TABLE_SIZES]
    if not cases:
        return ""
    header = (["variant"] + [f"GFLOP/s {s}^3" for s in TABLE_SIZES] + [f"err_vs_f32 {s}^3" for s in TABLE_SIZES]
              + ["implementation"])
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (2 * len(TABLE_SIZES)) + "---|"]
    for variant in sorted({c.variant for c in cases}):
        found = [find(results, variant, s) for s in TABLE_SIZES]
        speed = [f"{g:.0f}" if (g := gflops(c)) else "n/a" for c in found]
        errs = []
        for c in found:
            e = c.median("err_vs_f32") if c is not None and c.error is None else None
            errs.append(f"{e:.2g}" if e is not None else "")
        label = next((c.runs[0].get("label", "") for c in found if c is not None and c.runs), "")
        lines.append(f"| {variant} | " + " | ".join(speed + errs) + f" | {label} |")
    notes = []
    for num, den, size, least in RATIOS:
        a, b = gflops(find(results, num, size)), gflops(find(results, den, size))
        if a and b:
            isa = isa_note(find(results, num, size), results.context)
            notes.append(f"`{num}` / `{den}` at {size}^3: **{a / b:.1f}x** (asked: >= {least:g}x)"
                         + (f"; {num} ran on {isa}" if isa else ""))
    lines.append("")
    lines.append("Median of the repetitions. err_vs_f32 is blank for fp32 variants (their error is max_rel_err).")
    if notes:
        lines.append("")
        lines.extend(f"- {n}" for n in notes)
    return "\n".join(lines)
