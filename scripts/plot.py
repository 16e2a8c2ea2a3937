#!/usr/bin/env python3
"""Draws dlbench's plots from Google Benchmark JSON (never console text).

    scripts/plot.py results/<machine>/<run>.json.gz [more.json ...] [--out-dir DIR]
    scripts/plot.py --history results/<machine>/history.jsonl [--out-dir DIR]
    scripts/plot.py --docs [--root DIR]

One PNG per figure, from every family module in scripts/dlbench/figures/
that finds its cases, into --out-dir, by default plots/<machine>/<run>/
under the current folder (plots/<machine>/history/ for --history; the
first file's machine and name without .json.gz): git ignores those folders,
so a run never overwrites the figures the docs embed. Errored cases are
drawn as missing points and listed; a run whose cases are flagged noisy is
named on stderr (scripts/quality.py's rule). A figure is never written over
a file git tracks, except by --docs.

--docs draws the committed figures the pages embed (plots/<stem>.png in
README.md and docs/*.md) from the committed runs the page's generated
blocks name (`<!-- BEGIN GENERATED <family> FROM results/... -->`, the runs
of its tables), so a page's figure and its table come from the same runs,
or from those a `<!-- FIGURES <family> FROM results/... -->` line names.
A figure no block of its page draws is named and left alone
(plots/placement.png is scripts/placement.py's). Each figure --docs writes
carries a stamp, a PNG text entry "dlbench-source" holding JSON: the
figure, its page and family, the runs it was drawn from with the sha256 of
each file's bytes, and the figure module with the sha256 of its source;
tests/test_plot_stamps.py checks the committed figures against it.

Exit 2 for a file that is not Google Benchmark JSON, or an out-dir that
would overwrite a tracked file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dlbench import cli, venv  # noqa: E402

venv.reexec("plot")

from dlbench import figures, history  # noqa: E402
from dlbench.quality import warn  # noqa: E402
from dlbench.results import ResultsError, load  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"<!-- BEGIN GENERATED (\S+?)(?: FROM ([^>\n]*?))? -->")
FIGURES = re.compile(r"<!-- FIGURES (\S+?) FROM ([^>\n]*?) -->")
IMAGE = re.compile(r"\]\((?:\.\./)?plots/([A-Za-z0-9_.-]+)\.png\)")


def run_stem(path: Path) -> str:
    """results/m/20261126T193042Z.json.gz -> 20261126T193042Z."""
    name = path.name
    for suffix in (".gz", ".json", ".jsonl"):
        name = name.removesuffix(suffix)
    return name or "run"


def tracked(paths: list[Path]) -> list[Path]:
    """Those of `paths` that git tracks (none outside a git work tree, or without git)."""
    if not paths:
        return []
    where = paths[0].resolve().parent
    while not where.exists():
        where = where.parent
    try:
        p = subprocess.run(["git", "-C", str(where), "ls-files", "--full-name", "-z", "--",
                            *(str(x.resolve()) for x in paths)], capture_output=True, text=True)
        top = subprocess.run(["git", "-C", str(where), "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True)
    except OSError:
        return []
    if p.returncode != 0 or top.returncode != 0:
        return []
    root = Path(top.stdout.strip())
    return [root / n for n in p.stdout.split("\0") if n]


class Refused(Exception):
    """A figure would overwrite a file git tracks (exit 2)."""


def save(figs: dict, out_dir: Path, overwrite_tracked: bool = False,
         metadata: dict[str, dict[str, str]] | None = None, optimize: bool = False) -> list[Path]:
    """Writes each figure to out_dir/<stem>.png, with the PNG text entries
    metadata[stem] where given (the --docs stamp); `optimize` has Pillow
    search for the smallest compression (same pixels, about 2% smaller,
    0.2 s a figure): the committed figures count against the tree's size
    budget, and it pays for their stamps several times over."""
    import matplotlib.pyplot as plt

    if not overwrite_tracked:
        clash = tracked([out_dir / f"{stem}.png" for stem in figs])
        if clash:
            for fig in figs.values():
                plt.close(fig)
            names = ", ".join(sorted(c.name for c in clash))
            raise Refused(f"{out_dir}: would overwrite {len(clash)} file(s) git tracks ({names}): the committed "
                          "figures are drawn by scripts/plot.py --docs; give another --out-dir")
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, fig in figs.items():
        path = out_dir / f"{stem}.png"
        fig.savefig(path, dpi=110, metadata=(metadata or {}).get(stem),
                    pil_kwargs={"optimize": True} if optimize else None)
        plt.close(fig)
        written.append(path)
    return written


def draw_all(results_list, out_dir: Path) -> list[Path]:
    figs = {}
    for module in figures.modules():
        figs.update(module.figures(results_list))
    return save(figs, out_dir)


def docs_pages(root: Path) -> list[Path]:
    return [p for p in [root / "README.md", *sorted((root / "docs").glob("*.md"))] if p.is_file()]


# The PNG text key of the stamp --docs puts on each figure it writes.
STAMP_KEY = "dlbench-source"


class DocsSourceError(Exception):
    """A run a page's block names cannot be read (exit 2); the message names the page and family."""


@dataclass
class DocFigure:
    """A committed figure a page embeds (plots/<stem>.png) and what --docs draws it from."""
    stem: str
    page: str  # the page, relative to the tree: docs/training.md
    family: str | None = None  # None: no generated block of its page draws it
    sources: tuple[str, ...] = ()  # the runs, as the page names them (relative to the tree)
    module: Path | None = None  # the family's figure module
    figure: object = None  # the matplotlib figure (docs_figures), closed by whoever takes it


def docs_figures(root: Path) -> Iterator[DocFigure]:
    """What --docs draws, page by page (README.md, then docs/*.md in name
    order): each figure a page embeds, from the first of its page's generated
    blocks whose family draws that figure from the block's runs (or from the
    runs a FIGURES line names for that family), with the figure drawn; then
    those of the page that no block draws (family None, no figure). A figure
    two pages embed comes once per page: the last page's is the one written.
    Raises DocsSourceError for a run that cannot be read."""
    import matplotlib.pyplot as plt

    modules = {m.FAMILY: m for m in figures.modules()}
    loaded: dict[str, object] = {}
    for page in docs_pages(root):
        text = page.read_text()
        wanted = set(IMAGE.findall(text))
        if not wanted:
            continue
        shown = page.relative_to(root).as_posix()
        drawn = set()
        # A page may draw a family's figures from other runs than its table's:
        # <!-- FIGURES <family> FROM results/... --> (one figure per machine
        # would not be the figure the page embeds).
        own = dict(FIGURES.findall(text))
        for family, sources in BLOCK.findall(text):
            sources = tuple(own.get(family, sources).split())
            if family not in modules or not sources:
                continue
            runs = []
            for name in sources:
                if name not in loaded:
                    try:
                        loaded[name] = load(root / name)
                    except ResultsError as e:
                        raise DocsSourceError(f"{shown}: GENERATED {family}: {e}") from e
                runs.append(loaded[name])
            figs = modules[family].figures(runs)
            for stem, fig in figs.items():
                if stem in wanted and stem not in drawn:
                    drawn.add(stem)
                    yield DocFigure(stem, shown, family, sources, Path(modules[family].__file__).resolve(), fig)
                else:
                    plt.close(fig)
        for stem in sorted(wanted - drawn):
            yield DocFigure(stem, shown)


def docs_sources(root: Path) -> dict[str, DocFigure]:
    """plots/<stem>.png -> what --docs draws it from now (docs_figures' last
    word on it: the last page whose block draws it, else its first page with
    family None), for every figure the pages embed. The figures are built
    (not rendered) to learn which stems a family draws, then closed."""
    import matplotlib.pyplot as plt

    out: dict[str, DocFigure] = {}
    for doc in docs_figures(root):
        if doc.figure is not None:
            plt.close(doc.figure)
            doc.figure = None
        if doc.family is not None or doc.stem not in out:
            out[doc.stem] = doc
    return out


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def stamp(root: Path, doc: DocFigure) -> dict[str, str]:
    """The PNG text entries of a figure --docs writes: what it was drawn from,
    JSON under STAMP_KEY (ASCII, so a plain tEXt chunk). The module's path
    is relative to this repository, the runs' to the tree drawn."""
    module = doc.module.relative_to(ROOT).as_posix() if doc.module.is_relative_to(ROOT) else str(doc.module)
    return {STAMP_KEY: json.dumps({
        "figure": f"plots/{doc.stem}.png",
        "page": doc.page,
        "family": doc.family,
        "runs": [{"file": name, "sha256": sha256_of(root / name)} for name in doc.sources],
        "module": module,
        "module_sha256": sha256_of(doc.module),
    })}


def draw_docs(root: Path) -> int:
    """The figures the pages embed, each from the runs its page's blocks name, stamped."""
    left = []
    try:
        for doc in docs_figures(root):
            if doc.figure is None:
                left.append(f"plots/{doc.stem}.png ({doc.page})")
                continue
            for p in save({doc.stem: doc.figure}, root / "plots", overwrite_tracked=True,
                          metadata={doc.stem: stamp(root, doc)}, optimize=True):
                print(f"{p.relative_to(root)}  ({doc.page}, {doc.family} from {' '.join(doc.sources)})")
    except DocsSourceError as e:
        print(f"plot.py: {e}", file=sys.stderr)
        return 2
    for what in left:
        print(f"plot.py: not drawn here (no generated block of its page draws it): {what}", file=sys.stderr)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=Path, help="Google Benchmark JSON files")
    parser.add_argument("--out-dir", type=Path,
                        help="where the PNGs go (default plots/<machine>/<run>/, git-ignored)")
    parser.add_argument("--docs", action="store_true",
                        help="redraw the figures README.md and docs/*.md embed from the runs their blocks name")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="with --docs: the tree whose pages and plots/ are meant (default: this repository)")
    parser.add_argument("--print-machine", action="store_true",
                        help="print the machine name recorded in the (single) file and exit")
    parser.add_argument("--history", action="store_true",
                        help="the file is a history.jsonl: draw each case's median over the runs")
    args = parser.parse_args(argv)
    if args.docs:
        if args.files or args.out_dir or args.history or args.print_machine:
            parser.error("--docs takes no files and no other option: the pages' markers name the runs")
        return draw_docs(args.root.resolve())
    if not args.files:
        parser.error("the following arguments are required: files (or --docs)")

    try:
        return draw(args)
    except Refused as e:
        print(f"plot.py: {e}", file=sys.stderr)
        return 2


def draw(args) -> int:
    if args.history:
        try:
            rows = [row for f in args.files for row in history.load(f)]
        except ResultsError as e:
            print(f"plot.py: {e}", file=sys.stderr)
            return 2
        out_dir = args.out_dir or Path("plots") / args.files[0].resolve().parent.name / "history"
        for p in save(history.figures(rows), out_dir):
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
        warn("plot.py", r)
        for c in r.errored():
            print(f"plot.py: {r.path}: not measured, drawn as missing: {c.name}: {c.error}", file=sys.stderr)

    out_dir = args.out_dir or Path("plots") / results_list[0].machine / run_stem(args.files[0])
    written = draw_all(results_list, out_dir)
    for p in written:
        print(p)
    if not written:
        print("plot.py: no family in these files has a figure", file=sys.stderr)
    return 0


if __name__ == "__main__":
    cli.run(main)
