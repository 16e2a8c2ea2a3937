"""results/<machine>/history.jsonl: one line per case per run, appended by
`scripts/bench --history`, drawn by `scripts/plot.py --history`.

A line: {"commit", "date", "machine", "case", "median_s", "repetitions", "error"}
(median_s: median seconds per call over the repetitions; error: the case's
error message, or null)."""

from __future__ import annotations

import json
from pathlib import Path

from dlbench.names import split_name
from dlbench.results import Results, ResultsError


def lines_for(results: Results) -> list[dict]:
    commit = str(results.context.get("git_commit", "unknown"))
    date = str(results.context.get("date", ""))
    out = []
    for case in sorted(results.cases.values(), key=lambda c: c.name):
        out.append({"commit": commit, "date": date, "machine": results.machine, "case": case.name,
                    "median_s": case.median_seconds() if case.error is None else None,
                    "repetitions": len(case.runs), "error": case.error})
    return out


def append(results: Results, history: Path) -> int:
    """Appends the run's lines; returns how many."""
    lines = lines_for(results)
    history.parent.mkdir(parents=True, exist_ok=True)
    with history.open("a") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    return len(lines)


def load(history: Path) -> list[dict]:
    try:
        text = history.read_text()
    except OSError as e:
        raise ResultsError(f"{history}: cannot read: {e.strerror}") from None
    rows = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ResultsError(f"{history}:{i}: not a JSON line ({e.msg})") from None
        if not isinstance(row, dict) or not {"commit", "case", "median_s"} <= row.keys():
            raise ResultsError(f"{history}:{i}: not a history line (needs commit, case, median_s)")
        rows.append(row)
    return rows


def figures(rows: list[dict]):
    """One figure per op: each case's median time over the runs (x: runs in
    file order, labelled with the commit)."""
    from dlbench.figures._common import new_figure

    runs: list[tuple[str, str]] = []  # (commit, date) in order of appearance
    for r in rows:
        key = (r["commit"], r.get("date", ""))
        if key not in runs:
            runs.append(key)
    index = {k: i for i, k in enumerate(runs)}
    by_op: dict[str, dict[str, tuple[list[int], list[float]]]] = {}
    for r in rows:
        op = split_name(r["case"]).op
        xs, ys = by_op.setdefault(op, {}).setdefault(r["case"], ([], []))
        xs.append(index[(r["commit"], r.get("date", ""))])
        ys.append(r["median_s"] * 1e3 if r["median_s"] is not None else float("nan"))
    figs = {}
    for op, cases in sorted(by_op.items()):
        fig, ax = new_figure(f"{op}: median time per call over runs", width=9, height=5.5)
        for case, (xs, ys) in sorted(cases.items()):
            ax.plot(xs, ys, marker="o", markersize=3, label=split_name(case).rest)
        ax.set_yscale("log")
        ax.set_ylabel("ms per call (median of repetitions)")
        ax.set_xticks(range(len(runs)), [c[:8] for c, _ in runs], rotation=45, fontsize=7)
        ax.set_xlabel("run (commit)")
        if len(cases) <= 24:
            ax.legend(fontsize=6, ncols=2)
        figs[f"history_{op}"] = fig
    return figs
