"""How long a run took, recorded in its JSON context beside the machine.

Google Benchmark's context says when a run started (`date`), not how long
it took; the durations the README and the docs state come from these keys
(scripts/readme.py's `durations` blocks), never typed in:

    dlbench_wall_s        seconds of wall time the run's benchmark processes took
                          (scripts/bench: every process, not the install, build or
                          plots; the GPU kit: one family's process)
    dlbench_run           what ran: the command and its arguments
    dlbench_load_at_end   /proc/loadavg's three figures when it ended (the binary
                          records machine_load_at_start itself)

Standard library only (the GPU kit runs it in the GPU machine's python3):

    python3 scripts/dlbench/walltime.py record RUN.json[.gz] --wall-s S --run TEXT [--key KEY]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from dlbench.results import ResultsError, read_document, write_document  # noqa: E402

WALL = "dlbench_wall_s"
RUN = "dlbench_run"
LOAD_AT_END = "dlbench_load_at_end"


def loadavg() -> str | None:
    """The 1, 5 and 15 minute load averages, as /proc/loadavg gives them;
    None where there is no /proc (the figure is then left out, never made up)."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return None


def record(context: dict, wall_s: float, run: str, key: str = WALL) -> None:
    """Adds a run's wall time (and what ran, and the load at its end) to `context`."""
    context[key] = round(float(wall_s), 1)
    if key == WALL:
        context[RUN] = run
    else:
        context[key.removesuffix("_wall_s") + "_run"] = run
    load = loadavg()
    if load is not None:
        context[LOAD_AT_END if key == WALL else key.removesuffix("_wall_s") + "_load_at_end"] = load


def wall_seconds(context: dict) -> float | None:
    """The run's recorded wall time, None where it predates the record."""
    value = context.get(WALL)
    return float(value) if isinstance(value, (int, float)) else None


# The GPU kit's summary.txt line for a bench family (dlbench.kit's
# family_verdict): "bench networks: 95 cases in 43s (limit 98s)", with
# "FAIL: " before it where cases were lost, or "FAIL: bench copy: over its
# 65s limit: 40 cases kept ..." where the family was cut at its limit.
_KIT_FAMILY = re.compile(r"^(?:FAIL: )?bench (\S+): (\d+) cases in (\d+)s\b", re.M)
_KIT_CUT = re.compile(r"^FAIL: bench (\S+): over its (\d+)s limit: (\d+) cases kept", re.M)


def kit_families(summary: str) -> dict[str, tuple[int, int, bool]]:
    """Each bench family of a GPU kit summary: (cases, seconds, cut at its
    limit), in the order the kit ran them. Runs from before the JSON carried
    dlbench_wall_s have their times here only."""
    found = {}
    for m in sorted([*_KIT_FAMILY.finditer(summary), *_KIT_CUT.finditer(summary)], key=lambda m: m.start()):
        if m.re is _KIT_CUT:
            found[m.group(1)] = (int(m.group(3)), int(m.group(2)), True)
        else:
            found[m.group(1)] = (int(m.group(2)), int(m.group(3)), False)
    return found


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help="add a run's wall time to its JSON context")
    r.add_argument("json", type=Path)
    r.add_argument("--wall-s", type=float, required=True)
    r.add_argument("--run", required=True, help="what ran (the command and its arguments)")
    r.add_argument("--key", default=WALL, help=f"the context key (default {WALL}; e.g. dlbench_peers_wall_s)")
    a = p.parse_args(argv)
    if a.wall_s < 0 or a.wall_s != a.wall_s:
        print(f"walltime.py: --wall-s {a.wall_s}: not a duration", file=sys.stderr)
        return 2
    if not a.key.endswith("_wall_s"):
        print(f"walltime.py: --key {a.key}: must end in _wall_s", file=sys.stderr)
        return 2
    try:
        doc = read_document(a.json)
    except ResultsError as e:
        print(f"walltime.py: {e}", file=sys.stderr)
        return 2
    if not isinstance(doc, dict) or not isinstance(doc.get("context"), dict):
        print(f"walltime.py: {a.json}: not Google Benchmark JSON (no 'context')", file=sys.stderr)
        return 2
    record(doc["context"], a.wall_s, a.run, a.key)
    write_document(a.json, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
