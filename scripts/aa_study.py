#!/usr/bin/env python3
"""How often does compare.py call identical code slower? A/A study.

    scripts/aa_study.py RUN1.json RUN2.json [RUN3.json ...] [--planted PLANTED.json]

The runs are repeated runs of one binary on one machine (same commit, same
filter, --benchmark_repetitions=10). Every ordered pair (i, j) is compared
as BASE i, NEW j with several decision rules; the table gives, per rule, the
false positives (cases called slower) over all pairs, and with --planted the
planted variant's cases it finds and anything else it calls slower. Also the
largest A/A change of the median per case: the noise the rule must absorb.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dlbench import compare as cmp  # noqa: E402
from dlbench.results import load  # noqa: E402

RULES = [  # (alpha, min_effect, noise_factor)
    (0.05, 0.00, 0.0), (0.01, 0.00, 0.0), (0.01, 0.02, 0.0), (0.01, 0.05, 0.0), (0.01, 0.10, 0.0),
    (0.01, 0.05, 3.0), (0.01, 0.10, 3.0), (0.01, 0.05, 5.0),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--planted", type=Path, help="a run of the planted-slowdown build")
    parser.add_argument("--planted-variant", default="daxpy/cpu_loop/")
    args = parser.parse_args()
    runs = [load(p) for p in args.runs]
    pairs = list(itertools.permutations(range(len(runs)), 2))
    print(f"{len(runs)} A/A runs, {len(pairs)} ordered pairs, {len(runs[0].cases)} cases each")

    worst: dict[str, float] = {}
    for i, j in pairs:
        for v in cmp.compare(runs[i], runs[j], 1.0, 0.0, 0.0):
            if v.change is not None:
                worst[v.name] = max(worst.get(v.name, 0.0), abs(v.change))
    print("\nlargest |A/A change of the median| per case:")
    for name, w in sorted(worst.items(), key=lambda kv: -kv[1]):
        print(f"  {w:6.1%}  {name}")

    planted = load(args.planted) if args.planted else None
    print("\nalpha  min_effect  noise_factor  A/A slower (all pairs)  planted found / total  other slower")
    for alpha, min_effect, noise in RULES:
        fp = sum(v.verdict == "slower" for i, j in pairs for v in cmp.compare(runs[i], runs[j], alpha, min_effect, noise))
        found = total = other = 0
        if planted is not None:
            for base in runs:
                for v in cmp.compare(base, planted, alpha, min_effect, noise):
                    is_planted = v.name.startswith(args.planted_variant)
                    total += is_planted
                    found += is_planted and v.verdict == "slower"
                    other += (not is_planted) and v.verdict == "slower"
        print(f"{alpha:<6} {min_effect:<11} {noise:<13} {fp:<23} "
              + (f"{found} / {total:<17} {other}" if planted else "-"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
