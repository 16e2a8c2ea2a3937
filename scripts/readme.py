#!/usr/bin/env python3
"""Rewrites the generated tables in README.md from committed results.

    scripts/readme.py results/<machine>/<run>.json.gz [more.json ...] [--readme README.md] [--check]
                      [--families networks,softmax]

README.md marks each generated block with
    <!-- BEGIN GENERATED <family> --> ... <!-- END GENERATED <family> -->
and the block is replaced by the family module's table() for every given
file that has cases of that family, each headed by the file it comes from.
Tables are never typed in by hand. --check exits 1 if README.md is stale.
--families rewrites only those blocks (the others keep the run they were
generated from: a family measured on another machine or at another time).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dlbench import venv  # noqa: E402

venv.reexec("readme")

from dlbench import figures  # noqa: E402
from dlbench.quality import quality  # noqa: E402
from dlbench.results import ResultsError, load  # noqa: E402

BLOCK = re.compile(r"(<!-- BEGIN GENERATED (\S+) -->\n)(.*?)(<!-- END GENERATED \2 -->)", re.S)


def render(text: str, results_list, families: set[str] | None = None) -> str:
    tables = {m.FAMILY: m.table for m in figures.modules() if hasattr(m, "table")}

    def replace(match: re.Match) -> str:
        family = match.group(2)
        if family not in tables:
            raise SystemExit(f"readme.py: README block for unknown family {family!r}")
        if families is not None and family not in families:
            return match.group(0)
        parts = []
        for r in results_list:
            body = tables[family](r)
            if body:
                commit = r.context.get("git_commit", "unknown")
                parts.append(f"From `{r.path.as_posix()}` (machine `{r.machine}`, commit `{commit[:12]}`; "
                             f"machine state: {quality(r).summary()}):\n\n{body}\n")
        content = "\n".join(parts) if parts else "(no results for this family in the given files)\n"
        return match.group(1) + content + match.group(4)

    return BLOCK.sub(replace, text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--readme", type=Path, default=Path("README.md"))
    parser.add_argument("--check", action="store_true", help="exit 1 if the README is not up to date")
    parser.add_argument("--families", help="comma-separated README blocks to rewrite (default: all)")
    args = parser.parse_args(argv)
    try:
        results_list = [load(f) for f in args.files]
    except ResultsError as e:
        print(f"readme.py: {e}", file=sys.stderr)
        return 2
    old = args.readme.read_text()
    families = None
    if args.families:
        families = set(args.families.split(","))
        known = {m.FAMILY for m in figures.modules() if hasattr(m, "table")}
        if families - known:
            print(f"readme.py: unknown families {', '.join(sorted(families - known))} (known: {', '.join(sorted(known))})",
                  file=sys.stderr)
            return 2
    new = render(old, results_list, families)
    if args.check:
        if new != old:
            print(f"readme.py: {args.readme} is out of date with {', '.join(map(str, args.files))}", file=sys.stderr)
            return 1
        return 0
    args.readme.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
