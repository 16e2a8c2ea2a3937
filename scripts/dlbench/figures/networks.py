"""The networks (resnet20, mnist_cnn, mnist_lenet): images/s against batch
size, one panel per network, one line per backend (peers included when the
results have them: variants named peer_*); and the README table of the batch
sweep with batch-1 latency, accuracy and the error against PyTorch."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt

from dlbench.figures._common import (label_for, many_machines, note_errors, plain_numbers, series,
                                      tables_with_note)
from dlbench.names import device_of, is_fp32
from dlbench.results import Case, Results

FAMILY = "networks"  # the README block; the cases are the three ops below
NETWORKS = ("resnet20", "mnist_cnn", "mnist_lenet")


def cases_of(results: Results, network: str) -> list[Case]:
    return [c for c in results.family(network) if "batch" in c.args]


def figures(results_list: list[Results]):
    present = [n for n in NETWORKS if any(cases_of(r, n) for r in results_list)]
    if not present:
        return {}
    fig, axes = plt.subplots(1, len(present), figsize=(5.2 * len(present), 4.8), layout="constrained", squeeze=False)
    many = many_machines(results_list)
    for ax, network in zip(axes[0], present):
        for r in results_list:
            for variant, (xs, ys) in series(cases_of(r, network), "batch", "items_per_second").items():
                style = "--" if device_of(variant) == "peer" else "-"
                ax.plot(xs, ys, style, marker="o", markersize=3, label=label_for(r, variant, many))
        ax.set_title(f"{network}: images/s against batch size")
        ax.set_xscale("log", base=2)
        batches = sorted({c.args["batch"] for r in results_list for c in cases_of(r, network)})
        ax.set_xticks(batches, [str(b) for b in batches])
        ax.set_yscale("log")
        plain_numbers(ax.yaxis)
        ax.grid(True, which="both", alpha=0.3)
        ax.set_xlabel("batch (images per call)")
        ax.set_ylabel("images/s (fp32, all cores)")
        ax.legend(fontsize=8)
        note_errors(ax, [c for r in results_list for c in cases_of(r, network)])
    return {"networks": fig}


def _fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def _best(cases: list[Case], peers: bool, device: str, batch: int, metric: str, lowest: bool):
    """(value, variant) of the best fp32 dlbench backend (peers=False) or fp32
    peer running on `device` at this batch."""
    found = [(c.median(metric), c.variant) for c in cases
             if c.args["batch"] == batch and c.error is None and c.is_peer == peers and c.runs_on == device
             and is_fp32(c.variant) and c.median(metric) is not None]
    return (min if lowest else max)(found) if found else None


def peer_ratios(cases: list[Case]) -> str:
    """The sentences comparing the best fp32 dlbench backend with the best
    fp32 peer on the same device: images/s at batch 64 and batch-1 median
    latency; "" without peers."""
    sentences = []
    for device in ("cpu", "gpu"):
        parts = []
        ours = _best(cases, False, device, 64, "items_per_second", False)
        theirs = _best(cases, True, device, 64, "items_per_second", False)
        if ours and theirs:
            parts.append(f"batch 64 images/s {ours[0] / theirs[0]:.2f}x (`{ours[1]}` {ours[0]:,.0f}, "
                         f"`{theirs[1]}` {theirs[0]:,.0f})")
        ours = _best(cases, False, device, 1, "latency_p50_us", True)
        theirs = _best(cases, True, device, 1, "latency_p50_us", True)
        if ours and theirs:
            parts.append(f"batch-1 latency {ours[0] / theirs[0]:.2f} of the peer's (`{ours[1]}` {ours[0]:.0f} us, "
                         f"`{theirs[1]}` {theirs[0]:.0f} us)")
        if parts:
            sentences.append(f"Best fp32 dlbench / best fp32 peer on the {device.upper()}, same run: "
                             + "; ".join(parts) + ".")
    return " ".join(sentences)


def table(results: Results) -> str:
    """Markdown, per network: images/s of every backend at each batch size,
    batch-1 median latency, accuracy on the test set, max_rel_err against
    PyTorch's logits; then the best backend at batch 64 and at batch 1."""
    blocks = []
    for network in NETWORKS:
        cases = cases_of(results, network)
        if not cases:
            continue
        batches = sorted({c.args["batch"] for c in cases})
        variants = sorted({c.variant for c in cases}, key=lambda v: (device_of(v) == "peer", v))
        by = {(c.variant, c.args["batch"]): c for c in cases}
        lines = [f"**{network}**", "",
                 "| backend | " + " | ".join(f"batch {b}" for b in batches) +
                 " | batch-1 p50 latency | accuracy | max_rel_err |",
                 "|---|" + "---:|" * len(batches) + "---:|---:|---:|"]
        best: dict[int, tuple[float, str]] = {}
        for v in variants:
            cells = []
            for b in batches:
                c = by.get((v, b))
                rate = c.median("items_per_second") if c is not None and c.error is None else None
                cells.append(_fmt(rate, ",.0f"))
                if rate and device_of(v) != "peer" and rate > best.get(b, (0, ""))[0]:
                    best[b] = (rate, v)
            one = by.get((v, 1))
            latency = one.median("latency_p50_us") if one is not None and one.error is None else None
            ok = [c for c in cases if c.variant == v and c.error is None]
            accuracy = ok[0].median("accuracy") if ok else None
            err = max((c.median("max_rel_err") or 0.0) for c in ok) if ok else None
            latency_cell = "n/a" if latency is None else f"{latency:.0f} us"
            lines.append(f"| {v} | " + " | ".join(cells) + f" | {latency_cell} | "
                         f"{_fmt(accuracy, '.4f')} | {_fmt(err, '.1e')} |")
        errored = [c for c in cases if c.error is not None]
        if errored:
            lines.append("")
            lines.append("Not measured: " + "; ".join(f"`{c.name}`: {c.error}" for c in errored[:3]) +
                         (f" and {len(errored) - 3} more" if len(errored) > 3 else ""))
        summary = [f"batch {b}: `{best[b][1]}`" for b in (1, 64) if b in best]
        if summary:
            lines.append("")
            lines.append("Fastest backend, " + ", ".join(summary) + ".")
        ratios = peer_ratios(cases)
        if ratios:
            lines.append(ratios)
        blocks.append("\n".join(lines))
    return tables_with_note(
        blocks, "Images/s: median of the repetitions. Latency: median of single batch-1 calls. "
        "Accuracy: top-1 on the 10,000 Fashion-MNIST test images. max_rel_err: largest over the batch sizes, "
        "outputs of PyTorch's 256 reference images against PyTorch's own.")
