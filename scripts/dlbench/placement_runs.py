"""The placement optimizer (dlbench.placement) on measured runs: a CPU run's
and a GPU run's per-layer cases of one network make the chain of layers,
the GPU run's copy cases the copy costs, and the whole-network cases of the
runs given the measured times the prediction is set against. Used by
scripts/placement.py; docs/placement.md explains the output.

Inputs, all read through dlbench.results:

- layer times: the median time of `<net>_layer/<backend>/batch:<b>/layer:<i>`
  (one layer's share of whole instrumented passes), the CPU backend's from
  the CPU run and the GPU backend's from the GPU run;
- activation sizes: not in the files as such. Each layer case's
  bytes_per_second times its time is the layer's minimum traffic,
  4 * (batch * (input + output * (2 if it adds a residual else 1)) +
  weights + bias) (bench/nn/infer/nn_layers.cpp); with the shape in the label
  ("16->32 3x3 s2", "64->10") that gives the input and output element
  counts: a convolution's input side is solved for (square, padded 'same'
  or unpadded), an fc's is its label, any other layer reads the previous
  layer's output;
- copy costs: the pinned (or --memory pageable) single-copy cases
  copy/gpu_h2d_<memory>_{async,sync}/bytes:<n> and gpu_d2h_... of the runs
  given: the rate of the largest size, the fixed cost per copy from the
  smallest size where the case was run at 64 KiB or less (else 0, said);
- measured passes: `<net>/<backend>/batch:<b>` for the GPU backend, every
  gpu_hybrid_* backend and the CPU backend.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from dlbench.names import device_of
from dlbench.placement import CPU, GPU, Copy, Layer, best_placement, placement_cost
from dlbench.results import Case, Results, ResultsError

FLOAT_BYTES = 4
SMALL_COPY = 64 * 1024  # a copy case at most this size measures the fixed cost per copy

# The hybrid backends whose placement is known (kernels/nn/infer/nn.h): which layers they put on the GPU.
HYBRID_PLACEMENTS = {
    "gpu_hybrid_first_conv": lambda name, op: op.startswith("conv") and name.startswith("stage")
    and name.endswith(".conv1"),
}


@dataclass
class ChainLayer:
    index: int
    name: str
    op: str
    shape: str
    cpu_s: float
    gpu_s: float
    in_elems: int  # per sample
    out_elems: int  # per sample


@dataclass
class CopyModel:
    copy: Copy
    notes: list[str]  # where each number came from, one line each


@dataclass
class Measured:
    backend: str
    seconds: float | None
    images_per_second: float | None
    source: Results
    error: str | None = None
    repetitions: int = 0


@dataclass
class BatchPlan:
    batch: int
    layers: list[ChainLayer]
    out_bytes: float
    best_s: float
    devices: list[int]
    all_cpu_s: float
    all_gpu_s: float
    copy: Copy
    hybrid_predicted: dict[str, tuple[float, list[int]]] = field(default_factory=dict)
    measured: list[Measured] = field(default_factory=list)
    passes: list[tuple[str, Case]] = field(default_factory=list)  # (device word, the <net>_layer pass case)

    def chain(self) -> list[Layer]:
        return chain_of(self.layers, self.batch)


def chain_of(layers: list[ChainLayer], batch: int) -> list[Layer]:
    """The placement optimizer's input: per layer its two times and the bytes of its input."""
    return [Layer(l.cpu_s, l.gpu_s, FLOAT_BYTES * batch * l.in_elems) for l in layers]


def split_label(label: str) -> tuple[str, str, str]:
    """'stage2.0.conv1 conv+bias+relu 16->32 3x3 s2' -> ('stage2.0.conv1', 'conv+bias+relu', '16->32 3x3 s2')."""
    name, _, rest = label.partition(" ")
    op, _, shape = rest.partition(" ")
    return name, op, shape


def _traffic_elems(case: Case) -> float | None:
    """The layer's minimum traffic in floats, from one repetition (its rate times its own time)."""
    for r in case.runs:
        if "bytes_per_second" in r:
            seconds = case.seconds()[case.runs.index(r)]
            return float(r["bytes_per_second"]) * seconds / FLOAT_BYTES
    return None


_CONV = re.compile(r"^(\d+)->(\d+) (\d+)x(\d+)(?: s(\d+))?$")
_FC = re.compile(r"^(\d+)->(\d+)$")


def _sizes(op: str, shape: str, per_sample: float, prev_out: int | None) -> tuple[int, int] | None:
    """(input, output) elements per sample of one layer, or None where they cannot be told."""
    parts = op.split("+")
    residual = 2 if "add" in parts else 1
    m = _CONV.match(shape)
    if parts[0] == "conv" and m:
        cin, cout, kh, _kw, s = int(m[1]), int(m[2]), int(m[3]), int(m[4]), int(m[5] or 1)
        best = None  # (relative error, input, output) of the closest square input, padded 'same' or unpadded
        for same in (True, False):
            for h in range(1, 4097):
                ho = -(-h // s) if same else (h - kh) // s + 1
                if ho <= 0:
                    continue
                total = cin * h * h + cout * ho * ho * residual
                err = abs(total - per_sample) / per_sample
                if best is None or err < best[0]:
                    best = (err, cin * h * h, cout * ho * ho)
                if total > 2 * per_sample:
                    break
        if best is not None and best[0] <= 1e-4:
            return best[1], best[2]
        return None
    m = _FC.match(shape)
    if parts[0] == "fc" and m:
        return int(m[1]), int(m[2])
    if prev_out is None:
        return None
    out = (per_sample - prev_out) / residual
    return (prev_out, round(out)) if out >= 0.5 else None


def _weights(op: str, shape: str) -> int:
    parts = op.split("+")
    bias = "bias" in parts
    m = _CONV.match(shape)
    if parts[0] == "conv" and m:
        cin, cout, kh, kw = int(m[1]), int(m[2]), int(m[3]), int(m[4])
        return cin * cout * kh * kw + (cout if bias else 0)
    m = _FC.match(shape)
    if parts[0] == "fc" and m:
        return int(m[1]) * int(m[2]) + (int(m[2]) if bias else 0)
    return 0


def layer_cases(results: Results, network: str, backend: str, batch: int) -> list[Case]:
    cases = [c for c in results.family(f"{network}_layer")
             if c.variant == backend and c.args.get("batch") == batch and "layer" in c.args]
    return sorted(cases, key=lambda c: c.args["layer"])


def layer_batches(results: Results, network: str, backend: str) -> set[int]:
    return {c.args["batch"] for c in results.family(f"{network}_layer")
            if c.variant == backend and "layer" in c.args and "batch" in c.args}


def describe_layers(results: Results, cases: list[Case], batch: int) -> list[tuple[str, str, str, float, int, int]]:
    """Per layer (name, op, shape, median seconds, input elements, output elements per sample); raises
    ResultsError naming the file and the layer where a case errored or its sizes cannot be told."""
    out = []
    prev_out = None
    expected = list(range(len(cases)))
    if [c.args["layer"] for c in cases] != expected:
        raise ResultsError(f"{results.path}: the layers of {cases[0].op}/{cases[0].variant}/batch:{batch} are not "
                           f"0..{len(cases) - 1} (some missing)")
    for c in cases:
        if c.error is not None or not c.runs:
            raise ResultsError(f"{results.path}: {c.name} errored: {c.error or 'no repetitions'}")
        name, op, shape = split_label(str(c.runs[0].get("label", "")))
        traffic = _traffic_elems(c)
        if traffic is None:
            raise ResultsError(f"{results.path}: {c.name} has no bytes_per_second: its activation sizes cannot be told")
        per_sample = (traffic - _weights(op, shape)) / batch
        sizes = _sizes(op, shape, per_sample, prev_out)
        if sizes is None:
            raise ResultsError(f"{results.path}: {c.name} ({name} {op} {shape}): its input and output sizes cannot be "
                               "told from its label and bytes_per_second")
        out.append((name, op, shape, c.median_seconds(), sizes[0], sizes[1]))
        prev_out = sizes[1]
    return out


def build_chain(cpu_run: Results, gpu_run: Results, network: str, cpu_backend: str, gpu_backend: str,
                batch: int) -> list[ChainLayer]:
    cpu = describe_layers(cpu_run, layer_cases(cpu_run, network, cpu_backend, batch), batch)
    gpu = describe_layers(gpu_run, layer_cases(gpu_run, network, gpu_backend, batch), batch)
    if len(cpu) != len(gpu):
        raise ResultsError(f"{network} batch {batch}: {len(cpu)} layers in {cpu_run.path} ({cpu_backend}) but "
                           f"{len(gpu)} in {gpu_run.path} ({gpu_backend}): not the same network")
    chain = []
    for i, (c, g) in enumerate(zip(cpu, gpu)):
        if c[0] != g[0] or c[4:] != g[4:]:
            raise ResultsError(f"{network} batch {batch}, layer {i}: {c[0]} ({c[4]} -> {c[5]} values) in "
                               f"{cpu_run.path} but {g[0]} ({g[4]} -> {g[5]}) in {gpu_run.path}: not the same network")
        chain.append(ChainLayer(i, c[0], c[1], c[2], c[3], g[3], c[4], c[5]))
    return chain


def _copy_cases(runs: list[Results], direction: str, memory: str) -> list[tuple[Case, Results]]:
    """Usable copy/gpu_<direction>_<memory>_{async,sync}/bytes:<n> cases: async first (a pass copies on its
    stream), each variant's sizes together."""
    found = []
    for variant in (f"gpu_{direction}_{memory}_async", f"gpu_{direction}_{memory}_sync"):
        for r in runs:
            cases = [c for c in r.family("copy") if c.variant == variant and set(c.args) == {"bytes"}
                     and c.error is None and c.median("bytes_per_second")]
            if cases:
                return [(c, r) for c in sorted(cases, key=lambda c: c.args["bytes"])]
    return found


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def copy_model(runs: list[Results], memory: str = "pinned", h2d_gbps: float | None = None,
               d2h_gbps: float | None = None, latency_us: float | None = None) -> CopyModel:
    """The copy costs from the runs' copy cases, the flags overriding; raises ResultsError where a rate is
    neither in the runs nor given."""
    notes = []
    rates: dict[str, float | None] = {}
    latencies: dict[str, tuple[float, str]] = {}
    for direction, flag in (("h2d", h2d_gbps), ("d2h", d2h_gbps)):
        word = direction.upper()
        if flag is not None:
            rates[direction] = flag * 1e9
            notes.append(f"{word} {flag:g} GB/s: from --{direction}-gbps")
            continue
        cases = _copy_cases(runs, direction, memory)
        if not cases:
            rates[direction] = None
            continue
        big, run = cases[-1]
        rate = big.median("bytes_per_second")
        rates[direction] = rate
        notes.append(f"{word} {rate / 1e9:.2f} GB/s: {big.name} ({_size(big.args['bytes'])}), median of "
                     f"{len(big.runs)}, in {run.path.name}")
        small, _ = cases[0]
        if small.args["bytes"] <= SMALL_COPY and small is not big:
            fixed = max(0.0, small.median_seconds() - small.args["bytes"] / rate)
            latencies[direction] = (fixed, f"{small.name} ({_size(small.args['bytes'])}) takes "
                                           f"{small.median_seconds() * 1e6:.1f} us")
    for direction, other in (("h2d", "d2h"), ("d2h", "h2d")):
        if rates[direction] is None and rates[other] is not None:
            rates[direction] = rates[other]
            notes.append(f"{direction.upper()}: no copy/gpu_{direction}_{memory}_* case in the runs given: taken "
                         f"equal to {other.upper()} (--{direction}-gbps to set it)")
    if rates["h2d"] is None:
        raise ResultsError(f"no copy/gpu_h2d_{memory}_* or gpu_d2h_{memory}_* case in "
                           f"{', '.join(str(r.path) for r in runs)}: give --h2d-gbps and --d2h-gbps")
    if latency_us is not None:
        latency = latency_us * 1e-6
        notes.append(f"fixed cost per copy {latency_us:g} us: from --latency-us")
    elif latencies:
        latency = max(v for v, _ in latencies.values())
        notes.append(f"fixed cost per copy {latency * 1e6:.1f} us: the larger of "
                     + "; ".join(f"{d.upper()} {v * 1e6:.1f} us ({why})" for d, (v, why) in latencies.items()))
    else:
        latency = 0.0
        notes.append("fixed cost per copy 0 us ASSUMED: no copy case of 64 KiB or less in the runs given, so the "
                     "launch and synchronization of each copy (microseconds on PCIe) is not charged and small "
                     "activations move too cheaply (--latency-us to set it)")
    return CopyModel(Copy(rates["h2d"], rates["d2h"], latency), notes)


def find_network_case(runs: list[Results], network: str, backend: str, batch: int) -> tuple[Case, Results] | None:
    for r in runs:
        c = r.cases.get(f"{network}/{backend}/batch:{batch}")
        if c is not None:
            return c, r
    return None


def measured(runs: list[Results], network: str, backend: str, batch: int) -> Measured | None:
    found = find_network_case(runs, network, backend, batch)
    if found is None:
        return None
    c, r = found
    if c.error is not None or not c.runs:
        return Measured(backend, None, None, r, c.error or "no repetitions")
    return Measured(backend, c.median_seconds(), c.median("items_per_second"), r, None, len(c.runs))


def hybrid_backends(runs: list[Results], network: str) -> list[str]:
    return sorted({c.variant for r in runs for c in r.family(network) if c.variant.startswith("gpu_hybrid")})


def plan_batch(cpu_run: Results, gpu_run: Results, other_runs: list[Results], network: str, cpu_backend: str,
               gpu_backend: str, batch: int, copy: Copy) -> BatchPlan:
    layers = build_chain(cpu_run, gpu_run, network, cpu_backend, gpu_backend, batch)
    chain = chain_of(layers, batch)
    out_bytes = FLOAT_BYTES * batch * layers[-1].out_elems
    best_s, devices = best_placement(chain, out_bytes, copy)
    plan = BatchPlan(batch, layers, out_bytes, best_s, devices,
                     placement_cost(chain, out_bytes, copy, [CPU] * len(chain)),
                     placement_cost(chain, out_bytes, copy, [GPU] * len(chain)), copy)
    gpu_side = [gpu_run, *other_runs]
    for backend in hybrid_backends(gpu_side, network):
        rule = HYBRID_PLACEMENTS.get(backend)
        if rule is not None:
            devs = [GPU if rule(l.name, l.op) else CPU for l in layers]
            plan.hybrid_predicted[backend] = (placement_cost(chain, out_bytes, copy, devs), devs)
    for backend in [*hybrid_backends(gpu_side, network), gpu_backend]:
        m = measured(gpu_side, network, backend, batch)
        if m is not None:
            plan.measured.append(m)
    m = measured([cpu_run, *other_runs], network, cpu_backend, batch)
    if m is not None:
        plan.measured.append(m)
    for word, run, backend in (("CPU", cpu_run, cpu_backend), ("GPU", gpu_run, gpu_backend)):
        c = run.cases.get(f"{network}_layer/{backend}/batch:{batch}/pass")
        if c is not None and c.error is None and c.median("pass_us") is not None:
            plan.passes.append((word, c))
    return plan


# ---------------------------------------------------------------------------
# Text


def us(seconds: float) -> str:
    v = seconds * 1e6
    return f"{v:,.1f}" if v < 1e4 else f"{v:,.0f}"


def device_word(d: int) -> str:
    return "GPU" if d == GPU else "CPU"


def runs_of(devices: list[int]) -> str:
    """'GPU 0-21, CPU 22': the placement as ranges of layers."""
    parts, start = [], 0
    for i in range(1, len(devices) + 1):
        if i == len(devices) or devices[i] != devices[start]:
            span = f"{start}" if i - 1 == start else f"{start}-{i - 1}"
            parts.append(f"{device_word(devices[start])} {span}")
            start = i
    return ", ".join(parts)


def copies_of(chain: list[Layer], out_bytes: float, copy: Copy, devices: list[int]) -> tuple[int, float]:
    n, total, where = 0, 0.0, CPU
    for layer, d in zip(chain, devices):
        if d != where:
            n, total = n + 1, total + copy.cost(where, d, layer.in_bytes)
        where = d
    if where != CPU:
        n, total = n + 1, total + copy.cost(where, CPU, out_bytes)
    return n, total


def table(plan: BatchPlan, copy: Copy) -> list[str]:
    chain = plan.chain()
    rows = [("#", "layer", "op", "input", "CPU us", "GPU us", "device", "copy before, us")]
    where = CPU
    for l, layer, d in zip(plan.layers, chain, plan.devices):
        move = "-"
        if d != where:
            move = f"{'H2D' if d == GPU else 'D2H'} {us(copy.cost(where, d, layer.in_bytes))}"
        where = d
        rows.append((str(l.index), l.name, f"{l.op} {l.shape}".strip(), f"{layer.in_bytes / 1024:,.1f} KiB",
                     us(l.cpu_s), us(l.gpu_s), device_word(d), move))
    end = f"D2H {us(copy.cost(where, CPU, plan.out_bytes))}" if where != CPU else "-"
    rows.append(("", "(output to the host)", "", f"{plan.out_bytes / 1024:,.1f} KiB", "", "", "", end))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    right = {0, 3, 4, 5}
    return ["  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
            for r in rows]


def summary(plan: BatchPlan, copy: Copy, network: str, cpu_run: Results, gpu_run: Results) -> list[str]:
    chain = plan.chain()
    n, cost = copies_of(chain, plan.out_bytes, copy, plan.devices)
    lines = [f"  predicted pass (layer times summed, plus copies; no launch or dispatch gap):",
             f"    {'best placement':<28} {us(plan.best_s):>10} us  {runs_of(plan.devices)}; {n} cop{'y' if n == 1 else 'ies'} "
             f"{us(cost)} us"]
    for word, value, devs in (("all-CPU", plan.all_cpu_s, [CPU] * len(chain)),
                              ("all-GPU", plan.all_gpu_s, [GPU] * len(chain))):
        n, cost = copies_of(chain, plan.out_bytes, copy, devs)
        lines.append(f"    {word:<28} {us(value):>10} us  ({value / plan.best_s:.2f}x the best; {n} "
                     f"cop{'y' if n == 1 else 'ies'} {us(cost)} us)")
    for backend, (value, devs) in plan.hybrid_predicted.items():
        n, cost = copies_of(chain, plan.out_bytes, copy, devs)
        lines.append(f"    {backend + ' placed':<28} {us(value):>10} us  ({value / plan.best_s:.2f}x the best; {n} "
                     f"copies {us(cost)} us at the model's rates; {runs_of(devs)})")
    lines.append(f"  measured whole passes ({network}/<backend>/batch:{plan.batch}, median):")
    if not plan.measured:
        lines.append("    none in the runs given")
    for m in plan.measured:
        where = f"{m.source.path.name}, {m.source.machine}"
        if m.error is not None:
            lines.append(f"    {m.backend:<28} ERRORED ({m.error}) in {where}")
            continue
        rate = f", {m.images_per_second:,.0f} images/s" if m.images_per_second else ""
        if m.backend.startswith("gpu_hybrid"):
            what = "; its CPU layers on this host's CPU, pageable copies, each synchronized"
        elif device_of(m.backend) == "gpu":
            what = "; input and output stay in device memory: no copies"
        else:
            what = ""
        lines.append(f"    {m.backend:<28} {us(m.seconds):>10} us{rate}  [{where}{what}]")
    for word, c in plan.passes:
        lines.append(f"  {word} layer cases' own pass ({c.variant}): {c.median('pass_us'):,.1f} us against its layers "
                     f"summed {c.median('layers_us'):,.1f} us; gap {c.median('gap_us'):,.1f} us (medians), which "
                     "the prediction leaves out")
    return lines


def machine_line(role: str, r: Results) -> str:
    ctx = r.context
    cpu = f"{ctx.get('cpu_model', '?')} ({ctx.get('cpu_microarchitecture', '?')}, {ctx.get('cpu_cores', '?')} cores, " \
          f"{ctx.get('omp_threads', '?')} OpenMP threads)"
    gpu = ctx.get("gpu_name", "none")
    commit = str(ctx.get("git_commit", "?"))[:12]
    return (f"{role}: {r.path}: machine {r.machine}, CPU {cpu}, GPU {gpu}, commit {commit}, "
            f"{ctx.get('date', '?')}")


def same_host_kind(a: Results, b: Results) -> bool:
    return all(a.context.get(k) == b.context.get(k) for k in ("cpu_model", "cpu_microarchitecture")) \
        and a.machine == b.machine


# ---------------------------------------------------------------------------
# Figure


def figure(plans: list[BatchPlan], network: str, cpu_backend: str, gpu_backend: str, mixed: bool):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    fig, axes = plt.subplots(len(plans), 2, figsize=(15, 4.6 * len(plans)), layout="constrained", squeeze=False,
                             gridspec_kw={"width_ratios": [3, 1.3]})
    for (ax, bx), plan in zip(axes, plans):
        xs = range(len(plan.layers))
        cpu = [l.cpu_s * 1e6 for l in plan.layers]
        gpu = [l.gpu_s * 1e6 for l in plan.layers]
        for x, d in zip(xs, plan.devices):
            ax.axvspan(x - 0.5, x + 0.5, color="tab:green" if d == GPU else "tab:blue", alpha=0.18, lw=0)
            ax.text(x, 1.01, "G" if d == GPU else "C", transform=ax.get_xaxis_transform(), ha="center",
                    va="bottom", fontsize=8, fontweight="bold", color="tab:green" if d == GPU else "tab:blue")
        ax.bar([x - 0.2 for x in xs], cpu, width=0.4, color="tab:blue", label=f"CPU time ({cpu_backend})")
        ax.bar([x + 0.2 for x in xs], gpu, width=0.4, color="tab:green", label=f"GPU time ({gpu_backend})")
        copy_x, copy_y, where = [], [], CPU
        for x, layer, d in zip(xs, plan.chain(), plan.devices):
            if d != where:
                copy_x.append(x - 0.5)
                copy_y.append(plan.copy.cost(where, d, layer.in_bytes) * 1e6)
            where = d
        if where != CPU:
            copy_x.append(len(plan.layers) - 0.5)
            copy_y.append(plan.copy.cost(where, CPU, plan.out_bytes) * 1e6)
        if copy_x:
            ax.scatter(copy_x, copy_y, marker="D", s=40, color="tab:red", edgecolor="black", zorder=3,
                       label="copy at a device change (us)")
        values = [v for v in cpu + gpu + copy_y if v > 0]
        ax.set_yscale("log")
        ax.set_ylim(min(values) / 3, max(values) * 30)
        ax.set_xticks(list(xs), [f"{l.index} {l.name}" for l in plan.layers], rotation=60, ha="right", fontsize=7)
        ax.set_xlim(-0.6, len(plan.layers) - 0.4)
        ax.set_ylabel("us per layer (log)")
        ax.set_title(f"{network} batch {plan.batch}: per-layer times; letters and shading: the best placement "
                     f"({runs_of(plan.devices)})", fontsize=10, pad=14)
        ax.grid(True, axis="y", alpha=0.3, which="major")
        handles, labels = ax.get_legend_handles_labels()
        handles += [Patch(color="tab:blue", alpha=0.3), Patch(color="tab:green", alpha=0.3)]
        labels += ["placed on the CPU (C)", "placed on the GPU (G)"]
        ax.legend(handles, labels, fontsize=8, loc="upper center", ncol=3)

        bars = [("predicted: best", plan.best_s, "tab:red"), ("predicted: all-CPU", plan.all_cpu_s, "tab:blue"),
                ("predicted: all-GPU", plan.all_gpu_s, "tab:green")]
        bars += [(f"predicted: {b}'s placement", v, "tab:orange") for b, (v, _) in plan.hybrid_predicted.items()]
        bars += [(f"measured on {m.source.machine}: {m.backend}", m.seconds, "0.45") for m in plan.measured if m.seconds is not None]
        ys = list(range(len(bars)))[::-1]
        bx.barh(ys, [v * 1e6 for _, v, _ in bars], color=[c for _, _, c in bars])
        bx.set_yticks(ys, [n for n, _, _ in bars], fontsize=8)
        for y, (_, v, _) in zip(ys, bars):
            bx.text(v * 1e6, y, f" {us(v)}", va="center", fontsize=7)
        bx.set_xscale("log")
        bx.set_xlabel("us per pass (log)")
        bx.set_title(f"batch {plan.batch}: whole pass", fontsize=10)
        bx.grid(True, axis="x", alpha=0.3, which="both")
    note = "CPU and GPU layer times from DIFFERENT HOSTS; " if mixed else ""
    fig.suptitle(f"{network}: the best CPU/GPU placement of its layers, predicted from measured layer times and copy "
                 f"rates; measured whole passes in grey\nchain model: residual joins' copies not charged (a lower "
                 f"bound where a shortcut crosses devices); {note}scripts/placement.py", fontsize=10)
    return fig
