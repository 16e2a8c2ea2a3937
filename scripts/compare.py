#!/usr/bin/env python3
"""Compares two dlbench runs and fails on a real slowdown.

    scripts/compare.py BASE.json NEW.json [--alpha A] [--min-effect E] [--noise-factor F]
                       [--normalize roofline|bracket] [--cross-machine] [--json OUT]

Cases are paired by name and decided from all their repetitions: make each
side with several processes and repetitions (DLB_PROCESSES=3
DLB_REPETITIONS=10 scripts/bench ...); see scripts/dlbench/compare.py for
the rule and docs/methodology.md, "Regression statistics". Prints a table, worst
first.

Each side's machine state is printed (clean, or noisy and why:
dlbench.quality), and a case measured on a disturbed machine is marked
`noisy`; its `slower` is not counted as a regression.

Exit codes: 0 no regression; 1 at least one case `slower`, or `errored` where
BASE measured it; 2 bad input (missing file, not Google Benchmark JSON, no
common cases, different machines without --cross-machine); 3 no regression,
but cases `slower` where a side was noisy: rerun them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dlbench import venv  # noqa: E402

venv.reexec("compare")

from dlbench import compare as cmp  # noqa: E402
from dlbench.quality import quality  # noqa: E402
from dlbench.results import ResultsError, load, repetitions  # noqa: E402


def fmt_time(v: float | None, normalized: bool) -> str:
    if v is None:
        return "-"
    if normalized:
        return f"{v:.4g}x"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if v >= scale:
            return f"{v / scale:.4g} {unit}"
    return f"{v / 1e-9:.3g} ns"


def table(verdicts, normalized: bool) -> str:
    rows = [("verdict", "change", "p", "threshold", "base", "new", "reps", "case")]
    for v in verdicts:
        rows.append((
            v.verdict + (" !" if v.regression else "") + (" (noisy)" if v.noisy else ""),
            f"{v.change:+.1%}" if v.change is not None else "-",
            f"{v.p_value:.2g}" if v.p_value is not None else "-",
            f"{v.threshold:.1%}" if v.threshold is not None else "-",
            fmt_time(v.base_median, normalized),
            fmt_time(v.new_median, normalized),
            f"{v.base_repetitions}/{v.new_repetitions}",
            v.name + (f"  ({v.note})" if v.note else "") + (f"  [noisy: {v.noisy}]" if v.noisy else ""),
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths)) + "  " + r[-1] for r in rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--alpha", type=float, default=cmp.DEFAULT_ALPHA,
                        help="significance level of the Mann-Whitney U test (default %(default)s)")
    parser.add_argument("--min-effect", type=float, default=cmp.DEFAULT_MIN_EFFECT,
                        help="smallest relative change of the median that counts (default %(default)s)")
    parser.add_argument("--noise-factor", type=float, default=cmp.DEFAULT_NOISE_FACTOR,
                        help="the change must also exceed this many relative MADs (default %(default)s)")
    parser.add_argument("--normalize", choices=list(cmp.NORMALIZATIONS),
                        help="roofline: divide each case's time by its run's matching roofline ceiling first; "
                             "bracket: compare memory-bound CPU cases by their bracketed frac_of_ceiling")
    parser.add_argument("--cross-machine", action="store_true", help="compare runs from different machines")
    parser.add_argument("--json", type=Path, help="write the verdicts as JSON here")
    args = parser.parse_args(argv)

    try:
        base, new = load(args.base), load(args.new)
        diff = cmp.check_machines(base, new, args.cross_machine)
        normalized = args.normalize is not None
        verdicts = cmp.compare(base, new, args.alpha, args.min_effect, args.noise_factor, args.normalize)
    except (ResultsError, cmp.CompareError) as e:
        print(f"compare.py: {e}", file=sys.stderr)
        return 2

    print(f"BASE {args.base} (commit {str(base.context.get('git_commit', '?'))[:12]})")
    print(f"NEW  {args.new} (commit {str(new.context.get('git_commit', '?'))[:12]})")
    for label, r in (("BASE", base), ("NEW", new)):
        print(f"{label} machine: {quality(r).summary()}")
    if diff:
        print(f"CROSS-MACHINE comparison (--cross-machine): {diff}")
    for label, r in (("BASE", base), ("NEW", new)):
        if repetitions(r) < 2:
            print(f"warning: {label} has one repetition per case: run with --benchmark_repetitions=10 "
                  "for a verdict; every case is `same` without repetitions", file=sys.stderr)
        elif cmp.processes(r) < 2:
            print(f"warning: {label} is one process: a whole process can be off by 10% or more on a case "
                  "here, which its repetitions do not show; pool three (DLB_PROCESSES=3) for a verdict "
                  "without false alarms", file=sys.stderr)
    print(f"rule: slower/faster when p < {args.alpha} (Mann-Whitney U, two-sided) and |change| > "
          f"max({args.min_effect:.0%}, {args.noise_factor:g} x relative MAD)"
          + {None: "", "roofline": "; times normalized by the run's roofline ceiling",
             "bracket": "; memory-bound CPU cases compared by their bracketed fraction of the ceiling"}[args.normalize])
    print()
    print(table(verdicts, normalized))
    counts = {}
    for v in verdicts:
        counts[v.verdict] = counts.get(v.verdict, 0) + 1
    regressions = [v for v in verdicts if v.regression]
    rerun = [v for v in verdicts if v.rerun]
    print()
    print(", ".join(f"{n} {k}" for k, n in sorted(counts.items(), key=lambda kv: cmp.VERDICT_ORDER[kv[0]]))
          + f"; {len(regressions)} regression(s)"
          + (f"; {len(rerun)} slower where the machine was noisy: rerun them" if rerun else ""))

    if args.json:
        args.json.write_text(json.dumps({
            "base": str(args.base), "new": str(args.new), "alpha": args.alpha, "min_effect": args.min_effect,
            "noise_factor": args.noise_factor, "normalize": args.normalize, "cross_machine": diff,
            "regressions": len(regressions), "noisy_slower": len(rerun),
            "base_machine": quality(base).summary(), "new_machine": quality(new).summary(),
            "cases": [v.as_dict() for v in verdicts]}, indent=1))
    if regressions:
        return 1
    return 3 if rerun else 0


if __name__ == "__main__":
    sys.exit(main())
