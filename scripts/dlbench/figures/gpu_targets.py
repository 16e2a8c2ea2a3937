"""The GPU networks' targets, read from one run (ours and PyTorch's side by
side, as scripts/gpu-kit run writes them): for resnet20, mnist_cnn and
mnist_lenet,

  batch 1     our best GPU row's median batch-1 latency against an absolute
              bound (resnet20 60 us, the MNIST networks 15 us) and against
              the best PyTorch mode's
  fp32        at batch 64 and 1024, our best fp32 GPU row's images/s over the
              best fp32 PyTorch mode's on the GPU: at least 1.5x
  tf32        at batch 64 and 1024, our best tf32 row over PyTorch's tf32
              mode (a CUDA graph with PyTorch's defaults): at least 1.5x
  fp16/bf16   our best 16-bit GPU row over the best fp16 PyTorch mode's
              (channels_last included): at least 1.5x at batch 1 (latency),
              64 and 1024
  int8        at batch 1024, our best int8 GPU row over our best 16-bit GPU
              row: at least 1.3x, with an accuracy drop of at most 0.005

A PyTorch mode is a GPU peer of scripts/peers (peer_torch_*, on CUDA); the
precision is dlbench.names.precision_of's (fp32, tf32, fp16, bf16, int8).
A target whose sides are not both in the run says so instead of a verdict."""

from __future__ import annotations

from dlbench.figures._common import tables_with_note
from dlbench.names import NETWORKS, precision_of
from dlbench.results import Case, Results

FAMILY = "gpu_targets"
LATENCY_US = {"resnet20": 60.0, "mnist_cnn": 15.0, "mnist_lenet": 15.0}
FP32_RATIO = 1.5
TF32_RATIO = 1.5
HALF_RATIO = 1.5
INT8_RATIO = 1.3
INT8_MAX_DROP = 0.005


def figures(results_list: list[Results]):
    return {}


def _gpu(results: Results, network: str) -> list[Case]:
    return [c for c in results.family(network)
            if "batch" in c.args and c.error is None and c.runs and c.runs_on == "gpu"]


def best(cases: list[Case], batch: int, peer: bool, precisions: tuple[str, ...], metric: str = "items_per_second",
         lowest: bool = False, torch_only: bool = True) -> tuple[float, Case] | None:
    """(value, case) of the best row at `batch`: ours (peer=False) or a PyTorch mode (peer=True)."""
    found = []
    for c in cases:
        if c.args["batch"] != batch or c.is_peer != peer or precision_of(c.variant) not in precisions:
            continue
        if peer and torch_only and not c.variant.startswith("peer_torch"):
            continue
        if (v := c.median(metric)) is not None:
            found.append((v, c))
    if not found:
        return None
    return (min if lowest else max)(found, key=lambda vc: vc[0])


def _side(found, unit: str) -> str:
    if found is None:
        return "not in this run"
    value, case = found
    return f"`{case.variant}` {value:,.1f} {unit}" if unit == "us" else f"`{case.variant}` {value:,.0f} {unit}"


def _row(target: str, ours, theirs, ratio_text: str, met: bool | None) -> str:
    verdict = "n/a" if met is None else ("met" if met else "**not met**")
    return f"| {target} | {ours} | {theirs} | {ratio_text} | {verdict} |"


def rows(results: Results, network: str) -> list[str]:
    cases = _gpu(results, network)
    if not cases:
        return []
    out = []
    # Batch 1: latency, absolute bound and against PyTorch's best.
    ours = best(cases, 1, False, ("fp32",), "latency_p50_us", lowest=True)
    theirs = best(cases, 1, True, ("fp32",), "latency_p50_us", lowest=True)
    bound = LATENCY_US[network]
    met = None if ours is None else ours[0] <= bound
    ratio = f"{theirs[0] / ours[0]:.2f}x faster" if ours and theirs else "-"
    out.append(_row(f"batch 1 p50 <= {bound:.0f} us", _side(ours, "us"), _side(theirs, "us"), ratio, met))
    ours = best(cases, 1, False, ("fp16", "bf16"), "latency_p50_us", lowest=True)
    theirs = best(cases, 1, True, ("fp16",), "latency_p50_us", lowest=True)
    ratio = theirs[0] / ours[0] if ours and theirs else None
    out.append(_row(f"fp16/bf16 batch 1 >= {HALF_RATIO}x PyTorch", _side(ours, "us"), _side(theirs, "us"),
                    "-" if ratio is None else f"{ratio:.2f}x faster", None if ratio is None else ratio >= HALF_RATIO))
    for batch in (64, 1024):
        for label, mine, peers, need in (("fp32", ("fp32",), ("fp32",), FP32_RATIO),
                                         ("tf32", ("tf32",), ("tf32",), TF32_RATIO),
                                         ("fp16/bf16", ("fp16", "bf16"), ("fp16",), HALF_RATIO)):
            ours = best(cases, batch, False, mine)
            theirs = best(cases, batch, True, peers)
            ratio = ours[0] / theirs[0] if ours and theirs else None
            out.append(_row(f"{label} batch {batch} >= {need}x PyTorch", _side(ours, "img/s"),
                            _side(theirs, "img/s"), "-" if ratio is None else f"{ratio:.2f}x",
                            None if ratio is None else ratio >= need))
    ours = best(cases, 1024, False, ("int8",))
    half = best(cases, 1024, False, ("fp16", "bf16"))
    ratio = ours[0] / half[0] if ours and half else None
    drop = ours[1].median("accuracy_drop") if ours else None
    met = None if ratio is None else (ratio >= INT8_RATIO and drop is not None and drop <= INT8_MAX_DROP)
    drop_text = "" if drop is None else f", accuracy drop {drop:.4f}"
    out.append(_row(f"int8 batch 1024 >= {INT8_RATIO}x our 16-bit, drop <= {INT8_MAX_DROP}",
                    _side(ours, "img/s") + drop_text, _side(half, "img/s") + " (ours)",
                    "-" if ratio is None else f"{ratio:.2f}x", met))
    return out


def table(results: Results) -> str:
    blocks = []
    for network in NETWORKS:
        body = rows(results, network)
        if body:
            blocks.append("\n".join([f"**{network}** on {results.context.get('gpu_name', 'the GPU')}", "",
                                     "| target | ours | PyTorch (best mode) | ratio | verdict |",
                                     "|---|---|---|---:|---|", *body]))
    return tables_with_note(
        blocks, "One run: our rows and scripts/peers' PyTorch modes measured by the same `scripts/gpu-kit run`. "
        "Images/s and latency: medians of the repetitions. n/a: a side is not in this run (before GPU peers "
        "ran in the kit, no run had them).")
