#!/usr/bin/env python3
"""How often does compare.py call identical code slower? An A/A study.

    scripts/aa_study.py RUN1.json ... RUNk.json [--pool P] [--planted PLANTED1.json ... | --plant FACTOR]
                        [--normalize roofline|bracket]
    scripts/aa_study.py tests/data/compare_aa_base.json tests/data/compare_aa_new.json --pool 3 \
                        --planted tests/data/compare_planted.json

Files merged over several processes (scripts/merge_runs.py, DLB_PROCESSES)
are split back into their single-process runs first, so the committed
fixtures reproduce the study.

The runs are single-process runs of one binary on one machine (same commit,
same filter, --benchmark_repetitions=10). Each side of a comparison pools P
of them (P = 1: single runs; P = 3: what DLB_PROCESSES=3 makes), and every
split of the runs into two disjoint groups of P is compared, both ways. The
table gives, per decision rule, the cases called slower over all those A/A
comparisons (false positives), and with --planted (runs of the
-DDLB_PLANTED_SLOWDOWN=ON build, pooled P at most) how many of the planted
variant's cases each rule finds against every group of P A/A runs, and what
else it calls slower. --normalize compares as compare.py --normalize does
(bracket: memory-bound CPU cases by their bracketed fraction of the
ceiling). Verdicts: `slower` counts every slower verdict, `rerun` those on
a noisy case (compare.py's exit 3), `regressions` the rest (exit 1: a
false alarm in an A/A comparison). --plant FACTOR, without a planted build:
every A/A comparison is made again with NEW's planted-variant times
multiplied by FACTOR (its bytes per second and fraction of the ceiling
divided by it), so a slowdown of known size is judged against the real
noise of two different runs; the planted columns then count over those. First, the largest A/A change of the median per case:
the noise a rule must absorb.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dlbench import cli, venv  # noqa: E402

venv.reexec("aa_study")

from dlbench import compare as cmp  # noqa: E402
from dlbench.results import Results, load, split_processes  # noqa: E402

RULES = [  # (alpha, min_effect, noise_factor)
    (0.05, 0.00, 0.0), (0.01, 0.00, 0.0), (0.01, 0.05, 0.0), (0.01, 0.05, 3.0),
    (0.01, 0.08, 3.0), (0.01, 0.10, 3.0), (0.01, 0.15, 3.0),
]


def pooled(runs: list[Results]) -> Results:
    out = copy.deepcopy(runs[0])
    for r in runs[1:]:
        for name, case in r.cases.items():
            if name in out.cases:
                out.cases[name].runs += case.runs
    return out


def plant(results: Results, variant: str, factor: float) -> Results:
    """A copy of `results` whose `variant` cases ran `factor` times longer."""
    out = copy.deepcopy(results)
    for name, case in out.cases.items():
        if name.startswith(variant):
            for r in case.runs:
                for key in ("real_time", "cpu_time"):
                    r[key] *= factor
                for key in ("bytes_per_second", "frac_of_ceiling"):
                    if key in r:
                        r[key] /= factor
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--pool", type=int, default=1, help="runs pooled per side (default 1)")
    parser.add_argument("--planted", nargs="*", type=Path, default=[], help="runs of the planted build")
    parser.add_argument("--planted-variant", default="daxpy/cpu_loop/")
    parser.add_argument("--normalize", choices=list(cmp.NORMALIZATIONS))
    parser.add_argument("--plant", type=float, help="plant this slowdown factor in NEW's planted variant (e.g. 1.2)")
    args = parser.parse_args()
    runs = [run for p in args.runs for run in split_processes(load(p))]
    k = args.pool
    if len(runs) < 2 * k:
        parser.error(f"--pool {k} needs at least {2 * k} runs")
    pairs = []
    for a in itertools.combinations(range(len(runs)), k):
        rest = [i for i in range(len(runs)) if i not in a]
        for b in itertools.combinations(rest, k):
            pairs.append((pooled([runs[i] for i in a]), pooled([runs[i] for i in b])))
    groups = [pooled([runs[i] for i in a]) for a in itertools.combinations(range(len(runs)), k)]
    planted_runs = [run for p in args.planted for run in split_processes(load(p))]
    planted = pooled(planted_runs[:k]) if planted_runs else None
    # (BASE, NEW) comparisons of the planted columns
    if args.plant:
        planted_pairs = [(base, plant(new, args.planted_variant, args.plant)) for base, new in pairs]
    else:
        planted_pairs = [(base, planted) for base in groups] if planted is not None else []
    print(f"{len(runs)} A/A runs, pooled {k} per side: {len(pairs)} A/A comparisons")

    worst: dict[str, float] = {}
    norm = args.normalize
    for base, new in pairs:
        for v in cmp.compare(base, new, 1.0, 0.0, 0.0, norm):
            if v.change is not None:
                worst[v.name] = max(worst.get(v.name, 0.0), abs(v.change))
    print("\nlargest |A/A change of the median| per case:")
    for name, w in sorted(worst.items(), key=lambda kv: -kv[1]):
        print(f"  {w:6.1%}  {name}")

    print("\nA/A: slower verdicts / of them rerun (noisy) / regressions; planted: found as regression + "
          "as rerun / total, other regressions")
    print("alpha  min_effect  noise_factor  A/A slower/rerun/regr  planted regr + rerun / total  other regr")
    for alpha, min_effect, noise in RULES:
        aa = [v for base, new in pairs for v in cmp.compare(base, new, alpha, min_effect, noise, norm)
              if v.verdict == "slower"]
        fp = f"{len(aa)}/{sum(v.rerun for v in aa)}/{sum(v.regression for v in aa)}"
        found = rerun = total = other = 0
        for base, new in planted_pairs:
            for v in cmp.compare(base, new, alpha, min_effect, noise, norm):
                is_planted = v.name.startswith(args.planted_variant)
                total += is_planted
                found += is_planted and v.regression
                rerun += is_planted and v.rerun
                other += (not is_planted) and v.regression
        planted_cols = f"{found:>5} + {rerun:<4} / {total:<14} {other}" if planted_pairs else "-"
        print(f"{alpha:<6} {min_effect:<11} {noise:<13} {fp:<22} {planted_cols}")
    return 0


if __name__ == "__main__":
    cli.run(main)
