"""copy: host <-> device copies (GPU only), one figure of four panels.

- h2d and d2h: GB/s against bytes, one line per host kind and call
  (``gpu_<dir>_<kind>_<call>``), gpu_d2d as the device-side ceiling, and a
  derived line "pinned on the fly": register + registered sync copy +
  unregister, bytes / (t_register_cost + t_copy) from the same run.
- pinned / pageable: the ratio of their GB/s, per direction and call.
- overlap: the chunk pipeline's GB/s (n in + n out) on 1 stream
  (``gpu_serial_<kind>``) and on 2 and 4 (``gpu_overlap_<kind>``) at its
  largest size, with overlap_fraction on each bar.

Host kinds and calls are read from the case names, not listed here; only
the comparisons name the kinds they compare (pinned against pageable, and
registered for pinning on the fly).
"""

from __future__ import annotations

import math
from collections import defaultdict

from dlbench.figures._common import GB, label_for, many_machines, note_errors, plain_numbers, series
from dlbench.names import words_of
from dlbench.results import Case, Results

import matplotlib.pyplot as plt  # noqa: E402  (after _common has chosen the backend)

FAMILY = "copy"
DIRECTIONS = ("h2d", "d2h")
TABLE_BYTES = 256 << 20


def single_copy(variant: str) -> tuple[str, str, str] | None:
    """'gpu_h2d_pinned_sync' -> ('h2d', 'pinned', 'sync'); None for the other cases."""
    parts = words_of(variant)
    if len(parts) == 4 and parts[0] == "gpu" and parts[1] in DIRECTIONS:
        return parts[1], parts[2], parts[3]
    return None


def pipeline(case: Case) -> tuple[str, int] | None:
    """(host kind, streams) of a chunk-pipeline case, None for the others."""
    for prefix in ("gpu_serial_", "gpu_overlap_"):
        if case.variant.startswith(prefix):
            return case.variant[len(prefix):], case.args.get("streams", 1)
    return None


def _gbps(case: Case | None) -> float | None:
    if case is None or case.error is not None:
        return None
    m = case.median("bytes_per_second")
    return m / GB if m else None


def _by_name(results: Results) -> dict[tuple[str, int], Case]:
    """{(variant, bytes): case} for the family's cases with a bytes argument."""
    return {(c.variant, c.args["bytes"]): c for c in results.family(FAMILY) if "bytes" in c.args}


def _pinned_on_the_fly(results: Results, direction: str) -> tuple[list[int], list[float]]:
    """GB/s of register + registered sync copy + unregister, from the two measured cases."""
    cases = _by_name(results)
    xs, ys = [], []
    for (variant, size), reg in sorted(cases.items(), key=lambda kv: kv[0][1]):
        if variant != "gpu_register_cost":
            continue
        copy = cases.get((f"gpu_{direction}_registered_sync", size))
        reg_rate, copy_rate = _gbps(reg), _gbps(copy)
        xs.append(size)
        ys.append(1.0 / (1.0 / reg_rate + 1.0 / copy_rate) if reg_rate and copy_rate else math.nan)
    return xs, ys


def _human_bytes(n: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n:g} B"


def _bytes_axis(ax) -> None:
    """Log-2 x axis ticked every power of 4, labelled 4 KiB, 16 KiB ..."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=4))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _human_bytes(v)))
    ax.tick_params(axis="x", labelsize=7)
    ax.set_xlabel("bytes copied")


def _direction(variant: str) -> str | None:
    parsed = single_copy(variant)
    return parsed[0] if parsed else None


def _bandwidth_panel(ax, results_list: list[Results], direction: str) -> None:
    many = many_machines(results_list)
    kinds = sorted({single_copy(c.variant)[1] for r in results_list for c in r.family(FAMILY)
                    if single_copy(c.variant)})
    colors = {k: f"C{i}" for i, k in enumerate(kinds)}
    for r in results_list:
        cases = [c for c in r.family(FAMILY) if _direction(c.variant) == direction]
        for variant, (xs, ys) in series(cases, "bytes", "bytes_per_second", GB).items():
            _, kind, call = single_copy(variant)
            ax.plot(xs, ys, marker="o", markersize=3, color=colors[kind],
                    linestyle="-" if call == "sync" else "--", label=label_for(r, variant, many))
        d2d = [c for c in r.family(FAMILY) if c.variant == "gpu_d2d"]
        for variant, (xs, ys) in series(d2d, "bytes", "bytes_per_second", GB).items():
            ax.plot(xs, ys, color="gray", linewidth=1, label=label_for(r, f"{variant} (device side)", many))
        xs, ys = _pinned_on_the_fly(r, direction)
        if xs:
            ax.plot(xs, ys, color="black", linestyle=":", marker="x", markersize=4,
                    label=label_for(r, "register + registered sync copy + unregister", many))
    ax.set_title(f"{direction}: bandwidth against size (solid: cudaMemcpy, dashed: cudaMemcpyAsync)", fontsize=9)
    _bytes_axis(ax)
    ax.set_yscale("log")
    plain_numbers(ax.yaxis)
    ax.set_ylabel("GB/s (1e9 bytes/s)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6)


def ratios(results: Results) -> dict[str, tuple[list[int], list[float]]]:
    """{'h2d sync': ([bytes...], [pinned GB/s / pageable GB/s...]), ...}; nan where either is missing."""
    cases = _by_name(results)
    out: dict[str, tuple[list[int], list[float]]] = {}
    for (variant, size) in sorted(cases, key=lambda k: k[1]):
        parsed = single_copy(variant)
        if parsed is None or parsed[1] != "pinned":
            continue
        direction, _, call = parsed
        pinned, pageable = _gbps(cases[(variant, size)]), _gbps(cases.get((f"gpu_{direction}_pageable_{call}", size)))
        xs, ys = out.setdefault(f"{direction} {call}", ([], []))
        xs.append(size)
        ys.append(pinned / pageable if pinned and pageable else math.nan)
    return dict(sorted(out.items()))


def _ratio_panel(ax, results_list: list[Results]) -> None:
    many = many_machines(results_list)
    for r in results_list:
        for name, (xs, ys) in ratios(r).items():
            ax.plot(xs, ys, marker="o", markersize=3, linestyle="-" if name.endswith("sync") else "--",
                    label=label_for(r, name, many))
    ax.axhline(1.0, color="gray", linewidth=1)
    ax.set_title("pinned / pageable (GB/s ratio)", fontsize=9)
    _bytes_axis(ax)
    ax.set_ylabel("ratio")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)


def overlap(results: Results) -> tuple[int | None, dict[str, dict[int, Case]]]:
    """(largest pipeline size, {kind: {streams: case}}) at that size."""
    cases = [(c, pipeline(c)) for c in results.family(FAMILY)]
    cases = [(c, p) for c, p in cases if p is not None]
    if not cases:
        return None, {}
    size = max(c.args["bytes"] for c, _ in cases)
    out: dict[str, dict[int, Case]] = defaultdict(dict)
    for c, (kind, streams) in cases:
        if c.args["bytes"] == size:
            out[kind][streams] = c
    return size, {k: dict(sorted(v.items())) for k, v in sorted(out.items())}


def _streams_label(streams: int) -> str:
    return "serial" if streams == 1 else f"{streams} streams"


def _overlap_panel(ax, results_list: list[Results]) -> None:
    many = many_machines(results_list)
    counts = sorted({s for r in results_list for by_streams in overlap(r)[1].values() for s in by_streams})
    colors = {s: f"C{i}" for i, s in enumerate(counts)}
    x, ticks, labels, sizes, legend = 0.0, [], [], set(), set()
    for r in results_list:
        size, by_kind = overlap(r)
        if size is None:
            continue
        sizes.add(size)
        for kind, by_streams in by_kind.items():
            for streams, case in by_streams.items():
                height = _gbps(case)
                name = _streams_label(streams)
                ax.bar(x, height or 0.0, color=colors[streams],
                       label=name if name not in legend else None)
                legend.add(name)
                fraction = case.median("overlap_fraction") if height is not None else None
                text = ("not measured" if height is None else
                        f"{height:.1f}" + (f"\noverlap {fraction:.2f}" if fraction is not None else ""))
                ax.text(x, height or 0.0, text, ha="center", va="bottom", fontsize=6)
                ticks.append(x)
                labels.append(f"{kind}\n{name}" + (f"\n{r.machine}" if many else ""))
                x += 1.0
            x += 0.5
    ax.set_xticks(ticks, labels, fontsize=6)
    at = ", ".join(_human_bytes(s) for s in sorted(sizes))
    ax.set_title(f"chunk pipeline (h2d, kernel, d2h per chunk) at {at}", fontsize=9)
    ax.set_ylabel("GB/s (bytes in + out)")
    ax.grid(True, axis="y", alpha=0.3)
    if legend:
        ax.legend(fontsize=7)


def figures(results_list: list[Results]):
    cases_all = [c for r in results_list for c in r.family(FAMILY)]
    if not cases_all:
        return {}
    fig, axes = plt.subplots(2, 2, figsize=(14, 10), layout="constrained")
    fig.suptitle("Host-device copies: pinned vs pageable memory, and what pinning buys with streams")
    _bandwidth_panel(axes[0][0], results_list, "h2d")
    _bandwidth_panel(axes[0][1], results_list, "d2h")
    _ratio_panel(axes[1][0], results_list)
    _overlap_panel(axes[1][1], results_list)
    note_errors(axes[1][0], cases_all)
    return {"copy": fig}


def _cell(value: float | None, fmt: str = ".1f") -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, fmt)


def table(results: Results) -> str:
    """Markdown: GB/s per host kind at 256 MiB and the pinned/pageable ratio;
    d2d and the register cost at 256 MiB; the pipeline at its largest size,
    with the speedup of the most streams over serial and its overlap_fraction."""
    cases = _by_name(results)
    if not cases:
        return ""
    parsed = [p for p in (single_copy(v) for v, _ in cases) if p]
    kinds = sorted({kind for _, kind, _ in parsed})
    rows = sorted({(d, call) for d, _, call in parsed}, key=lambda dc: (DIRECTIONS.index(dc[0]), dc[1]))
    lines = [f"Single copies of {TABLE_BYTES >> 20} MiB, GB/s:", "",
             "| direction, call | " + " | ".join(kinds) + " | pinned / pageable |",
             "|---|" + "---:|" * (len(kinds) + 1)]
    for direction, call in rows:
        values = {k: _gbps(cases.get((f"gpu_{direction}_{k}_{call}", TABLE_BYTES))) for k in kinds}
        pinned, pageable = values.get("pinned"), values.get("pageable")
        ratio = pinned / pageable if pinned and pageable else None
        lines.append(f"| {direction} {call} | " + " | ".join(_cell(values[k]) for k in kinds)
                     + f" | {_cell(ratio, '.2f')} |")

    extras = []
    if ("gpu_d2d", TABLE_BYTES) in cases:
        extras.append(f"device to device {_cell(_gbps(cases[('gpu_d2d', TABLE_BYTES)]))} GB/s")
    register = cases.get(("gpu_register_cost", TABLE_BYTES))
    if register is not None:
        seconds = register.median_seconds() if register.error is None else None
        extras.append(f"cudaHostRegister + cudaHostUnregister {_cell(seconds * 1e3 if seconds else None)} ms")
    if extras:
        lines += ["", f"At {TABLE_BYTES >> 20} MiB: " + "; ".join(extras) + "."]

    size, by_kind = overlap(results)
    if size is not None:
        counts = sorted({s for by_streams in by_kind.values() for s in by_streams})
        most = counts[-1]
        chunks = sorted({c.args.get("chunks", 0) for by_streams in by_kind.values() for c in by_streams.values()})
        lines += ["", f"Chunk pipeline (h2d, kernel, d2h per chunk; {', '.join(map(str, chunks))} chunks) of "
                      f"{_human_bytes(size)}, GB/s of bytes in + out:", "",
                  "| host memory | " + " | ".join(_streams_label(s) for s in counts)
                  + f" | speedup, {_streams_label(most)} / serial | overlap_fraction, {_streams_label(most)} |",
                  "|---|" + "---:|" * (len(counts) + 2)]
        for kind, by_streams in by_kind.items():
            rates = {s: _gbps(by_streams.get(s)) for s in counts}
            speedup = rates[most] / rates[1] if rates.get(1) and rates[most] else None
            best = by_streams.get(most)
            fraction = best.median("overlap_fraction") if best is not None and best.error is None else None
            lines.append(f"| {kind} | " + " | ".join(_cell(rates[s]) for s in counts)
                         + f" | {_cell(speedup, '.2f')} | {_cell(fraction, '.2f')} |")
    lines += ["", "Medians of the repetitions; n/a: not measured (see the figure's list)."]
    return "\n".join(lines)
