"""training: the training steps (``<net>_train``) and the data loader
(``<net>_load``).

Table, per network: every row of a run at each batch size, with images/s,
where a step's time goes (the phase counters the cases report: load_us,
h2d_us, forward_us, backward_us, optimizer_us; in ms per step), the step's
peak bytes by its own accounting (peak_bytes, MB), and the ratio of its
images/s to PyTorch's on the same device at the same batch (the CPU: the
fastest of PyTorch's CPU modes, ``peer_torch`` eager, ``peer_torch_cl``
channels_last and ``peer_torch_compile``, where the run has them; a row
fed by the loader against the eager peer on the same loader; the GPU: the
best ``peer_torch_cuda*`` mode), naming that row.
Rows are named by the case name less the network and the batch
(``cpu_onednn``, ``cpu_onednn/workers:1``). Then issue 35's targets, each
a ratio of two rows of the same run:

  CPU   at batch 64, our fastest CPU step over PyTorch's best CPU mode
        (the fastest of eager, channels_last and torch.compile in the run,
        named), both on the same batch every step (rows fed by the loader
        aside): at least 2x (issue 47's, which replaced issue 35's 1.3x
        over the eager step)
  GPU   at batch 64 and 256, our fastest GPU step over PyTorch's best GPU
        mode: at least 1.0x

A target whose two sides are not both in the run says so instead of a
verdict. Then the step's memory per network: every row of the run that
reports the split (ours and PyTorch's eager peers), at each batch, with its
five parts in MB (weights_bytes, activations_bytes: what forward keeps for
backward, gradients_bytes, optimizer_bytes: momentum, workspace_bytes:
everything else the step holds), the accounted peak (peak_bytes, the sum
of the five) and the measured peak (peak_measured_bytes: on the CPU the
host heap's rise over a fresh step, bench/nn/train/train_memory.h; PyTorch on the
GPU the caching allocator's; our GPU rows measured_device_bytes, the
peak of the process's own device allocations over the step's
construction and first step). A part a row
does not report (PyTorch's workspace, a CPU peer's measured peak) is
blank. Then, per network, where the profiled step's time goes by kind of
work, for the rows whose profile splits it (oneDNN's steps: op_us.<kind>,
each primitive timed alone, the mean per step, in ms: the own Winograd
kernels, oneDNN's convolutions, batch-norm, the binary adds of joins and
gradients, eltwise (ReLU's backward), pooling, inner product, reorders),
beside the profiled total (profiled_us). The loader's table: images/s of
``<net>_load`` against its thread count. The figure: per network, each
row's milliseconds per step split by phase at every batch (a peer, which
reports no phases, as one bar).
"""

from __future__ import annotations

from dlbench.figures._common import tables_with_note
from dlbench.names import split_name
from dlbench.results import Case, Results

import matplotlib.pyplot as plt  # noqa: E402  (after _common has chosen the backend)

FAMILY = "training"
NETWORKS = ("resnet20", "mnist_cnn", "mnist_lenet")
PHASES = ("load_us", "h2d_us", "forward_us", "backward_us", "optimizer_us")
CPU_RATIO = 2.0  # issue 47: >= 2x PyTorch's best CPU mode
CPU_MODES = ("peer_torch", "peer_torch_cl", "peer_torch_compile")  # eager, channels_last, torch.compile
CPU_BATCH = 64
GPU_RATIO = 1.3  # issue 46: >= 1.3x PyTorch's best GPU mode (eager, CUDA graph, torch.compile)
GPU_BATCHES = (64, 256)
MEMORY_PARTS = ("weights_bytes", "activations_bytes", "gradients_bytes", "optimizer_bytes", "workspace_bytes")
# The profile's split by kind (oneDNN's steps), in this order; a kind no row has is left out.
KINDS = ("own_winograd", "convolution", "batch_normalization", "binary", "eltwise", "pooling", "inner_product",
         "reorder")


def row_name(case: Case) -> str:
    """'mnist_cnn_train/cpu_onednn/batch:64/workers:1' -> 'cpu_onednn/workers:1'."""
    n = split_name(case.name)
    return "/".join(p for p in (n.variant, *n.parts) if not p.startswith("batch:"))


def axes_of(case: Case) -> tuple[str, ...]:
    """The name's parts after the variant other than the batch: ('workers:1',)."""
    return tuple(p for p in split_name(case.name).parts if not p.startswith("batch:"))


def train_cases(results: Results, network: str) -> list[Case]:
    return [c for c in results.family(f"{network}_train") if "batch" in c.args]


def _rate(case: Case | None) -> float | None:
    if case is None or case.error is not None:
        return None
    return case.median("items_per_second")


def is_gpu_peer(case: Case) -> bool:
    return case.is_peer and case.runs_on == "gpu" and case.variant.startswith("peer_torch")


def best_cpu_peer(cases: list[Case], batch: int) -> Case | None:
    """PyTorch's fastest CPU mode (CPU_MODES) at `batch`, on the same batch
    every step (not a loaded case); None where none of them ran."""
    rated = [(r, c) for c in cases if c.is_peer and c.runs_on == "cpu" and c.variant in CPU_MODES
             and c.args["batch"] == batch and not axes_of(c) and (r := _rate(c))]
    return max(rated, key=lambda rc: rc[0])[1] if rated else None


def peer_for(cases: list[Case], case: Case) -> Case | None:
    """PyTorch's row that `case` is set against: on the CPU, for a row fed
    by the loader the eager peer on the same loader (the same extra axes)
    where the run has it, else PyTorch's best CPU mode; on the GPU the
    fastest peer_torch_cuda* mode; at the same batch."""
    batch = case.args["batch"]
    if case.runs_on == "cpu":
        if axes_of(case):
            for c in cases:
                if c.variant == "peer_torch" and c.args["batch"] == batch and axes_of(c) == axes_of(case):
                    return c
        return best_cpu_peer(cases, batch)
    rated = [(r, c) for c in cases if is_gpu_peer(c) and c.args["batch"] == batch and (r := _rate(c))]
    return max(rated, key=lambda rc: rc[0])[1] if rated else None


def _fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def _ms(case: Case, counter: str) -> str:
    v = case.median(counter) if case.error is None else None
    return "" if v is None else f"{v / 1000:.2f}"


def fed_by_loader(case: Case) -> bool:
    """A row whose step takes each batch from the loader (a workers axis)."""
    return any(a.startswith("workers:") for a in axes_of(case))


def _best_ours(cases: list[Case], device: str, batch: int) -> tuple[float, Case] | None:
    """Our fastest step on `device` at `batch`, on the same batch each step
    as the PyTorch mode it is set against (not a row fed by the loader)."""
    rated = [(r, c) for c in cases if not c.is_peer and c.runs_on == device and c.args["batch"] == batch
             and not fed_by_loader(c) and (r := _rate(c))]
    return max(rated, key=lambda rc: rc[0]) if rated else None


def _target(label: str, ours: tuple[float, Case] | None, theirs: Case | None, need: float) -> str:
    theirs_rate = _rate(theirs)
    ours_cell = "not in this run" if ours is None else f"`{row_name(ours[1])}` {ours[0]:,.0f} img/s"
    theirs_cell = ("not in this run" if theirs_rate is None
                   else f"`{row_name(theirs)}` {theirs_rate:,.0f} img/s")
    if ours is None or theirs_rate is None:
        return f"| {label} | {ours_cell} | {theirs_cell} | - | n/a |"
    ratio = ours[0] / theirs_rate
    return f"| {label} | {ours_cell} | {theirs_cell} | {ratio:.2f}x | {'met' if ratio >= need else '**not met**'} |"


def targets(cases: list[Case]) -> list[str]:
    """Issue 35's ratio targets for one network's cases of one run."""
    out = []
    cpu = _best_ours(cases, "cpu", CPU_BATCH)
    best = best_cpu_peer(cases, CPU_BATCH)
    if cpu is not None or best is not None:
        out.append(_target(f"CPU batch {CPU_BATCH} >= {CPU_RATIO:g}x PyTorch's best CPU mode (eager, channels_last, "
                           "torch.compile)", cpu, best, CPU_RATIO))
    for batch in GPU_BATCHES:
        gpu = _best_ours(cases, "gpu", batch)
        peers = [c for c in cases if is_gpu_peer(c) and c.args["batch"] == batch]
        if gpu is None and not peers:
            continue
        best_peer = max(peers, key=lambda c: _rate(c) or 0.0) if peers else None
        out.append(_target(f"GPU batch {batch} >= {GPU_RATIO}x PyTorch's best GPU mode", gpu, best_peer, GPU_RATIO))
    return out


def network_block(results: Results, network: str) -> str:
    cases = train_cases(results, network)
    if not cases:
        return ""
    phases = [p for p in PHASES if any(c.median(p) is not None for c in cases)]
    cases.sort(key=lambda c: (c.args["batch"], c.is_peer, c.runs_on, row_name(c)))
    lines = [f"**{network}** training step", "",
             "| batch | row | images/s | " + " | ".join(f"{p[:-3]} ms" for p in phases) +
             " | peak MB | vs PyTorch |",
             "|---:|---|---:|" + "---:|" * len(phases) + "---:|---|"]
    for c in cases:
        rate = _rate(c)
        peer = None if c.is_peer else peer_for(cases, c)
        peer_rate = _rate(peer)
        versus = (f"{rate / peer_rate:.2f}x `{row_name(peer)}`" if rate and peer_rate else "")
        peak = c.median("peak_bytes") if c.error is None else None
        cells = [str(c.args["batch"]), f"`{row_name(c)}`", _fmt(rate, ",.0f") if c.error is None else "error",
                 *(_ms(c, p) for p in phases), "" if peak is None else f"{peak / 1e6:.1f}", versus]
        lines.append("| " + " | ".join(cells) + " |")
    errored = [c for c in cases if c.error is not None]
    if errored:
        lines += ["", "Not measured: " + "; ".join(f"`{c.name}`: {c.error}" for c in errored[:3]) +
                  (f" and {len(errored) - 3} more" if len(errored) > 3 else "")]
    goals = targets(cases)
    if goals:
        lines += ["", "| target | ours | PyTorch | ratio | verdict |", "|---|---|---|---:|---|", *goals]
    return "\n".join(lines)


def measured_peak(case: Case) -> float | None:
    """The row's measured peak: peak_measured_bytes, or (our GPU rows)
    measured_device_bytes."""
    for counter in ("peak_measured_bytes", "measured_device_bytes"):
        if (v := case.median(counter)) is not None:
            return v
    return None


def memory_block(results: Results, network: str) -> str:
    """The step's memory split per row (see the module's docstring); empty
    where no row of the network reports it."""
    cases = [c for c in train_cases(results, network)
             if c.error is None and any(c.median(p) is not None for p in MEMORY_PARTS)]
    if not cases:
        return ""
    cases.sort(key=lambda c: (c.args["batch"], c.is_peer, c.runs_on, row_name(c)))

    def mb(value: float | None) -> str:
        return "" if value is None else f"{value / 1e6:.1f}"

    lines = [f"**{network}** memory of a training step, MB", "",
             "| batch | row | weights | activations | gradients | optimizer | workspace | peak (accounted) | "
             "peak (measured) |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for c in cases:
        cells = [str(c.args["batch"]), f"`{row_name(c)}`", *(mb(c.median(p)) for p in MEMORY_PARTS),
                 mb(c.median("peak_bytes")), mb(measured_peak(c))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def kinds_block(results: Results, network: str) -> str:
    """Where the profiled step's time goes by kind of work (see the
    module's docstring); empty where no row of the network splits it."""
    cases = [c for c in train_cases(results, network)
             if c.error is None and any(c.median(f"op_us.{k}") is not None for k in KINDS)]
    if not cases:
        return ""
    cases.sort(key=lambda c: (c.args["batch"], c.runs_on, row_name(c)))
    kinds = [k for k in KINDS if any(c.median(f"op_us.{k}") is not None for c in cases)]
    lines = [f"**{network}** where a profiled step goes, ms", "",
             "| batch | row | " + " | ".join(k.replace("_", " ") for k in kinds) + " | profiled |",
             "|---:|---|" + "---:|" * (len(kinds) + 1)]
    for c in cases:
        cells = [str(c.args["batch"]), f"`{row_name(c)}`", *(_ms(c, f"op_us.{k}") for k in kinds),
                 _ms(c, "profiled_us")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def loader_block(results: Results, network: str) -> str:
    cases = [c for c in results.family(f"{network}_load") if "batch" in c.args and "threads" in c.args]
    if not cases:
        return ""
    batches = sorted({c.args["batch"] for c in cases})
    threads = sorted({c.args["threads"] for c in cases})
    by = {(c.args["batch"], c.args["threads"]): c for c in cases}
    lines = [f"**{network}** loader (crop with padding 4 + flip), images/s", "",
             "| batch | " + " | ".join(f"{t} threads" for t in threads) + " |",
             "|---:|" + "---:|" * len(threads)]
    for b in batches:
        lines.append(f"| {b} | " + " | ".join(_fmt(_rate(by.get((b, t))), ",.0f") for t in threads) + " |")
    return "\n".join(lines)


def table(results: Results) -> str:
    blocks = [b for n in NETWORKS
              for b in (network_block(results, n), memory_block(results, n), kinds_block(results, n),
                        loader_block(results, n)) if b]
    split = any(kinds_block(results, n) for n in NETWORKS)
    return tables_with_note(
        blocks, "One run. Images/s and phase times: medians of the repetitions; a phase is the mean wall time "
        "per step the case measured for it (a peer reports none). Peak MB: what the step holds by its own "
        "accounting (weights, kept activations, gradients, optimizer state, workspace). vs PyTorch: this row's "
        "images/s over PyTorch's at the same batch on the same device (CPU: its fastest of eager, channels_last "
        "and torch.compile, a loaded row against the eager peer on the same loader; GPU: its fastest mode). "
        "Memory: the parts each row reports (PyTorch: from its tensors' sizes and autograd's saved tensors; "
        "no workspace); peak (measured): the host heap's rise over a step on the CPU, the device's on the GPU "
        "(ours: our own device allocations counted; PyTorch's: its caching allocator)." +
        (" Where a profiled step goes: the profile after the timed loop, each primitive timed alone (the "
         "stream waited for after each), summed by kind, the mean per step; profiled: the sum of the walk's "
         "calls' medians." if split else ""))


def figures(results_list: list[Results]):
    out = {}
    for r in results_list:
        for network in NETWORKS:
            cases = [c for c in train_cases(r, network) if c.error is None and _rate(c)]
            if not cases:
                continue
            key = f"{network}_train" + (f"_{r.machine}" if len(results_list) > 1 else "")
            out[key] = _phases_figure(cases, f"{network} training step, {r.machine}")
    return out


def _phases_figure(cases: list[Case], title: str):
    cases = sorted(cases, key=lambda c: (c.args["batch"], c.is_peer, c.runs_on, row_name(c)))
    labels = [f"b{c.args['batch']} {row_name(c)}" for c in cases]
    fig, ax = plt.subplots(figsize=(10.5, 0.35 * len(cases) + 1.6), layout="constrained")
    y = range(len(cases))
    left = [0.0] * len(cases)
    for i, phase in enumerate(PHASES):
        widths = [(c.median(phase) or 0.0) / 1000 for c in cases]
        if any(widths):
            ax.barh(y, widths, left=left, color=f"C{i}", label=phase[:-3])
            left = [a + b for a, b in zip(left, widths)]
    # What the phases do not account for (a peer's whole step, the loss
    # inside forward aside): the step's time from its images/s.
    rest = [max(c.args["batch"] / _rate(c) * 1000 - done, 0.0) for c, done in zip(cases, left)]
    ax.barh(y, rest, left=left, color="lightgray", label="unattributed (a peer: its whole step)")
    ax.set_yticks(list(y), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("ms per step")
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig
