"""daxpy: GB/s against n, one line per variant, with the memory ceilings
measured in the same run drawn across."""

from __future__ import annotations

from dlbench.figures._common import (GB, ceiling, fraction_of_ceiling, label_for, many_machines, new_figure,
                                     noisy_mark, note_errors, plain_numbers, series)
from dlbench.names import device_of, split_name
from dlbench.results import Results

FAMILY = "daxpy"
CEILINGS = ("roofline/cpu_copy", "roofline/cpu_triad", "roofline/gpu_copy", "roofline/gpu_triad", "roofline/gpu_memory")
TABLE_SIZES = (1 << 10, 1 << 16, 1 << 20, 1 << 25)


def figures(results_list: list[Results]):
    cases_all = [c for r in results_list for c in r.family(FAMILY)]
    if not cases_all:
        return {}
    fig, ax = new_figure("daxpy (y = a*x + y, fp64): bandwidth against length")
    many = many_machines(results_list)
    for r in results_list:
        for variant, (xs, ys) in series(r.family(FAMILY), "n", "bytes_per_second", GB).items():
            ax.plot(xs, ys, marker="o", markersize=3, label=label_for(r, variant, many))
        for i, name in enumerate(CEILINGS):
            value = ceiling(r, name, "bytes_per_second")
            if value is not None:
                short = split_name(name).variant
                ax.axhline(value / GB, linestyle="--", linewidth=1, color=f"C{6 + i % 4}",
                           label=label_for(r, f"{short} ceiling {value / GB:.1f} GB/s", many))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    plain_numbers(ax.yaxis)
    ax.set_xlabel("n (elements; 24 bytes moved per element)")
    ax.set_ylabel("GB/s (1e9 bytes/s)")
    ax.legend(fontsize=8)
    note_errors(ax, cases_all)
    return {"daxpy": fig}


def table(results: Results) -> str:
    """Markdown: GB/s of each variant at a few sizes, and the best CPU daxpy
    against the triad ceiling."""
    cases = results.family(FAMILY)
    if not cases:
        return ""
    sizes = sorted({c.args["n"] for c in cases})
    shown = [n for n in sizes if n in TABLE_SIZES]
    lines = ["| variant | " + " | ".join(f"n = 2^{n.bit_length() - 1}" for n in shown) + " |",
             "|---|" + "---:|" * len(shown)]
    by_variant: dict[str, dict[int, float]] = {}
    for c in cases:
        m = c.median("bytes_per_second")
        by_variant.setdefault(c.variant, {})[c.args["n"]] = m / GB if m and c.error is None else None
    for variant in sorted(by_variant):
        cells = [f"{by_variant[variant][n]:.1f}" if by_variant[variant].get(n) else "n/a" for n in shown]
        lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    gpu_text = gpu_summary(results, by_variant)
    triad = ceiling(results, "roofline/cpu_triad", "bytes_per_second")
    big = {v: by_variant[v].get(1 << 25) for v in by_variant if device_of(v) == "cpu" and by_variant[v].get(1 << 25)}
    if not big:
        return "\n".join(lines + ([""] + gpu_text if gpu_text else []))
    best = max(big, key=big.get)
    case = results.cases.get(f"{FAMILY}/{best}/n:{1 << 25}")
    of_ceiling, bracketed = fraction_of_ceiling(results, case, "roofline/cpu_triad")
    lines.append("")
    text = f"GB/s, median of the repetitions. Best CPU daxpy at n = 2^25: `{best}`, {big[best]:.1f} GB/s"
    if of_ceiling and bracketed:
        text += (f", {of_ceiling:.2f}{noisy_mark(case)} of `roofline/cpu_triad` measured right before and "
                 "after each repetition (median over the repetitions)")
        if triad:
            text += f"; {big[best] / (triad / GB):.2f} of the run's `roofline/cpu_triad` case ({triad / GB:.1f} GB/s)"
    elif of_ceiling:
        text += f", {of_ceiling:.2f} of `roofline/cpu_triad` ({triad / GB:.1f} GB/s) from the same run"
    lines.append(text + ".")
    return "\n".join(lines + gpu_text)


def gpu_summary(results: Results, by_variant: dict[str, dict[int, float]]) -> list[str]:
    """The best GPU daxpy at n = 2^26 against both GPU memory ceilings of the
    run: the triad (two reads to one write, as daxpy) and the copy."""
    n = 1 << 26
    big = {v: by_variant[v][n] for v in by_variant if device_of(v) == "gpu" and by_variant[v].get(n)}
    if not big:
        return []
    best = max(big, key=big.get)
    text = f"Best GPU daxpy at n = 2^26: `{best}`, {big[best]:.1f} GB/s"
    # gpu_memory is the GPU memory ceiling (the fastest of several streaming
    # kernels, daxpy's own shapes among them); triad and copy are two of its parts.
    for name in ("roofline/gpu_memory", "roofline/gpu_triad", "roofline/gpu_copy"):
        value = ceiling(results, name, "bytes_per_second")
        if value:
            text += f"; {big[best] / (value / GB):.2f} of `{name}` ({value / GB:.1f} GB/s)"
    return ["", text + "."]
