"""Helpers for the figure tests that run on committed Google Benchmark fixtures."""

import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

PLOT = Path(__file__).resolve().parents[1] / "scripts" / "plot.py"


def run_plot(*args):
    """scripts/plot.py with `args`, its output captured."""
    return subprocess.run([sys.executable, str(PLOT), *map(str, args)], capture_output=True, text=True)


def assert_plot_writes_png(test, fixture: Path, figure: str) -> None:
    """scripts/plot.py on `fixture` succeeds and writes <figure>.png, a PNG."""
    with tempfile.TemporaryDirectory() as d:
        p = run_plot(fixture, "--out-dir", d)
        test.assertEqual(p.returncode, 0, p.stderr)
        png = Path(d) / f"{figure}.png"
        test.assertTrue(png.exists(), png)
        test.assertEqual(png.read_bytes()[:8], b"\x89PNG\r\n\x1a\n")


def with_planted_error(fixture: Path, target: str) -> dict:
    """The fixture's JSON with every repetition of case `target` (a name
    without the time suffix) replaced by one errored entry, as bench writes a
    case that failed validation."""
    data = json.loads(fixture.read_text())
    for entry in data["benchmarks"]:
        if entry["run_name"].startswith(target + "/"):
            entry.clear()
            entry.update({"name": target + "/real_time", "run_name": target + "/real_time",
                          "run_type": "iteration", "error_occurred": True,
                          "error_message": "WRONG RESULT: planted by the test"})
    return data


def write_planted_error(fixture: Path, target: str, directory: str) -> Path:
    """with_planted_error's JSON, written to <directory>/errored.json."""
    bad = Path(directory) / "errored.json"
    bad.write_text(json.dumps(with_planted_error(fixture, target)))
    return bad


def results_with_planted_error(fixture: Path, target: str):
    """with_planted_error's JSON as the scripts read a run (dlbench.results)."""
    from dlbench.results import from_document
    return from_document(with_planted_error(fixture, target), fixture)


def assert_drawn_missing(test, ax, label: str, x, target: str) -> None:
    """On panel `ax` the errored case `target` is a gap in line `label` at x
    (NaN, not a value made up) and is listed on the panel."""
    line = next(l for l in ax.get_lines() if l.get_label() == label)
    test.assertTrue(math.isnan(line.get_ydata()[list(line.get_xdata()).index(x)]))
    test.assertIn(target, " ".join(t.get_text() for t in ax.texts))
