#!/usr/bin/env python3
"""Says whether a run can be trusted: the machine state bench recorded.

    scripts/quality.py RUN.json [more.json ...] [--cases]

Per file: `clean`, or `NOISY` and why (cases whose repetitions saw another
process competing for the CPUs, stolen time or a moving memory ceiling; a
ceiling whose repetitions spread; a ceiling that moved during the run), or
that the run predates the recording. --cases lists every noisy case with its
reason. The rule is in scripts/dlbench/quality.py.

Exit codes: 0 every file clean (or not recorded), 1 a file noisy, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dlbench import cli, venv  # noqa: E402

venv.reexec("quality")

from dlbench.quality import quality  # noqa: E402
from dlbench.results import ResultsError, load  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--cases", action="store_true", help="list every noisy case and why")
    args = parser.parse_args(argv)
    noisy = False
    for path in args.files:
        try:
            results = load(path)
        except ResultsError as e:
            print(f"quality.py: {e}", file=sys.stderr)
            return 2
        q = quality(results)
        start = results.context.get("machine_load_at_start")
        print(f"{path}: {q.summary()}" + (f" (at start: {start})" if start else ""))
        if args.cases:
            for name, why in sorted(q.noisy_cases.items()):
                print(f"  {name}: {why}")
        noisy |= q.recorded and not q.clean
    return 1 if noisy else 0


if __name__ == "__main__":
    cli.run(main)
