#!/usr/bin/env python3
"""Appends a run to its machine's history: results/<machine>/history.jsonl.

    scripts/history.py results/<machine>/<run>.json.gz [--history PATH]

One line per case (commit, date, median seconds per call, repetitions);
`scripts/bench --history` calls this after a run, `scripts/plot.py --history`
draws it. Exit 2 for a file that is not Google Benchmark JSON.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dlbench import cli, venv  # noqa: E402

venv.reexec("history")

from dlbench import history  # noqa: E402
from dlbench.results import load  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path)
    parser.add_argument("--history", type=Path, help="default: results/<machine>/history.jsonl")
    args = parser.parse_args(argv)
    results = load(args.run)  # unreadable: cli.run exits 2 naming the file
    target = args.history or Path("results") / results.machine / "history.jsonl"
    n = history.append(results, target)
    print(f"history.py: {n} cases appended to {target}")
    return 0


if __name__ == "__main__":
    cli.run(main)
