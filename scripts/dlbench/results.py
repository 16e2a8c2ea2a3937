"""Reading dlbench results: Google Benchmark JSON, with repetitions kept.

A case is keyed by its name without Google Benchmark's decorations (the
rule is dlbench.names'). Every repetition of a case is kept; figures use
the median.
"""

from __future__ import annotations

import gzip
import json
import os
import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from dlbench import names
from dlbench.names import BadName, Name, split_name

# seconds per Google Benchmark time unit
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


class ResultsError(Exception):
    """A file that is not usable Google Benchmark JSON (exit code 2 in the CLIs)."""


@dataclass
class Case:
    """One benchmark case: every repetition of it in one file."""

    name: str  # without the time suffix
    op: str
    variant: str  # "<device>_<implementation>"
    args: dict[str, int]
    runs: list[dict] = field(default_factory=list)  # the iteration entries
    error: str | None = None  # Google Benchmark's error_message when skipped

    @property
    def device(self) -> str:
        return names.device_of(self.variant)

    @property
    def is_peer(self) -> bool:
        """A case of scripts/peers (peer_<framework>...): what users would run instead."""
        return self.device == "peer"

    @property
    def runs_on(self) -> str:
        """'cpu' or 'gpu': the variant's device, or for a peer 'gpu' where its
        name says CUDA or cuDNN (peer_torch_cuda, peer_torch_cudnn_benchmark)."""
        return names.runs_on(self.variant)

    @property
    def precision(self) -> str:
        """fp32, tf32, fp16, bf16 or int8 (names.precision_of)."""
        return names.precision_of(self.variant)

    def values(self, key: str) -> list[float]:
        """Per-repetition values of a counter or time field."""
        return [float(r[key]) for r in self.runs if key in r]

    def seconds(self) -> list[float]:
        """Per-repetition time of one call, in seconds."""
        return [float(r["real_time"]) * _UNIT_SECONDS[r.get("time_unit", "ns")] for r in self.runs]

    def median(self, key: str) -> float | None:
        vals = self.values(key)
        return statistics.median(vals) if vals else None

    def median_seconds(self) -> float | None:
        vals = self.seconds()
        return statistics.median(vals) if vals else None


@dataclass
class Results:
    path: Path
    context: dict
    cases: dict[str, Case]

    @property
    def machine(self) -> str:
        return str(self.context.get("machine", "unknown"))

    def family(self, op: str) -> list[Case]:
        return [c for c in self.cases.values() if c.op == op]

    def errored(self) -> list[Case]:
        return [c for c in self.cases.values() if c.error is not None]


def parse(full_name: str) -> Name:
    """dlbench.names.split_name, a foreign name raising ResultsError."""
    try:
        return split_name(full_name)
    except BadName as e:
        raise ResultsError(str(e)) from None


def parse_name(full_name: str) -> tuple[str, str, str, dict[str, int]]:
    """'daxpy/cpu_loop/n:1024/real_time' -> ('daxpy/cpu_loop/n:1024', 'daxpy', 'cpu_loop', {'n': 1024});
    the rule is dlbench.names'."""
    n = parse(full_name)
    return n.name, n.op, n.variant, n.args


def read_text(path: str | Path) -> str:
    """The text of a results file: plain JSON, or gzip-compressed JSON
    (a name ending in .gz, as committed runs are stored). Raises
    ResultsError naming the file and the problem."""
    path = Path(path)
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rt", encoding="utf-8") as f:
                return f.read()
        return path.read_text(encoding="utf-8")
    except OSError as e:  # gzip.BadGzipFile (not gzip, a bad CRC) is an OSError
        raise ResultsError(f"{path}: cannot read: {e.strerror or e}") from None
    except EOFError:
        raise ResultsError(f"{path}: cannot read: the compressed stream ends early (a truncated file)") from None
    except UnicodeDecodeError:
        raise ResultsError(f"{path}: not JSON (not UTF-8 text)") from None


def read_document(path: str | Path) -> dict:
    """A results file as the JSON document it holds (plain or .gz)."""
    path = Path(path)
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        # Some of json's messages end in "at" ("Unterminated string starting at"): no second one.
        where = f"line {e.lineno}, column {e.colno}"
        raise ResultsError(f"{path}: not JSON ({e.msg}{' ' if e.msg.endswith(' at') else ' at '}{where})") from None


def write_document(path: str | Path, document: dict, indent: int | None = 1) -> None:
    """Writes a JSON document to `path`, gzip-compressed where the name ends
    in .gz; through a temporary file in the same folder, so that a reader
    never sees half a file."""
    path = Path(path)
    text = json.dumps(document, indent=indent) + "\n"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as raw:
            if path.name.endswith(".gz"):
                # mtime=0: the same document gives the same bytes.
                with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0) as f:
                    f.write(text.encode("utf-8"))
            else:
                raw.write(text.encode("utf-8"))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load(path: str | Path) -> Results:
    """Loads one Google Benchmark JSON file (plain or .json.gz); raises
    ResultsError with the reason."""
    path = Path(path)
    return from_document(read_document(path), path)


def from_document(data, path: str | Path) -> Results:
    """The Results of a Google Benchmark JSON document already read (from a
    file, or from the results store); `path` names it in messages."""
    path = Path(path)
    if not isinstance(data, dict) or "benchmarks" not in data or "context" not in data:
        raise ResultsError(f"{path}: not Google Benchmark JSON (no 'context' and 'benchmarks')")
    if not isinstance(data["benchmarks"], list):
        raise ResultsError(f"{path}: 'benchmarks' is not a list")

    cases: dict[str, Case] = {}
    for entry in data["benchmarks"]:
        if not isinstance(entry, dict) or "name" not in entry:
            raise ResultsError(f"{path}: a benchmark entry without a name")
        if entry.get("run_type", "iteration") != "iteration":
            continue  # mean/median/stddev rows: recomputed from the repetitions
        name, op, variant, args = parse_name(entry.get("run_name", entry["name"]))
        case = cases.setdefault(name, Case(name=name, op=op, variant=variant, args=args))
        if entry.get("error_occurred"):
            case.error = entry.get("error_message", "error")
        else:
            case.runs.append(entry)
    return Results(path=path, context=data["context"], cases=cases)


def relative_mad(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values)
    return mad / med if med > 0 else 0.0


def repetitions(results: Results) -> int:
    """The largest number of repetitions any case has."""
    return max((len(c.runs) for c in results.cases.values()), default=0)


def merge_files(paths: list[Path]) -> dict:
    """One Google Benchmark JSON document from runs of the same binary in
    several processes: the first run's context (with "processes" and the
    other runs' dates added), every entry of every run, each tagged with its
    "process_index". A comparison then sees the variation between processes
    (where data lands in memory, the machine's state) in the repetitions, not
    only the variation within one process."""
    docs = []
    for p in paths:
        load(p)  # validates, raises ResultsError with the reason
        docs.append(read_document(p))
    merged = {"context": dict(docs[0]["context"]), "benchmarks": []}
    commits = {str(d["context"].get("git_commit")) for d in docs}
    if len(commits) > 1:
        raise ResultsError(f"runs of different commits cannot be merged: {sorted(commits)}")
    merged["context"]["processes"] = len(docs)
    merged["context"]["process_dates"] = [d["context"].get("date", "") for d in docs]
    # Each process's wall time (dlbench.walltime), where they recorded one:
    # the merged file's is their sum, or none where one of them has none.
    walls = [d["context"].get("dlbench_wall_s") for d in docs]
    if any(isinstance(w, (int, float)) for w in walls):
        merged["context"]["process_wall_s"] = walls
        merged["context"]["process_runs"] = [d["context"].get("dlbench_run") for d in docs]
        merged["context"].pop("dlbench_wall_s", None)
        if all(isinstance(w, (int, float)) for w in walls):
            merged["context"]["dlbench_wall_s"] = round(sum(walls), 1)
    # Peers appended to each process's run (scripts/bench --peers with
    # DLB_PROCESSES > 1, in rounds): what any round labelled, left unrun or
    # stopped is the merged run's.
    labels: dict = {}
    for d in docs:
        labels.update(d["context"].get("peers") or {})
    if labels:
        merged["context"]["peers"] = labels
    not_run = [name for d in docs for name in d["context"].get("peers_not_run") or []]
    if not_run:
        merged["context"]["peers_not_run"] = list(dict.fromkeys(not_run))
    stopped = [d["context"]["peers_stopped"] for d in docs if "peers_stopped" in d["context"]]
    if stopped:
        merged["context"]["peers_stopped"] = stopped[0]
    for index, d in enumerate(docs):
        for entry in d["benchmarks"]:
            merged["benchmarks"].append({**entry, "process_index": index})
    return merged


def split_processes(results: Results) -> list[Results]:
    """The single-process runs a merged file (merge_files) was made of."""
    indices = sorted({r.get("process_index", 0) for c in results.cases.values() for r in c.runs})
    out = []
    for index in indices:
        cases = {}
        for name, c in results.cases.items():
            runs = [r for r in c.runs if r.get("process_index", 0) == index]
            cases[name] = Case(name=c.name, op=c.op, variant=c.variant, args=c.args, runs=runs, error=c.error)
        out.append(Results(path=Path(f"{results.path}#process{index}"), context=results.context, cases=cases))
    return out
