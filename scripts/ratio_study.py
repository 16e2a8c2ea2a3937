#!/usr/bin/env python3
"""How steady is a ratio to a ceiling over runs of the same commit? Before and after bracketing.

    scripts/ratio_study.py RUN1.json ... RUNk.json [--case NAME=CEILING ...]

For each case (by default the ratios README states: softmax/cpu_fused in the
DRAM regime at 1024 and 4096 columns over roofline/cpu_copy, daxpy/cpu_omp
at 2^25 over roofline/cpu_triad), per run:
  run       the case's median bytes per second over the median of the run's
            roofline case (what README printed before: the ceiling measured
            at another moment of the run)
  bracketed the median over the repetitions of frac_of_ceiling (the ceiling
            measured right before and after each repetition)
and over the runs the spread of each, (max - min) / median, over all runs and
over the runs where the case was not noisy (dlbench.quality). A bracketed
cell also gives the ceiling it was divided by (median GB/s): a case that is
memory-bound at one bandwidth can be compute-bound at another, and then its
fraction of the ceiling moves with the machine for a physical reason.
Prints markdown tables.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dlbench import cli, venv  # noqa: E402

venv.reexec("ratio_study")

from dlbench.figures._common import ceiling  # noqa: E402
from dlbench.quality import case_reason, quality  # noqa: E402
from dlbench.results import ResultsError, load  # noqa: E402

DEFAULT_CASES = (
    "softmax/cpu_fused/rows:65536/cols:1024=roofline/cpu_copy",
    "softmax/cpu_fused/rows:16384/cols:4096=roofline/cpu_copy",
    "daxpy/cpu_omp/n:33554432=roofline/cpu_triad",
)


def spread(values: list[float]) -> float | None:
    return (max(values) - min(values)) / statistics.median(values) if len(values) > 1 else None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--case", action="append", help="CASE=CEILING (repeatable; default: README's ratios)")
    args = parser.parse_args(argv)
    try:
        runs = [load(p) for p in args.runs]
    except ResultsError as e:
        print(f"ratio_study.py: {e}", file=sys.stderr)
        return 2
    pairs = [c.split("=", 1) for c in (args.case or DEFAULT_CASES)]
    if any(len(p) != 2 for p in pairs):
        parser.error("--case takes CASE=CEILING")

    print("| run | machine state |")
    print("|---|---|")
    for r in runs:
        print(f"| `{r.path.name}` | {quality(r).summary()} |")
    print()
    print("| case | over | " + " | ".join(f"run {i + 1}" for i in range(len(runs))) + " | spread | spread, clean |")
    print("|---|---|" + "---:|" * (len(runs) + 2))
    for name, ceiling_name in pairs:
        by_run, bracketed = [], []
        for r in runs:
            case = r.cases.get(name)
            if case is None or case.error is not None:
                parser.error(f"{r.path}: no measured case {name}")
            top = ceiling(r, ceiling_name, "bytes_per_second")
            by_run.append(case.median("bytes_per_second") / top if top else None)
            bracketed.append((case.median("frac_of_ceiling"), bool(case_reason(case)),
                              case.median("ceiling_bytes_per_second")))
        noisy = [n for _, n, _ in bracketed]
        for label, values in (("the run's ceiling case", by_run),
                              ("bracketed", [v for v, _, _ in bracketed])):
            if any(v is None for v in values):
                continue
            cells = [f"{v:.3f}" for v in values]
            if label == "bracketed":
                cells = [f"{c} at {top / 1e9:.0f}" + (" (noisy)" if n else "")
                         for c, (_, n, top) in zip(cells, bracketed)]
            clean = spread([v for v, n in zip(values, noisy) if not n])
            print(f"| `{name}` | {label} | " + " | ".join(cells) + f" | {spread(values):.1%} | "
                  + (f"{clean:.1%}" if clean is not None else "n/a") + " |")
    return 0


if __name__ == "__main__":
    cli.run(main)
