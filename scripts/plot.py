#!/usr/bin/env python3
"""Draws dlbench's plots from Google Benchmark JSON (never console text).

    scripts/plot.py results/<machine>/<run>.json.gz [more.json ...] [--out-dir plots]
    scripts/plot.py --history results/<machine>/history.jsonl [--out-dir plots]

One PNG per figure into --out-dir, from every family module in
scripts/dlbench/figures/ that finds its cases. Errored cases are drawn as
missing points and listed. Exit 2 for a file that is not Google Benchmark
JSON.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dlbench import venv  # noqa: E402

venv.reexec("plot")

from dlbench import figures, history  # noqa: E402
from dlbench.results import ResultsError, load  # noqa: E402


def save(figs: dict, out_dir: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, fig in figs.items():
        path = out_dir / f"{stem}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def draw_all(results_list, out_dir: Path) -> list[Path]:
    written = []
    for module in figures.modules():
        written += save(module.figures(results_list), out_dir)
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", type=Path, help="Google Benchmark JSON files")
    parser.add_argument("--out-dir", type=Path, default=Path("plots"))
    parser.add_argument("--print-machine", action="store_true",
                        help="print the machine name recorded in the (single) file and exit")
    parser.add_argument("--history", action="store_true",
                        help="the file is a history.jsonl: draw each case's median over the runs")
    args = parser.parse_args(argv)

    if args.history:
        try:
            rows = [row for f in args.files for row in history.load(f)]
        except ResultsError as e:
            print(f"plot.py: {e}", file=sys.stderr)
            return 2
        for p in save(history.figures(rows), args.out_dir):
            print(p)
        return 0

    try:
        results_list = [load(f) for f in args.files]
    except ResultsError as e:
        print(f"plot.py: {e}", file=sys.stderr)
        return 2
    if args.print_machine:
        print(results_list[0].machine)
        return 0
    for r in results_list:
        if not r.cases:
            print(f"plot.py: {r.path}: no benchmark cases", file=sys.stderr)
            return 2
        for c in r.errored():
            print(f"plot.py: {r.path}: not measured, drawn as missing: {c.name}: {c.error}", file=sys.stderr)

    written = draw_all(results_list, args.out_dir)
    for p in written:
        print(p)
    if not written:
        print("plot.py: no family in these files has a figure", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
