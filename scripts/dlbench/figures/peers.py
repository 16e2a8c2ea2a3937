"""dlbench against what users would run instead (scripts/peers): for every
shape of the operator families and every network batch size that has both,
the fastest dlbench variant and the fastest peer on the same device, and
dlbench over peer (higher is better for dlbench). The README table lists
them per family (from one file: scripts/bench --peers, or scripts/peers
--append-to); the figure draws the ratios, one bar per shape, and pairs
the files given to plot.py that come from the same machine.

What meets what: the same op and shape (softmax and log_softmax apart), the
same precision (dlbench.names.precision_of: a gemm variant's last word,
cpu_onednn_f32 fp32 with peer_torch_f32, bf16 with bf16; a network row's
the same way, fp32 where its name has no precision word: gpu_cudnn_f16
(fp16) meets peer_torch_cuda_graph_f16, not an fp32 peer; the 16-bit
and int8 rows are also set against fp32 in the precision table), the same
device (a peer's device from its name, Case.runs_on). The rates are the families' own: GB/s (daxpy, softmax),
GFLOP/s by the direct count (conv, gemm), images/s (networks)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt

from dlbench.figures import conv, daxpy, gemm, networks, softmax
from dlbench.figures._common import GB, GFLOP, plain_numbers, tables_with_note
from dlbench.names import precision_of
from dlbench.results import Case, Results

FAMILY = "peers"  # the README block; the cases are the families'
NETWORK_BATCHES = (1, 16, 64, 256, 1024)  # 1024: the GPU's


def _daxpy(c: Case):
    n = c.args.get("n")
    return ((n,), f"n = 2^{n.bit_length() - 1}") if n in daxpy.TABLE_SIZES else None


def _softmax(c: Case):
    rows, cols, where = c.args["rows"], c.args["cols"], softmax.regime(c)
    label = {"dram": "DRAM", "cache": "cache"}.get(where, f"rows {rows}")
    return (c.op, where != "dram", cols, rows), f"{c.op}, {label}, cols {cols}"


def _conv(c: Case):
    return conv.shape_key(c), f"{conv.origin(c) or 'conv'}, n{c.args['n']}"


def _gemm(c: Case):
    precision = precision_of(c.variant)
    return (precision != "fp32", precision, c.args["m"], c.args["n"], c.args["k"]), f"{gemm.shape_label(c)} {precision}"


def _network(c: Case):
    b = c.args.get("batch")
    if b not in NETWORK_BATCHES or "fakequant" in c.variant:  # fp32 arithmetic simulating int8: no peer's kind
        return None
    precision = precision_of(c.variant)
    label = f"{c.op}, batch {b}" + ("" if precision == "fp32" else f" {precision}")
    return (precision != "fp32", precision, networks.NETWORKS.index(c.op), b), label


# family -> (ops, metric, scale, unit, shape_of)
FAMILIES = {
    "daxpy": (("daxpy",), "bytes_per_second", GB, "GB/s", _daxpy),
    "softmax": (("softmax", "log_softmax"), "bytes_per_second", GB, "GB/s", _softmax),
    "conv": (("conv",), "flops", GFLOP, "GFLOP/s", _conv),
    "gemm": (("gemm",), "flops", GFLOP, "GFLOP/s", _gemm),
    "networks": (networks.NETWORKS, "items_per_second", 1.0, "images/s", _network),
}


def _what(c: Case) -> str:
    """What the case ran, from its label (a conv label's origin dropped)."""
    label = str(c.runs[0].get("label", "")) if c.runs else ""
    return label.split("; ", 1)[1] if c.op == "conv" and "; " in label else label


def pairs(results: Results, family: str, device: str) -> list[tuple[str, tuple[float, str, str], tuple[float, str, str]]]:
    """(shape label, (best dlbench rate, variant, what it ran), (the same for
    the best peer)) per shape that has both on `device`, in the family's order."""
    ops, metric, _, _, shape_of = FAMILIES[family]
    best: dict[tuple, dict[bool, tuple[float, str, str]]] = {}
    for c in (c for op in ops for c in results.family(op)):
        value = c.median(metric) if c.error is None and c.runs_on == device else None
        key = shape_of(c) if value else None
        if key is None:
            continue
        sides = best.setdefault(key, {})
        if value > sides.get(c.is_peer, (0.0, "", ""))[0]:
            sides[c.is_peer] = (value, c.variant, _what(c))
    return [(label, sides[False], sides[True]) for (_, label), sides in sorted(best.items()) if len(sides) == 2]


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def table(results: Results) -> str:
    blocks = []
    for device in ("cpu", "gpu"):
        for family, (_, _, scale, unit, _) in FAMILIES.items():
            found_all = pairs(results, family, device)
            # the networks one block per precision (fp32, then the others): a geometric mean of one kind
            groups = ([[f for f in found_all if precision_of(f[1][1]) == p]
                       for p in dict.fromkeys(precision_of(f[1][1]) for f in found_all)]
                      if family == "networks" else [found_all])
            for found in groups:
                if found:
                    blocks.append(_block(family, device, scale, unit, found))
    return tables_with_note(
        blocks, "Medians of the repetitions, dlbench and peers from the same file. "
        "Each peer's output was checked against the same reference with the family's tolerance before it "
        "was timed.")


def _block(family: str, device: str, scale: float, unit: str, found: list) -> str:
    """One family's table on one device (for the networks, in one precision)."""
    precision = precision_of(found[0][1][1]) if family == "networks" else "fp32"
    kind = "" if precision == "fp32" else f", {precision}"
    ratios = [ours[0] / theirs[0] for _, ours, theirs in found]
    lines = [f"**{family}** ({device.upper()}{kind}, {unit}; dlbench / peer: geometric mean "
             f"{_geomean(ratios):.2f}, {sum(r >= 1 for r in ratios)} of {len(ratios)} shapes >= 1)", "",
             f"| shape | best dlbench | {unit} | best peer | {unit} | dlbench / peer |",
             "|---|---|---:|---|---:|---:|"]
    for (label, ours, theirs), ratio in zip(found, ratios):
        lines.append(f"| {label} | `{ours[1]}` | {ours[0] / scale:,.1f} | `{theirs[1]}` | "
                     f"{theirs[0] / scale:,.1f} | {ratio:.2f} |")
    ran = {}
    for _, _, (_, peer, what) in found:
        ran.setdefault(peer, set()).add(what)
    lines += ["", "Peers above: " + "; ".join(f"`{p}` {' / '.join(sorted(w))}" for p, w in sorted(ran.items()))
              + "."]
    return "\n".join(lines)


def combined(results_list: list[Results]) -> Results:
    """The cases of every file from the first file's machine as one run:
    `scripts/plot.py RUN.json RUN-peers.json` pairs a bench run with a
    separate scripts/peers file of the same machine."""
    first = results_list[0]
    cases = {}
    for r in results_list:
        if r.machine == first.machine:
            cases.update(r.cases)
    return Results(first.path, first.context, cases)


def figures(results_list: list[Results]):
    r = combined(results_list)
    rows = [(f"{family}: {label}", ours[0] / theirs[0], device)
            for device in ("cpu", "gpu") for family in FAMILIES for label, ours, theirs in pairs(r, family, device)]
    if not rows:
        return {}
    fig, ax = plt.subplots(figsize=(8.0, 0.18 * len(rows) + 1.6), layout="constrained")
    y = list(range(len(rows)))[::-1]
    colors = ["tab:green" if ratio >= 1 else "tab:red" for _, ratio, _ in rows]
    ax.barh(y, [ratio - 1.0 for _, ratio, _ in rows], color=colors, left=1.0)  # from 1 to the ratio
    ax.set_yticks(y, [f"{label} ({device})" for label, _, device in rows], fontsize=6)
    ax.set_xscale("log")
    plain_numbers(ax.xaxis)
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xlabel("best dlbench / best peer (same device and precision; > 1: dlbench faster)")
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ax.set_title(f"dlbench against the peers ({r.machine}, {r.context.get('cpu_extensions', '')})", fontsize=10)
    return {"peers": fig}
