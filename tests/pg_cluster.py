"""A throwaway PostgreSQL server for tests: initdb and pg_ctl of Debian's
postgresql package in a temporary directory, listening on a unix socket
there only (no TCP port), stopped and removed at the end.

PostgreSQL refuses to run as root: as root (CI, the developers' machines)
the server runs as the `postgres` user the package creates (runuser), with
the directory handed to it; as anyone else, as that user."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

BIN = Path(os.environ.get("DLB_PG_BIN", "/usr/lib/postgresql/15/bin"))


class Cluster:
    def __init__(self):
        self.dir: Path | None = None
        self.url: str | None = None

    def _as_owner(self, args: list[str]) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args

    def start(self) -> str:
        if not (BIN / "initdb").exists():
            raise RuntimeError(f"{BIN}/initdb not found: scripts/setup installs Debian's postgresql")
        self.dir = Path(tempfile.mkdtemp(prefix="dlb-pg-"))
        data, log = self.dir / "data", self.dir / "server.log"
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
        run = lambda args: subprocess.run(self._as_owner(args), check=True, capture_output=True, text=True)  # noqa: E731
        run([str(BIN / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"])
        opts = f"-c listen_addresses='' -k {self.dir} -p 5432 -c fsync=off -c max_connections=50"
        try:
            run([str(BIN / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", opts, "-w", "-t", "60", "start"])
        except subprocess.CalledProcessError as e:
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {e.stderr}\n{tail}") from None
        self.url = f"postgresql://postgres@/postgres?host={self.dir}&port=5432"
        return self.url

    def new_database(self) -> str:
        """A fresh database on the server (one per test), made through the
        store's own driver; its URL."""
        import psycopg
        self.databases = getattr(self, "databases", 0) + 1
        name = f"t{self.databases}"
        with psycopg.connect(f"host={self.dir} port=5432 user=postgres dbname=postgres", autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url.replace("/postgres?", f"/{name}?")

    def stop(self) -> None:
        if self.dir is None:
            return
        subprocess.run(self._as_owner([str(BIN / "pg_ctl"), "-D", str(self.dir / "data"), "-m", "immediate",
                                       "-w", "stop"]), capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = None
