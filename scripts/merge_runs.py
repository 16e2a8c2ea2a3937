#!/usr/bin/env python3
"""Merges runs of one binary made in separate processes into one file.

    scripts/merge_runs.py RUN1.json RUN2.json [...] -o MERGED.json[.gz]

Every repetition of every run is kept, tagged with its process_index; the
context is the first run's, with "processes" added. scripts/bench does this
when DLB_PROCESSES > 1. Inputs may be .json or .json.gz; the output is
gzip-compressed where its name ends in .gz. Exit 2 for a file that is not Google Benchmark JSON
or runs of different commits.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dlbench import cli, venv  # noqa: E402

venv.reexec("merge_runs")

from dlbench.results import merge_files, write_document  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("-o", "--out", type=Path, required=True)
    args = parser.parse_args(argv)
    merged = merge_files(args.runs)  # unreadable or of different commits: cli.run exits 2 naming the file
    write_document(args.out, merged)
    return 0


if __name__ == "__main__":
    cli.run(main)
