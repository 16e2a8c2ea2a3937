#!/usr/bin/env python3
"""Rewrites the generated tables of README.md and docs/*.md from committed results.

    scripts/readme.py [--check] [--families networks,softmax] [--root DIR]
    scripts/readme.py results/<machine>/<run>.json.gz [more.json ...] [--readme PAGE] [--check]
                      [--families networks,softmax]

A page marks each generated block with
    <!-- BEGIN GENERATED <family> FROM results/a.json.gz results/b.json.gz -->
    ...
    <!-- END GENERATED <family> -->
and the block is replaced by the family module's table() for every file
that has cases of that family, each headed by the file it comes from.
Tables are never typed in by hand.

With no files, every block of README.md and docs/*.md (under --root, the
repository by default) is rewritten from the files its own marker names,
paths relative to the root; a block with no FROM says there are no results
yet. --check changes nothing and exits 1 naming each page that is stale
(what CI runs). A named file that is missing or not Google Benchmark JSON
is exit 2, naming it.

With files, the blocks of one page (--readme, README.md by default) are
rewritten from those files instead, and each rewritten marker then names
the files its tables came from. --families rewrites only those blocks (the
others keep the run they were generated from).
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dlbench import cli, venv  # noqa: E402

venv.reexec("readme")

from dlbench import figures  # noqa: E402
from dlbench.quality import quality  # noqa: E402
from dlbench.results import ResultsError, load  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"<!-- BEGIN GENERATED (\S+?)(?: FROM ([^>\n]*?))? -->\n(.*?)<!-- END GENERATED \1 -->", re.S)
NO_RESULTS = "(no results for this family in the given files)\n"


class InputError(Exception):
    """Bad input: a missing or unreadable source, an unknown family (exit 2)."""


@dataclasses.dataclass
class Block:
    family: str
    sources: list[str]  # the files the BEGIN marker names, as written


def blocks(text: str) -> list[Block]:
    """The generated blocks of a page, in order, with the files their markers name."""
    return [Block(m.group(1), (m.group(2) or "").split()) for m in BLOCK.finditer(text)]


def tables() -> dict:
    return {m.FAMILY: m.table for m in figures.modules() if hasattr(m, "table")}


def block_text(family: str, table, results_list) -> tuple[str, list]:
    """The block's content from `results_list`, and the results that gave a table."""
    parts, used = [], []
    for r in results_list:
        body = table(r)
        if body:
            commit = r.context.get("git_commit", "unknown")
            parts.append(f"From `{r.path.as_posix()}` (machine `{r.machine}`, commit `{commit[:12]}`; "
                         f"machine state: {quality(r).summary()}):\n\n{body}\n")
            used.append(r)
    return ("\n".join(parts) if parts else NO_RESULTS), used


def marker(family: str, sources: list[str]) -> str:
    return f"<!-- BEGIN GENERATED {family}{' FROM ' + ' '.join(sources) if sources else ''} -->\n"


def rewrite_blocks(text: str, families: set[str] | None, where: str, block) -> str:
    """`text` with its blocks (those of `families`, default all) rewritten:
    block(family, its table, the files its marker names) gives the files the
    new marker names and the content. `where` starts the error for a block
    of an unknown family."""
    known = tables()

    def replace(match: re.Match) -> str:
        family = match.group(1)
        if family not in known:
            raise InputError(f"{where}a block for unknown family {family!r} (known: {', '.join(sorted(known))})")
        if families is not None and family not in families:
            return match.group(0)
        sources, content = block(family, known[family], (match.group(2) or "").split())
        return marker(family, sources) + content + f"<!-- END GENERATED {family} -->"

    return BLOCK.sub(replace, text)


def render(text: str, results_list, families: set[str] | None = None) -> str:
    """`text` with its blocks (those of `families`, default all) rewritten from
    the given results; their markers name the files that gave a table."""

    def block(family: str, table, _named: list[str]):
        content, used = block_text(family, table, results_list)
        return [r.path.as_posix() for r in used], content

    return rewrite_blocks(text, families, "", block)


class Sources:
    """Result files named by markers, loaded once, paths relative to `root`."""

    def __init__(self, root: Path):
        self.root = root
        self.loaded: dict[str, object] = {}

    def get(self, name: str, where: str):
        if name not in self.loaded:
            path = self.root / name
            if not path.is_file():
                raise InputError(f"{where}: {name}: no such results file")
            try:
                r = load(path)
            except ResultsError as e:
                raise InputError(f"{where}: {e}") from None
            self.loaded[name] = dataclasses.replace(r, path=Path(name))
        return self.loaded[name]


def render_own(text: str, page: str, sources: Sources, families: set[str] | None = None) -> str:
    """`text` with each block rewritten from the files its own marker names."""

    def block(family: str, table, names: list[str]):
        results_list = [sources.get(n, f"{page}: GENERATED {family}") for n in names]
        content, _ = block_text(family, table, results_list)
        return names, content

    return rewrite_blocks(text, families, f"{page}: ", block)


def pages(root: Path) -> list[Path]:
    found = [root / "README.md"] if (root / "README.md").is_file() else []
    return found + sorted((root / "docs").glob("*.md"))


def parse_families(text: str | None) -> set[str] | None:
    if not text:
        return None
    families = set(text.split(","))
    known = set(tables())
    if families - known:
        raise InputError(f"unknown families {', '.join(sorted(families - known))} (known: {', '.join(sorted(known))})")
    return families


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=Path,
                        help="results to generate one page's blocks from (default: the files each marker names)")
    parser.add_argument("--readme", type=Path, help="the page the given files rewrite (default README.md)")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="with no files: the tree whose README.md and docs/*.md are rewritten (default: this repository)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 naming each stale page")
    parser.add_argument("--families", help="comma-separated blocks to rewrite (default: all)")
    args = parser.parse_args(argv)
    try:
        families = parse_families(args.families)
        if args.files:
            results_list = []
            for f in args.files:
                try:
                    results_list.append(load(f))
                except ResultsError as e:
                    raise InputError(str(e)) from None
            page = args.readme or Path("README.md")
            todo = [(page, page, lambda text, _page: render(text, results_list, families))]
        else:
            if args.readme:
                raise InputError("--readme needs result files; without them every page's markers name their own")
            root = args.root
            sources = Sources(root)
            todo = [(p, p.relative_to(root), lambda text, shown: render_own(text, shown.as_posix(), sources, families))
                    for p in pages(root)]
        stale = []
        updates = []
        for path, shown, rewrite in todo:
            try:
                old = path.read_text()
            except OSError as e:
                raise InputError(f"{shown}: cannot read: {e.strerror or e}") from None
            new = rewrite(old, shown)
            if new != old:
                stale.append(shown)
                updates.append((path, new))
    except InputError as e:
        print(f"readme.py: {e}", file=sys.stderr)
        return 2
    if args.check:
        for shown in stale:
            what = ", ".join(map(str, args.files)) if args.files else "the results its markers name"
            print(f"readme.py: {shown} is out of date with {what} (run scripts/readme.py to rewrite it)",
                  file=sys.stderr)
        return 1 if stale else 0
    for path, new in updates:
        path.write_text(new)
    return 0


if __name__ == "__main__":
    cli.run(main)
