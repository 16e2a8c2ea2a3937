"""conv: which algorithm wins for which shape. Per batch size one figure,
one row per shape, a CPU panel and (when the results have GPU cases) a GPU
panel: GFLOP/s of every algorithm (the direct count 2*n*k*oh*ow*c*r*s, so an
algorithm that does fewer multiplications shows a higher rate), the winner
marked, skipped and failed cases listed with their reason. The table gives
per shape the winner and its margin over the runner-up, and for the ResNet20
3x3 convolutions at batch 64 the best CPU rate as a fraction of the oneDNN
SGEMM ceiling measured in the same run."""

from __future__ import annotations

import matplotlib.pyplot as plt

from dlbench.figures._common import GFLOP, ceiling, many_machines
from dlbench.results import Case, Results

FAMILY = "conv"
SHAPE_ARGS = ("n", "c", "h", "w", "k", "r", "s", "stride", "pad")
SGEMM_CEILING = "roofline/cpu_sgemm_onednn"
WINNER_COLOR, OTHER_COLOR = "tab:orange", "tab:blue"
BLOCKED = "_blocked"  # variants timed in the library's layout, no NCHW conversions


def shape_key(case: Case) -> tuple[int, ...]:
    return tuple(case.args.get(a, 0) for a in SHAPE_ARGS)


def origin(case: Case) -> str:
    """The shape's origin from the label ('resnet20 stage1 16->16 32x32; <implementation>')."""
    for run in case.runs:
        if run.get("label"):
            return run["label"].split(";")[0].strip()
    return ""


def describe(key: tuple[int, ...]) -> str:
    n, c, h, w, k, r, s, stride, pad = key
    return f"n{n} {c}->{k} {h}x{w} {r}x{s} s{stride} p{pad}"


def shapes(cases: list[Case]) -> dict[tuple[int, ...], list[Case]]:
    """Cases grouped by shape, in the order the benchmark ran them."""
    out: dict[tuple[int, ...], list[Case]] = {}
    for c in cases:
        out.setdefault(shape_key(c), []).append(c)
    return out


def rates(cases: list[Case], device: str) -> list[tuple[str, float]]:
    """(variant, median GFLOP/s) of the measured cases of one device, best first."""
    out = []
    for c in cases:
        if c.device == device and c.error is None and c.median("flops"):
            out.append((c.variant, c.median("flops") / GFLOP))
    return sorted(out, key=lambda vr: -vr[1])


def shape_title(key, cases: list[Case], short: bool = False) -> str:
    """'resnet20 stage1 16->16 32x32, n64' (short) or with the full descriptor after it."""
    name = next((origin(c) for c in cases if origin(c)), "")
    if not name or name == "command line":
        return describe(key)
    return f"{name}, n{key[0]}" if short else f"{name}: {describe(key)}"


def draw_panel(ax, cases: list[Case], device: str, title: str) -> None:
    measured = rates(cases, device)
    ax.set_title(title, fontsize=9)
    ax.grid(True, axis="x", alpha=0.3)
    skipped = [c for c in cases if c.device == device and c.error is not None]
    if not measured:
        ax.text(0.5, 0.5, "no measured case", ha="center", va="center", transform=ax.transAxes, fontsize=8)
    names = [v for v, _ in measured][::-1]
    values = [g for _, g in measured][::-1]
    colors = [OTHER_COLOR] * len(values)
    if colors:
        colors[-1] = WINNER_COLOR  # best first in `measured`, drawn at the top
    ax.barh(names, values, color=colors)
    for i, value in enumerate(values):
        mark = "  winner" if i == len(values) - 1 else ""
        ax.text(value, i, f" {value:.1f}{mark}", va="center", fontsize=7)
    ax.tick_params(axis="y", labelsize=7)
    ax.tick_params(axis="x", labelsize=7)
    if values:
        ax.set_xlim(0, max(values) * 1.35)
    if skipped:
        lines = [f"{c.variant}: {c.error}"[:110] for c in skipped[:4]]
        if len(skipped) > 4:
            lines.append(f"... and {len(skipped) - 4} more")
        ax.text(0.99, 0.02, "not measured:\n" + "\n".join(lines), transform=ax.transAxes, fontsize=5.5,
                color="firebrick", ha="right", va="bottom")


def figures(results_list: list[Results]):
    out = {}
    many = many_machines(results_list)
    for r in results_list:
        cases = r.family(FAMILY)
        if not cases:
            continue
        grouped = shapes(cases)
        devices = [d for d in ("cpu", "gpu") if any(c.device == d for c in cases)]
        for batch in sorted({key[0] for key in grouped}):
            keys = [k for k in grouped if k[0] == batch]
            fig, axes = plt.subplots(len(keys), len(devices), figsize=(7.0 * len(devices), 2.6 * len(keys)),
                                     layout="constrained", squeeze=False)
            suffix = f" ({r.machine})" if many else ""
            fig.suptitle(f"conv at batch {batch}: GFLOP/s per algorithm (2*n*k*oh*ow*c*r*s per call), "
                         f"winner in orange{suffix}", fontsize=10)
            for row, key in enumerate(keys):
                for col, device in enumerate(devices):
                    draw_panel(axes[row][col], grouped[key], device,
                               f"{device.upper()}: {shape_title(key, grouped[key])}")
            for ax in axes[-1]:
                ax.set_xlabel("GFLOP/s (median of the repetitions)", fontsize=8)
            stem = f"conv_n{batch}" + (f"_{r.machine}" if many else "")
            out[stem] = fig
    return out


def winner_cells(measured: list[tuple[str, float]]) -> list[str]:
    if not measured:
        return ["n/a", "", ""]
    best, rate = measured[0]
    if len(measured) < 2:
        return [f"`{best}`", f"{rate:.1f}", "only one measured"]
    runner, second = measured[1]
    return [f"`{best}`", f"{rate:.1f}", f"+{(rate / second - 1) * 100:.0f}% over `{runner}`"]


def table(results: Results) -> str:
    """Markdown: per shape the winning algorithm on the CPU (and on the GPU
    where there are GPU results) and its margin over the runner-up; then the
    ResNet20 batch-64 ratios against the SGEMM ceiling, and own Winograd
    against own im2col on the 3x3 stride-1 shapes with c >= 32."""
    cases = results.family(FAMILY)
    if not cases:
        return ""
    grouped = shapes(cases)
    gpu = any(c.device == "gpu" for c in cases)
    header = ["shape", "CPU winner", "GFLOP/s", "margin"] + (["GPU winner", "GFLOP/s", "margin"] if gpu else [])
    lines = ["| " + " | ".join(header) + " |", "|---|---|---:|---|" + ("---|---:|---|" if gpu else "")]
    for key, group in grouped.items():
        cells = [shape_title(key, group, short=True)] + winner_cells(rates(group, "cpu"))
        if gpu:
            cells += winner_cells(rates(group, "gpu"))
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("GFLOP/s: median of the repetitions, direct count. Margin: winner's rate over the runner-up's.")

    sgemm = ceiling(results, SGEMM_CEILING, "flops")
    resnet = [(k, g) for k, g in grouped.items()
              if k[0] == 64 and k[5] == 3 and k[6] == 3 and any(origin(c).startswith("resnet20") for c in g)]
    if sgemm and resnet:
        parts = []
        for key, group in resnet:
            measured = rates(group, "cpu")
            if measured:
                best, rate = measured[0]
                part = f"{describe(key)}: {rate / (sgemm / GFLOP):.2f} (`{best}`)"
                nchw = [(v, r) for v, r in measured if not v.endswith(BLOCKED)]
                if best.endswith(BLOCKED) and nchw:
                    part += f", NCHW in and out {nchw[0][1] / (sgemm / GFLOP):.2f} (`{nchw[0][0]}`)"
                parts.append(part)
        lines.append("")
        lines.append(f"Best CPU rate on the ResNet20 3x3 convolutions at batch 64, as a fraction of "
                     f"`{SGEMM_CEILING}` ({sgemm / GFLOP:.0f} GFLOP/s, same run): " + "; ".join(parts) + ". "
                     f"`{BLOCKED}` variants keep oneDNN's layout (no reorders timed).")
    own = []
    for key, group in grouped.items():
        if key[5] == 3 and key[6] == 3 and key[7] == 1 and key[1] >= 32:
            by_variant = dict(rates(group, "cpu"))
            if "cpu_winograd" in by_variant and "cpu_im2col" in by_variant:
                own.append(f"{describe(key)}: {by_variant['cpu_winograd'] / by_variant['cpu_im2col']:.2f}x")
    if own:
        lines.append("")
        lines.append("Own `cpu_winograd` over own `cpu_im2col` on the 3x3 stride-1 shapes with c >= 32: "
                     + "; ".join(own) + ".")
    return "\n".join(lines)
