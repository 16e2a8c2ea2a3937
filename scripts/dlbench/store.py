"""The results store: every run's Google Benchmark JSON in a database, for
history and comparisons (scripts/results).

SQLAlchemy Core, one schema for SQLite (the default, a file outside the
tracked tree: $XDG_DATA_HOME/dlbench/results.sqlite, i.e.
~/.local/share/dlbench/results.sqlite) and PostgreSQL (a URL such as
postgresql://user@host/db, through psycopg 3). Which database: --db, else
DLB_RESULTS_DB, else the default; a plain path is an SQLite file.

Tables
  runs      one ingested file: its identity (sha256 of the canonical
            document), the context's main keys as columns (machine,
            git_commit, date and started_at in UTC, cpu_model,
            cpu_microarchitecture, cpu_vector_isa, gpu_name, cudnn_version,
            onednn_version, machine_load_at_start, processes) and the whole
            context as JSON; `extra` keeps top-level keys other than
            context/benchmarks.
  cases     one per case name (without the time suffix): family (the op),
            variant, device, implementation, args (parsed from the name).
  case_args the same arguments as rows (case_id, arg, value) for queries.
  entries   every entry of the file's "benchmarks" in file order: the
            repetitions (run_type iteration) and Google Benchmark's
            aggregates, with name, run_type, repetition_index,
            process_index, aggregate_name, iterations, real_time, cpu_time,
            time_unit, error_message as columns, the user counters
            (bytes_per_second, flops, max_rel_err, noisy, ...) as JSON in
            `counters` and any other key in `fields`: export gives the
            document back.
  pins      a machine's pinned baseline run (scripts/results pin).

Safety: one transaction per file (a refused or failed file writes
nothing); a document already stored (same digest) is not stored again,
also when several processes ingest it at once (a unique digest; SQLite
serializes writers with BEGIN IMMEDIATE, PostgreSQL's unique index makes
the later transaction fail and it reports the stored run)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import statistics
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import (BigInteger, Column, Float, ForeignKey, Integer, MetaData, String, Table, Text,
                        UniqueConstraint, create_engine, event, func, select)
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.types import TypeDecorator

from dlbench.names import BadName, Name, case_name as case_name_of
from dlbench.results import Case, Results, ResultsError, from_document, parse, read_document

ENV = "DLB_RESULTS_DB"
SCHEMA_VERSION = 1

# Fields of a Google Benchmark entry that are not user counters.
STANDARD_FIELDS = {
    "name", "family_index", "per_family_instance_index", "run_name", "run_type", "repetitions",
    "repetition_index", "threads", "iterations", "real_time", "cpu_time", "time_unit", "aggregate_name",
    "aggregate_unit", "error_occurred", "error_message", "label", "big_o", "rms", "complexity_n",
    "process_index",
}
# entry key -> (column, python type it must have to live in the column)
_COLUMNS = {
    "name": str, "run_type": str, "repetition_index": int, "process_index": int, "aggregate_name": str,
    "iterations": int, "real_time": float, "cpu_time": float, "time_unit": str, "error_message": str,
}
# Context keys kept as columns of runs (the whole context is kept too).
CONTEXT_COLUMNS = ("machine", "git_commit", "date", "cpu_model", "cpu_microarchitecture", "cpu_vector_isa",
                   "gpu_name", "cudnn_version", "onednn_version", "machine_load_at_start")

class JSON(TypeDecorator):
    """JSON kept as text, the same on both backends: Google Benchmark writes
    NaN (aggregates of a constant counter), which PostgreSQL's json types refuse."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value, dialect):
        return None if value is None else json.dumps(value, allow_nan=True)

    def process_result_value(self, value, dialect):
        return None if value is None else json.loads(value)


_Id = BigInteger().with_variant(Integer(), "sqlite")  # SQLite autoincrements only INTEGER keys

metadata = MetaData()
store_info = Table("store_info", metadata, Column("key", String(64), primary_key=True),
                   Column("value", Text, nullable=False))
runs = Table(
    "runs", metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("digest", String(64), nullable=False, unique=True),
    Column("source", Text),
    Column("ingested_at", String(32), nullable=False),
    *[Column(k, Text, index=k in ("machine", "git_commit")) for k in CONTEXT_COLUMNS],
    Column("started_at", String(32), index=True),
    Column("processes", Integer, nullable=False),
    Column("n_entries", Integer, nullable=False),
    Column("context", JSON, nullable=False),
    Column("extra", JSON),
)
cases = Table(
    "cases", metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("name", Text, nullable=False, unique=True),
    Column("family", Text, nullable=False, index=True),
    Column("variant", Text, nullable=False),
    Column("device", Text, nullable=False),
    Column("implementation", Text, nullable=False),
    Column("args", JSON, nullable=False),
)
case_args = Table(
    "case_args", metadata,
    Column("case_id", _Id, ForeignKey("cases.id"), primary_key=True),
    Column("arg", String(200), primary_key=True),
    Column("value", BigInteger, nullable=False),
)
entries = Table(
    "entries", metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("run_id", _Id, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("case_id", _Id, ForeignKey("cases.id"), nullable=False, index=True),
    Column("position", Integer, nullable=False),
    Column("name", Text, nullable=False),
    Column("run_type", String(32)),
    Column("repetition_index", Integer),
    Column("process_index", Integer),
    Column("aggregate_name", String(64)),
    Column("iterations", BigInteger),
    Column("real_time", Float(53)),
    Column("cpu_time", Float(53)),
    Column("time_unit", String(8)),
    Column("error_message", Text),
    Column("counters", JSON, nullable=False),
    Column("fields", JSON, nullable=False),
    UniqueConstraint("run_id", "position"),
)
pins = Table(
    "pins", metadata,
    Column("machine", String(200), primary_key=True),
    Column("run_id", _Id, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
)


class StoreError(Exception):
    """A problem with the store or what is asked of it (exit code 2 in the CLIs)."""


def default_path() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "dlbench" / "results.sqlite"


def resolve_url(db: str | None = None) -> str:
    """The SQLAlchemy URL of `db`, else of $DLB_RESULTS_DB, else of the
    default SQLite file. postgresql:// and postgres:// use psycopg 3."""
    db = db or os.environ.get(ENV) or str(default_path())
    if "://" not in db:
        return "sqlite:///" + str(Path(db).expanduser().resolve())
    for prefix in ("postgresql://", "postgres://"):
        if db.startswith(prefix):
            return "postgresql+psycopg://" + db[len(prefix):]
    return db


def describe(url: str) -> str:
    """The URL without a password, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


def canonical_digest(document: dict) -> str:
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _utc(date: object) -> str | None:
    try:
        d = datetime.fromisoformat(str(date))
    except ValueError:
        return None
    if d.tzinfo is None:
        d = d.replace(tzinfo=timezone.utc)
    return d.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _fits(value: object, kind: type) -> bool:
    if isinstance(value, bool):
        return False
    if kind is float:
        # NaN and infinities stay in the JSON text (SQLite would store NULL)
        return isinstance(value, float) and math.isfinite(value)
    return isinstance(value, kind)


def split_entry(entry: dict) -> tuple[dict, dict, dict]:
    """(columns, counters, fields) of one benchmark entry; merge_entry undoes it."""
    cols, counters, fields = {}, {}, {}
    for key, value in entry.items():
        if key in _COLUMNS and _fits(value, _COLUMNS[key]):
            cols[key] = value
        elif key not in STANDARD_FIELDS and _fits(value, (int, float)):
            counters[key] = value
        else:
            fields[key] = value
    return cols, counters, fields


_ORDER = ["name", "family_index", "per_family_instance_index", "run_name", "run_type", "repetitions",
          "repetition_index", "threads", "iterations", "real_time", "cpu_time", "time_unit", "aggregate_name",
          "aggregate_unit", "error_occurred", "error_message"]


def merge_entry(row) -> dict:
    d = {k: getattr(row, k) for k in _COLUMNS if getattr(row, k) is not None}
    d.update(row.fields or {})
    d.update(row.counters or {})
    rank = {k: i for i, k in enumerate(_ORDER)}
    standard = sorted((k for k in d if k in rank), key=rank.get)
    return {k: d[k] for k in standard + [k for k in d if k not in rank]}


def validate(document: object, label: str) -> Results:
    """The document as Results; ResultsError naming `label` and the problem
    for anything that is not dlbench's Google Benchmark JSON."""
    try:
        results = from_document(document, label)
    except ResultsError as e:
        raise ResultsError(str(e) if str(e).startswith(label) else f"{label}: {e}") from None
    if not isinstance(document["context"], dict):
        raise ResultsError(f"{label}: 'context' is not an object")
    if not document["benchmarks"]:
        raise ResultsError(f"{label}: no benchmark entries")
    for i, entry in enumerate(document["benchmarks"]):
        if not isinstance(entry["name"], str):
            raise ResultsError(f"{label}: entry {i}: 'name' is not a string")
        try:
            parse(entry.get("run_name", entry["name"]))  # raises on a foreign name
        except ResultsError as e:
            raise ResultsError(f"{label}: entry {i}: {e}") from None
    return results


@dataclass
class Ingested:
    run_id: int
    new: bool  # False: the same document was stored already
    cases: int
    entries: int


class Store:
    def __init__(self, db: str | None = None, create: bool = True):
        self.url = resolve_url(db)
        try:
            url = make_url(self.url)
        except ArgumentError:
            raise StoreError(f"not a database URL: {db!r}") from None
        self.dialect = url.get_backend_name()
        if self.dialect not in ("sqlite", "postgresql"):
            raise StoreError(f"{describe(self.url)}: only SQLite and PostgreSQL are supported")
        if self.dialect == "sqlite" and url.database:
            Path(url.database).parent.mkdir(parents=True, exist_ok=True)
        try:
            self.engine = self._engine()
            if create:
                self._create()
        except SQLAlchemyError as e:
            raise StoreError(f"{describe(self.url)}: {_reason(e)}") from None

    def _engine(self) -> Engine:
        if self.dialect == "sqlite":
            engine = create_engine(self.url, connect_args={"timeout": 300})

            @event.listens_for(engine, "connect")
            def _connect(dbapi_connection, _record):
                dbapi_connection.isolation_level = None  # transactions are begun below
                cur = dbapi_connection.cursor()
                cur.execute("PRAGMA foreign_keys=ON")
                # Readers do not wait for a writer (persistent; a no-op once set).
                cur.execute("PRAGMA journal_mode=WAL")
                cur.close()

            @event.listens_for(engine, "begin")
            def _begin(conn):
                # One writer at a time, waiting (timeout above) rather than failing.
                conn.exec_driver_sql("BEGIN IMMEDIATE")

            return engine
        return create_engine(self.url, pool_pre_ping=True)

    def _create(self) -> None:
        with self.engine.begin() as conn:
            if self.dialect == "postgresql":
                # Concurrent CREATE TABLE IF NOT EXISTS can collide in PostgreSQL's catalog.
                conn.execute(select(func.pg_advisory_xact_lock(0x646C62)))
            metadata.create_all(conn)
            version = conn.execute(select(store_info.c.value).where(store_info.c.key == "schema_version")).scalar()
            if version is None:
                conn.execute(store_info.insert().values(key="schema_version", value=str(SCHEMA_VERSION)))
            elif int(version) != SCHEMA_VERSION:
                raise StoreError(f"{describe(self.url)}: schema version {version}, this code knows "
                                 f"{SCHEMA_VERSION}")

    def close(self) -> None:
        self.engine.dispose()

    # -- writing ---------------------------------------------------------------------------------
    def _insert_ignore(self, table: Table):
        if self.dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        return insert(table).on_conflict_do_nothing()

    def ingest_file(self, path: str | Path) -> Ingested:
        """Stores one results file (plain or .gz) in one transaction."""
        document = read_document(path)
        return self.ingest_document(document, str(path))

    def ingest_document(self, document: dict, source: str) -> Ingested:
        validate(document, source)
        digest = canonical_digest(document)
        context = document["context"]
        benchmarks = document["benchmarks"]
        parsed = [parse(e.get("run_name", e["name"])) for e in benchmarks]
        names = {p.name: p for p in parsed}
        try:
            with self.engine.begin() as conn:
                existing = conn.execute(select(runs.c.id).where(runs.c.digest == digest)).scalar()
                if existing is not None:
                    return Ingested(int(existing), False, len(names), len(benchmarks))
                run_id = conn.execute(runs.insert().values(
                    digest=digest, source=source, ingested_at=_now(),
                    **{k: (None if context.get(k) is None else str(context[k])) for k in CONTEXT_COLUMNS},
                    started_at=_utc(context.get("date")), processes=_int(context.get("processes"), 1),
                    n_entries=len(benchmarks), context=context,
                    extra={k: v for k, v in document.items() if k not in ("context", "benchmarks")} or None,
                ).returning(runs.c.id)).scalar_one()
                case_ids = self._case_ids(conn, names)
                rows = []
                for position, (entry, p) in enumerate(zip(benchmarks, parsed)):
                    cols, counters, fields = split_entry(entry)
                    row = {k: None for k in _COLUMNS}
                    row.update(cols)
                    row.update(run_id=run_id, case_id=case_ids[p.name], position=position, counters=counters,
                               fields=fields)
                    rows.append(row)
                for i in range(0, len(rows), 2000):
                    conn.execute(entries.insert(), rows[i:i + 2000])
                return Ingested(int(run_id), True, len(names), len(benchmarks))
        except IntegrityError:
            # Another process stored the same document between our check and insert.
            with self.engine.connect() as conn:
                existing = conn.execute(select(runs.c.id).where(runs.c.digest == digest)).scalar()
            if existing is None:
                raise
            return Ingested(int(existing), False, len(names), len(benchmarks))

    def _case_ids(self, conn, names: dict[str, Name]) -> dict[str, int]:
        rows = [{"name": n.name, "family": n.op, "variant": n.variant, "device": n.device,
                 "implementation": n.implementation, "args": n.args}
                for _, n in sorted(names.items())]
        for i in range(0, len(rows), 500):
            conn.execute(self._insert_ignore(cases), rows[i:i + 500])
        ids = {}
        ordered = sorted(names)
        for i in range(0, len(ordered), 500):
            chunk = ordered[i:i + 500]
            ids.update({n: int(cid) for cid, n in conn.execute(
                select(cases.c.id, cases.c.name).where(cases.c.name.in_(chunk)))})
        arg_rows = [{"case_id": ids[n], "arg": k, "value": v} for n, name in names.items()
                    for k, v in name.args.items()]
        for i in range(0, len(arg_rows), 500):
            conn.execute(self._insert_ignore(case_args), arg_rows[i:i + 500])
        return ids

    def pin(self, run_id: int) -> str:
        with self.engine.begin() as conn:
            machine = conn.execute(select(runs.c.machine).where(runs.c.id == run_id)).scalar_one()
            conn.execute(pins.delete().where(pins.c.machine == machine))
            conn.execute(pins.insert().values(machine=machine, run_id=run_id))
        return machine

    def unpin(self, machine: str) -> bool:
        with self.engine.begin() as conn:
            return conn.execute(pins.delete().where(pins.c.machine == machine)).rowcount > 0

    # -- reading ---------------------------------------------------------------------------------
    def list_runs(self, machine: str | None = None, commit: str | None = None, since: str | None = None,
                  until: str | None = None) -> list[dict]:
        """Runs, oldest first. commit: a prefix; since/until: dates (inclusive, compared with the
        run's UTC start, e.g. 2026-11-25 or 2026-11-25T12:00:00Z)."""
        n_cases = (select(func.count(func.distinct(entries.c.case_id))).where(entries.c.run_id == runs.c.id)
                   .scalar_subquery())
        q = select(runs.c.id, runs.c.digest, runs.c.machine, runs.c.git_commit, runs.c.date, runs.c.started_at,
                   runs.c.cpu_model, runs.c.cpu_vector_isa, runs.c.gpu_name, runs.c.processes,
                   runs.c.n_entries, runs.c.source, n_cases.label("n_cases"))
        if machine:
            q = q.where(runs.c.machine == machine)
        if commit:
            q = q.where(runs.c.git_commit.startswith(commit, autoescape=True))
        if since:
            q = q.where(runs.c.started_at >= since)
        if until:
            # a bare date means the whole day
            q = q.where(runs.c.started_at <= (until + "T23:59:59Z" if len(until) == 10 else until))
        q = q.order_by(runs.c.started_at, runs.c.id)
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]

    def run_info(self, run_id: int) -> dict:
        with self.engine.connect() as conn:
            row = conn.execute(select(runs).where(runs.c.id == run_id)).first()
        if row is None:
            raise StoreError(f"no run {run_id} in the store")
        return dict(row._mapping)

    def resolve(self, ref: str) -> int:
        """A run from: its id; 'latest' or 'latest:<machine>'; a prefix of its
        digest (6+ hex digits); a results file (the run of that document)."""
        ref = str(ref)
        with self.engine.connect() as conn:
            if ref.isdigit() and not Path(ref).exists():
                if conn.execute(select(runs.c.id).where(runs.c.id == int(ref))).scalar() is None:
                    raise StoreError(f"no run {ref} in the store (see scripts/results runs)")
                return int(ref)
            if ref == "latest" or ref.startswith("latest:"):
                q = select(runs.c.id)
                if ref.startswith("latest:"):
                    q = q.where(runs.c.machine == ref.split(":", 1)[1])
                found = conn.execute(q.order_by(runs.c.started_at.desc(), runs.c.id.desc()).limit(1)).scalar()
                if found is None:
                    raise StoreError(f"{ref}: no run in the store")
                return int(found)
            if Path(ref).is_file():
                digest = canonical_digest(read_document(ref))
                found = conn.execute(select(runs.c.id).where(runs.c.digest == digest)).scalar()
                if found is None:
                    raise StoreError(f"{ref}: this file's run is not in the store (scripts/results ingest {ref})")
                return int(found)
            if len(ref) >= 6 and all(c in "0123456789abcdef" for c in ref.lower()):
                found = conn.execute(select(runs.c.id).where(runs.c.digest.startswith(ref.lower()))
                                     .limit(2)).scalars().all()
                if len(found) == 1:
                    return int(found[0])
                if len(found) > 1:
                    raise StoreError(f"{ref}: more than one run's digest starts so; give more digits")
        raise StoreError(f"{ref}: no such run (an id, latest[:machine], a digest prefix or a results file)")

    def document(self, run_id: int) -> dict:
        """The run's Google Benchmark JSON document, as it was ingested."""
        info = self.run_info(run_id)
        with self.engine.connect() as conn:
            rows = conn.execute(select(entries).where(entries.c.run_id == run_id).order_by(entries.c.position))
            benchmarks = [merge_entry(r) for r in rows]
        doc = {"context": info["context"], "benchmarks": benchmarks}
        doc.update(info["extra"] or {})
        return doc

    def results(self, run_id: int) -> Results:
        info = self.run_info(run_id)
        return from_document(self.document(run_id), label(info))

    def baseline(self, run_id: int) -> int | None:
        """The run `run_id` is judged against: its machine's pinned run, else
        the latest earlier run on the same machine (same name, CPU and GPU)
        that has a case in common with it (the GPU kit stores one file per
        family: a copy run is not the baseline of a network run)."""
        info = self.run_info(run_id)
        with self.engine.connect() as conn:
            pinned = conn.execute(select(pins.c.run_id).where(pins.c.machine == info["machine"])).scalar()
            if pinned is not None and int(pinned) != run_id:
                return int(pinned)
            q = (select(runs.c.id, runs.c.context).where(runs.c.machine == info["machine"], runs.c.id != run_id)
                 .where((runs.c.started_at < info["started_at"])
                        | ((runs.c.started_at == info["started_at"]) & (runs.c.id < run_id)))
                 .order_by(runs.c.started_at.desc(), runs.c.id.desc()))
            from dlbench.compare import MACHINE_KEYS
            mine = {k: str(info["context"].get(k, "?")) for k in MACHINE_KEYS}
            mine_cases = select(entries.c.case_id).where(entries.c.run_id == run_id)
            for rid, context in conn.execute(q).all():
                if {k: str(context.get(k, "?")) for k in MACHINE_KEYS} != mine:
                    continue
                shared = select(entries.c.id).where(entries.c.run_id == rid, entries.c.case_id.in_(mine_cases))
                if conn.execute(shared.limit(1)).first() is not None:
                    return int(rid)
        return None

    def pinned(self) -> dict[str, int]:
        with self.engine.connect() as conn:
            return {m: int(r) for m, r in conn.execute(select(pins.c.machine, pins.c.run_id))}

    def case_names(self, family: str | None = None) -> list[str]:
        q = select(cases.c.name).order_by(cases.c.name)
        if family:
            q = q.where(cases.c.family == family)
        with self.engine.connect() as conn:
            return list(conn.execute(q).scalars())

    def history(self, case_name: str, machine: str | None = None) -> list[tuple[dict, Case]]:
        """The case in every run that has it, oldest first: (run, Case with its repetitions).
        `case_name` as stored or as the console prints it (with /iterations:<n>
        and the time suffix: dlbench.names)."""
        try:
            stored = case_name_of(case_name)
        except BadName as e:
            raise StoreError(str(e)) from None
        with self.engine.connect() as conn:
            case = conn.execute(select(cases).where(cases.c.name == stored)).first()
            if case is None:
                raise StoreError(f"no case {stored!r} in the store (names are <op>/<variant>/<arg>:<value>..., "
                                 "as `scripts/results show RUN` lists them)")
            q = (select(entries, runs.c.machine, runs.c.git_commit, runs.c.date, runs.c.started_at)
                 .join(runs, runs.c.id == entries.c.run_id).where(entries.c.case_id == case.id))
            if machine:
                q = q.where(runs.c.machine == machine)
            q = q.order_by(runs.c.started_at, runs.c.id, entries.c.position)
            out: dict[int, tuple[dict, Case]] = {}
            for r in conn.execute(q):
                if r.run_id not in out:
                    out[r.run_id] = ({"id": int(r.run_id), "machine": r.machine, "git_commit": r.git_commit,
                                      "date": r.date, "started_at": r.started_at},
                                     Case(name=case.name, op=case.family, variant=case.variant,
                                          args=dict(case.args)))
                entry = merge_entry(r)
                if entry.get("run_type", "iteration") != "iteration":
                    continue
                c = out[r.run_id][1]
                if entry.get("error_occurred"):
                    c.error = entry.get("error_message", "error")
                else:
                    c.runs.append(entry)
        return list(out.values())

    def counts(self) -> dict[str, int]:
        with self.engine.connect() as conn:
            return {t.name: conn.execute(select(func.count()).select_from(t)).scalar_one()
                    for t in (runs, cases, entries)}


def label(info: dict) -> str:
    return f"run {info['id']} ({info['machine']}, {info['started_at'] or info['date']})"


def _int(value, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _reason(e: Exception) -> str:
    orig = getattr(e, "orig", None)
    text = str(orig if orig is not None else e).strip().splitlines()
    return text[0] if text else type(e).__name__


def summary(case: Case) -> dict:
    """Median seconds per call, its relative MAD and the repetitions' range."""
    from dlbench.results import relative_mad
    s = case.seconds()
    if not s:
        return {"median_s": None, "rel_mad": None, "min_s": None, "max_s": None, "repetitions": 0}
    return {"median_s": statistics.median(s), "rel_mad": relative_mad(s), "min_s": min(s), "max_s": max(s),
            "repetitions": len(s)}


__all__ = ["Store", "StoreError", "Ingested", "default_path", "resolve_url", "canonical_digest", "OperationalError"]
