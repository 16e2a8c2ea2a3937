"""What reduced precision buys and costs on the networks: for every int8 and
bf16 row of the network table (variants named *_s8, *_bf16, *_f16; their
precision, int8, bf16, fp16, is dlbench.names.precision_of's), its
images/s at batch 64 over the best fp32 backend of the same device in the
same run (a peer's, such as peer_openvino_bf16, over the best fp32 peer),
against its accuracy drop on the 10,000 test images (PyTorch's fp32
accuracy minus the row's, in points); one figure panel and one README table
per network.

Every ratio is shown next to the instruction set the row's kernels ran on
and the peak multiply-accumulate rate that instruction set has over fp32
FMA (dlbench.isa), so that "3.9x" reads as "3.9x of a possible 4x"."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt

from dlbench.figures._common import tables_with_note
from dlbench.isa import isa_of
from dlbench.names import is_fp32, precision_of
from dlbench.results import Case, Results

FAMILY = "precision"  # the README block; the cases are the networks'
NETWORKS = ("resnet20", "mnist_cnn", "mnist_lenet")
BATCH = 64


def _ok(c: Case | None) -> bool:
    return c is not None and c.error is None and c.median("items_per_second") is not None


def rows(results: Results, network: str) -> list[dict]:
    """One dict per reduced-precision row of the network at batch 64 (with its fp32 baseline), in name order."""
    at = {c.variant: c for c in results.family(network) if c.args.get("batch") == BATCH}
    out = []
    for variant, c in sorted(at.items()):
        if precision_of(variant) == "fp32":
            continue
        # dlbench rows against dlbench's fp32 backends of the device, a peer
        # (peer_openvino_bf16) against the fp32 peers of the device it runs on
        fp32 = [(o.median("items_per_second"), v) for v, o in at.items()
                if o.device == c.device and o.runs_on == c.runs_on
                and is_fp32(v) and _ok(o)]
        best = max(fp32) if fp32 else None
        isa, peak = isa_of(c, results.context)
        rate = c.median("items_per_second") if _ok(c) else None
        drop = c.median("accuracy_drop")
        out.append({
            "variant": variant, "precision": precision_of(variant), "isa": isa, "peak": peak,
            "rate": rate, "baseline": best,
            "speedup": rate / best[0] if rate is not None and best is not None else None,
            "accuracy": c.median("accuracy"), "drop_points": None if drop is None else 100.0 * drop,
            "max_rel_err": c.median("max_rel_err"), "error": c.error,
        })
    return out


def figures(results_list: list[Results]):
    present = [(r, n) for r in results_list[:1] for n in NETWORKS if rows(r, n)]
    if not present:
        return {}
    fig, axes = plt.subplots(1, len(present), figsize=(5.2 * len(present), 4.8), layout="constrained", squeeze=False)
    for ax, (r, network) in zip(axes[0], present):
        for row in rows(r, network):
            if row["speedup"] is None or row["drop_points"] is None:
                continue
            marker = {"int8": "o", "bf16": "s", "fp16": "^", "tf32": "D"}[row["precision"]]
            ax.plot(row["drop_points"], row["speedup"], marker, markersize=7, label=row["variant"])
            ax.annotate(row["variant"], (row["drop_points"], row["speedup"]), fontsize=7,
                        xytext=(4, 4), textcoords="offset points")
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.axvline(0.0, color="gray", lw=0.8)
        # The accuracy budgets the targets allow: 0.3 point for bf16, 1 point for int8.
        for budget, name in ((0.3, "bf16 budget"), (1.0, "int8 budget")):
            ax.axvline(budget, color="firebrick", lw=0.8, ls=":")
            ax.text(budget, 1.0, f" {name}", rotation=90, fontsize=7, color="firebrick", va="bottom")
        drops = [x["drop_points"] for x in rows(r, network) if x["drop_points"] is not None]
        ax.set_xlim(min([-0.5] + [d - 0.1 for d in drops]), max([1.2] + [d + 0.1 for d in drops]))
        base = next((x["baseline"] for x in rows(r, network) if x["baseline"]), None)
        ax.set_title(f"{network}, batch {BATCH}")
        ax.set_xlabel("accuracy drop vs PyTorch fp32 (points; < 0: better)")
        ax.set_ylabel(f"images/s over best fp32 ({base[1] if base else 'n/a'})")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"Reduced precision: speed against accuracy ({results_list[0].machine}, "
                 f"{results_list[0].context.get('cpu_extensions', '')})", fontsize=10)
    return {"precision": fig}


def _fmt(value, spec: str) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def table(results: Results) -> str:
    blocks = []
    for network in NETWORKS:
        found = rows(results, network)
        if not found:
            continue
        base = next((x["baseline"] for x in found if x["baseline"]), None)
        lines = [f"**{network}** (batch {BATCH}; fp32 baseline `{base[1]}` {base[0]:,.0f} images/s)" if base
                 else f"**{network}** (batch {BATCH}; no fp32 baseline in this run)", "",
                 "| row | precision | arithmetic on | images/s | over best fp32 | ISA peak over fp32 | accuracy | "
                 "drop (points) | max_rel_err |",
                 "|---|---|---|---:|---:|---:|---:|---:|---:|"]
        for x in found:
            peak = f"{x['peak']:g}x" if x["peak"] else "n/a"
            speedup = "not measured" if x["error"] else _fmt(x["speedup"], ".2f") + ("x" if x["speedup"] else "")
            lines.append(f"| {x['variant']} | {x['precision']} | {x['isa']} | {_fmt(x['rate'], ',.0f')} | {speedup} | "
                         f"{peak} | {_fmt(x['accuracy'], '.4f')} | {_fmt(x['drop_points'], '+.2f')} | "
                         f"{_fmt(x['max_rel_err'], '.1e')} |")
        blocks.append("\n".join(lines))
    ctx = results.context
    return tables_with_note(
        blocks, f"CPU: {ctx.get('cpu_model', '?')}, {ctx.get('cpu_vector_isa', '?')} with "
        f"{ctx.get('cpu_extensions', 'no extensions')}; oneDNN {ctx.get('onednn_version', '?')} dispatching "
        f"{ctx.get('onednn_isa', '?')}. "
        "Over best fp32: this row's images/s over the fastest fp32 backend of the same device in the same run "
        "(a peer row: over the fastest fp32 peer). "
        "ISA peak: the instruction set's peak multiply-accumulate rate over fp32 FMA. Drop: PyTorch's fp32 "
        "top-1 accuracy minus this row's, on the 10,000 test images (negative: this row classifies more "
        "correctly). max_rel_err: logits of PyTorch's 256 reference images against its fp32 logits.")
