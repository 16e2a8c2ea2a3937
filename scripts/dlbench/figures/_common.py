"""Helpers shared by the figure modules."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from dlbench.quality import case_reason  # noqa: E402
from dlbench.results import Case, Results  # noqa: E402

GB = 1e9
GFLOP = 1e9


def label_for(results: Results, variant: str, many_machines: bool) -> str:
    return f"{variant} ({results.machine})" if many_machines else variant


def tables_with_note(blocks: list[str], note: str) -> str:
    """A family's README block: its tables, then the note that explains
    them; nothing if there is no table."""
    return "\n\n".join(blocks) + "\n\n" + note if blocks else ""


def many_machines(results_list: list[Results]) -> bool:
    return len({r.machine for r in results_list}) > 1


def series(cases: list[Case], x_arg: str, metric: str, scale: float = 1.0):
    """{variant: ([x...], [median metric / scale or nan for errored cases])}, x sorted."""
    out: dict[str, tuple[list[int], list[float]]] = {}
    for c in sorted(cases, key=lambda c: (c.variant, c.args.get(x_arg, 0))):
        if x_arg not in c.args:
            continue
        xs, ys = out.setdefault(c.variant, ([], []))
        m = c.median(metric)
        xs.append(c.args[x_arg])
        ys.append(m / scale if m is not None and c.error is None else math.nan)
    return out


def ceiling(results: Results, name_prefix: str, metric: str) -> float | None:
    """Median `metric` of the first case whose name starts with name_prefix (e.g. 'roofline/cpu_triad')."""
    for c in results.cases.values():
        if c.name.startswith(name_prefix + "/") or c.name == name_prefix:
            return c.median(metric) if c.error is None else None
    return None


def fraction_of_ceiling(results: Results, case: Case | None, ceiling_name: str) -> tuple[float | None, bool]:
    """A memory-bound case's bytes_per_second over its ceiling, and whether
    it is bracketed: the median of its frac_of_ceiling where the run has it
    (the ceiling measured right before and after each repetition), else its
    median over the median of the run's `ceiling_name` case (measured at
    another moment of the run)."""
    if case is None or case.error is not None:
        return None, False
    bracketed = case.median("frac_of_ceiling")
    if bracketed is not None:
        return bracketed, True
    mine, theirs = case.median("bytes_per_second"), ceiling(results, ceiling_name, "bytes_per_second")
    return (mine / theirs if mine and theirs else None), False


def noisy_mark(case: Case | None) -> str:
    """' (noisy)' after a figure whose case had a disturbed repetition (dlbench.quality), else ''."""
    return " (noisy)" if case is not None and case_reason(case) else ""


def note_errors(ax, cases: list[Case]) -> list[str]:
    """Lists errored cases under the axes (and returns them): drawn as missing points."""
    errored = [f"{c.name}: {c.error}" for c in cases if c.error is not None]
    if errored:
        shown = errored[:4] + ([f"... and {len(errored) - 4} more"] if len(errored) > 4 else [])
        ax.text(0.01, -0.18, "not measured: " + "; ".join(shown)[:400], transform=ax.transAxes,
                fontsize=7, color="firebrick", va="top", wrap=True)
    return errored


def plain_numbers(axis) -> None:
    """Tick labels as plain numbers (40, 100, 300) on a log axis, not 4x10^1."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def new_figure(title: str, width: float = 8.0, height: float = 5.0):
    fig, ax = plt.subplots(figsize=(width, height), layout="constrained")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    return fig, ax
