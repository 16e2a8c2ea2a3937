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
Tables are never typed in by hand. A `durations` block is no family's: it
says how long each run its marker names took, from the wall time the run
recorded (dlbench_wall_s in its context, scripts/dlbench/walltime.py), or
for a GPU kit run from before that, from the kit's summary.txt committed
beside its files (its "bench FAMILY: N cases in Ss" lines).

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

from dlbench import figures, walltime  # noqa: E402
from dlbench.quality import quality  # noqa: E402
from dlbench.results import ResultsError, load, repetitions, split_processes  # noqa: E402

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


DURATIONS = "durations"  # not a family: how long the named runs took


def tables() -> dict:
    known = {m.FAMILY: m.table for m in figures.modules() if hasattr(m, "table")}
    known[DURATIONS] = None  # durations_text, from every named source at once
    return known


def _load_figure(text: str) -> float | None:
    """The 1-minute load average of "loadavg 3.24 6.59 3.35; cpu pressure ..."
    (the binary's machine_load_at_start) or of "3.24 6.59 3.35"."""
    m = re.match(r"(?:loadavg )?([\d.]+)", str(text or ""))
    return float(m.group(1)) if m else None


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 600 else f"{seconds / 60:.1f} minutes"


def _processes(context: dict) -> list[tuple]:
    """(what ran, its wall time or None) for each process a file holds."""
    if isinstance(context.get("process_wall_s"), list):
        runs = context.get("process_runs") or [None] * len(context["process_wall_s"])
        return [(run, w if isinstance(w, (int, float)) else None) for run, w in zip(runs, context["process_wall_s"])]
    return [(context.get(walltime.RUN), walltime.wall_seconds(context))]


def durations_text(sources: list) -> str:
    """A durations block's content: per run, a line with its suite, cases
    and wall time, as the run recorded it (dlbench_wall_s, or the GPU kit's
    summary), and the load average at its start and end: near or above the
    number of CPUs, other work shared them and the run took longer than it
    would alone (the page's own prose says so).
    `sources` are (name, Results) for result files, (name, str) for a GPU kit
    summary.txt. The result files of one run (the kit's families,
    results/<machine>/<stamp>-<family>.json.gz: one folder and stamp) are
    summed into one line."""
    groups: dict[tuple, list] = {}
    lines = []
    for name, source in sources:
        if isinstance(source, str):
            families = walltime.kit_families(source)
            cut = [f for f, (_, _, was_cut) in families.items() if was_cut]
            seconds = sum(s for _, s, _ in families.values())
            lines.append(f"- the `gpu-quick` suite, `scripts/gpu-kit run`'s bench step ({len(families)} families, "
                         f"one process each): {sum(c for c, _, _ in families.values())} cases in "
                         f"{_duration(seconds)} on `{Path(name).parent.name}`"
                         + (f" ({', '.join(cut)} cut at its limit)" if cut else "")
                         + f", by the kit's own clock (its summary, `{name}`): "
                         + ", ".join(f"{f} {c} in {s} s" for f, (c, s, _) in families.items()) + ".")
            continue
        key = (Path(name).parent, Path(name).name.split("-")[0].split(".")[0])
        if key not in groups:
            groups[key] = []
            lines.append(key)
        groups[key].append((name, source))
    out = []
    for line in lines:
        if isinstance(line, str):
            out.append(line)
            continue
        runs = groups[line]
        machine, suite = runs[0][1].machine, runs[0][1].context.get("suite", "?")
        commit = str(runs[0][1].context.get("git_commit", "unknown"))
        files = ", ".join(f"`{name}`" for name, _ in runs)
        # The suite's own cases and processes: not the peers (scripts/peers,
        # timed apart as dlbench_peers_wall_s or in a file of their own, and
        # merged into the kit's networks file too: each process counted once).
        cases = len({n for _, r in runs for n, c in r.cases.items() if not c.is_peer})
        reps = max(repetitions(one) for _, r in runs for one in split_processes(r))  # per process
        walls = [w for run, w in dict.fromkeys(p for _, r in runs for p in _processes(r.context))
                 if not str(run).startswith(("scripts/peers", "scripts/gpu-kit peers"))]
        what = (f"- the `{suite}` suite ({cases} cases, {reps} repetitions"
                + (f", {len(runs)} files" if len(runs) > 1 else "") + f") on `{machine}`")
        if any(w is None for w in walls):
            out.append(f"{what}: its wall time is not recorded (no `dlbench_wall_s` in its context; {files}, "
                       f"commit `{commit[:12]}`).")
            continue
        first, last = runs[0][1].context, runs[-1][1].context
        start, end = _load_figure(first.get("machine_load_at_start")), _load_figure(last.get(walltime.LOAD_AT_END))
        load = ""
        if start is not None and end is not None:
            load = (f", load average {start:.1f} at its start and {end:.1f} at its end "
                    f"on {first.get('num_cpus', '?')} CPUs")
        noisy = sum(len(quality(r).noisy_cases) for _, r in runs)
        out.append(f"{what}: {_duration(sum(walls))}{load} ({files}, commit `{commit[:12]}`, "
                   f"{noisy} cases flagged noisy).")
    return "\n".join(out) + "\n" if out else NO_RESULTS


def block_text(family: str, table, results_list) -> tuple[str, list]:
    """The block's content from `results_list`, and the results that gave a table."""
    if family == DURATIONS:
        return durations_text([(r.path.as_posix(), r) for r in results_list]), list(results_list)
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
            if name.endswith("summary.txt"):  # a GPU kit's summary (durations blocks)
                text = path.read_text(errors="replace")
                if not walltime.kit_families(text):
                    raise InputError(f"{where}: {name}: no bench family line (not a GPU kit summary.txt)")
                self.loaded[name] = text
                return text
            try:
                r = load(path)
            except ResultsError as e:
                raise InputError(f"{where}: {e}") from None
            self.loaded[name] = dataclasses.replace(r, path=Path(name))
        return self.loaded[name]


def render_own(text: str, page: str, sources: Sources, families: set[str] | None = None) -> str:
    """`text` with each block rewritten from the files its own marker names."""

    def block(family: str, table, names: list[str]):
        loaded = [sources.get(n, f"{page}: GENERATED {family}") for n in names]
        if family == DURATIONS:
            return names, durations_text(list(zip(names, loaded)))
        if any(isinstance(r, str) for r in loaded):
            raise InputError(f"{page}: GENERATED {family}: a summary.txt gives durations blocks only")
        content, _ = block_text(family, table, loaded)
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
