#!/usr/bin/env python3
"""Where the time of a forward pass goes, from a run's <net>_layer cases: the
top ops per backend (PyTorch profiler's key_averages() table, for batch 1, 16
and 64 side by side) or, with --roofline, every layer against the run's
roofline ceilings.

    scripts/profile.py results/<machine>/<run>.json.gz [--network resnet20] [--backend cpu_onednn]
                       [--batch 1,16,64] [--by-shape] [--row-limit 10] [--roofline]

Make the cases with, for example,
    build/bench --benchmark_filter='^resnet20_layer/' --benchmark_out=layers.json

Exit 2 for a file that is not Google Benchmark JSON, an unknown network or
backend, or a run without layer cases.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dlbench import cli, venv  # noqa: E402

venv.reexec("profile")

from dlbench.figures import layers  # noqa: E402
from dlbench.quality import warn  # noqa: E402
from dlbench.results import ResultsError, load  # noqa: E402


def chosen(wanted: str | None, present: list[str], where: str) -> list[str] | None:
    """[wanted] if present, all of present if nothing is wanted, None (after saying why) if absent."""
    if wanted is None:
        return present
    if wanted in present:
        return [wanted]
    print(f"profile.py: no layer cases of {wanted!r} {where} (there are: {', '.join(present)})", file=sys.stderr)
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", type=Path, help="Google Benchmark JSON with <net>_layer cases")
    parser.add_argument("--network", help="one network (default: every network in the file)")
    parser.add_argument("--backend", help="one backend, e.g. cpu_onednn (default: every backend)")
    parser.add_argument("--batch", default="1,16,64", help="batch sizes, comma-separated (default 1,16,64)")
    parser.add_argument("--by-shape", action="store_true", help="group by op and input shape, not by op alone")
    parser.add_argument("--row-limit", type=int, default=10, help="rows per table (default 10)")
    parser.add_argument("--roofline", action="store_true",
                        help="per layer: GFLOP/s, GB/s and the fraction of the run's roofline reached")
    args = parser.parse_args(argv)
    try:
        results = load(args.file)
        batches = tuple(int(b) for b in args.batch.split(","))
    except ResultsError as e:
        print(f"profile.py: {e}", file=sys.stderr)
        return 2
    except ValueError:
        print(f"profile.py: --batch {args.batch!r}: not comma-separated integers", file=sys.stderr)
        return 2
    if args.row_limit < 1:
        print("profile.py: --row-limit must be at least 1", file=sys.stderr)
        return 2
    warn("profile.py", results)
    networks = [n for n in layers.NETWORKS if layers.variants_of(results, n)]
    if not networks:
        print(f"profile.py: {args.file}: no <network>_layer cases (run bench with "
              "--benchmark_filter='^resnet20_layer/')", file=sys.stderr)
        return 2
    networks = chosen(args.network, networks, f"in {args.file}")
    if networks is None:
        return 2
    printed = 0
    for network in networks:
        variants = chosen(args.backend, layers.variants_of(results, network), f"of {network}")
        if variants is None:
            return 2
        for v in variants:
            if args.roofline:
                for b in batches:
                    body = layers.roofline_table(results, network, v, b)
                    if body:
                        print(f"{network} {v} batch {b}\n\n{body}\n")
                        printed += 1
            else:
                body = layers.top10_table(results, network, v, batches, args.by_shape, args.row_limit)
                if body:
                    print(f"{network} {v}\n\n{body}\n")
                    printed += 1
    if not printed:
        print(f"profile.py: no complete layer profile at batch {args.batch} in {args.file}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    cli.run(main)
