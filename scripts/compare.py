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
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dlbench import cli, venv  # noqa: E402

venv.reexec("compare")

from dlbench import compare as cmp  # noqa: E402
from dlbench.results import ResultsError, load  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base", type=Path)
    parser.add_argument("new", type=Path)
    cmp.add_options(parser)
    args = parser.parse_args(argv)

    try:
        base, new = load(args.base), load(args.new)
    except ResultsError as e:
        print(f"compare.py: {e}", file=sys.stderr)
        return 2
    return cmp.report(base, new, str(args.base), str(args.new), args, "compare.py")


if __name__ == "__main__":
    cli.run(main)
