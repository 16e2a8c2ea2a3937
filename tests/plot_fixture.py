"""Helpers for the figure tests that run on committed Google Benchmark fixtures."""

import json
from pathlib import Path


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
