"""scripts/results, the results store, on both of its backends.

SQLiteStore runs every test on an SQLite file in a temporary directory;
PostgresStore runs the same tests on a throwaway PostgreSQL server
(tests/pg_cluster.py: Debian's postgresql, a unix socket in a temporary
directory, as the postgres user when run as root). Each test starts from an
empty database.

What they prove: export gives back the ingested document of real committed
files (the same digest of the canonical JSON: every entry, repetition and
counter, NaN included); a file is stored once; a truncated, malformed or
foreign file is refused with a one-line message naming it (exit 2) and
nothing of it is written, nor of a file whose transaction fails half way;
compare gives compare.py's verdicts and exit code on the same two runs;
check finds the machine's baseline (latest earlier run, or the pinned one);
8 processes ingesting 8 runs at once lose nothing, 8 ingesting one file
store it once; runs/show/history answer; two live runs of build/bench
(DLB_BENCH) give a history of two points."""

import copy
import gzip
import json
import os
import subprocess
import sys
import tempfile
import unittest
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests"))

from dlbench import store as st  # noqa: E402
from dlbench.results import read_document  # noqa: E402
from pg_cluster import Cluster  # noqa: E402

RESULTS = [str(ROOT / "scripts" / "results")]
DATA = ROOT / "tests" / "data"
BASE, NEW, PLANTED = DATA / "compare_aa_base.json", DATA / "compare_aa_new.json", DATA / "compare_planted.json"
# Real committed runs: two machines, gzip-compressed, thousands of entries with NaN aggregates.
REAL = [ROOT / "results" / "intel-xeon-processor-2c" / "20261122T053917Z.json.gz",
        ROOT / "results" / "amd-epyc-zen4-2c" / "20261125T152402Z.json.gz"]
BENCH = os.environ.get("DLB_BENCH", str(ROOT / "build" / "bench"))


def canonical(doc: dict) -> str:
    return json.dumps(doc, sort_keys=True, allow_nan=True)


class StoreTests:
    """Mixed into one TestCase per backend; self.url() is the database."""

    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="dlb-store-test-"))
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", str(self.tmp)]))
        self.db = self.fresh_db()
        self.env = {**os.environ, st.ENV: self.db}

    def results(self, *args, check_rc=None):
        p = subprocess.run(RESULTS + list(map(str, args)), capture_output=True, text=True, env=self.env)
        if check_rc is not None:
            self.assertEqual(p.returncode, check_rc, p.stdout + p.stderr)
        return p

    def counts(self):
        s = st.Store(self.db)
        try:
            return s.counts()
        finally:
            s.close()

    # -- round trip -------------------------------------------------------------------------------
    def test_export_gives_back_real_committed_files(self):
        files = REAL + [BASE, DATA / "bench_small.json"]
        self.results("ingest", *files, check_rc=0)
        for i, f in enumerate(files, start=1):
            with self.subTest(file=f.name):
                out = self.tmp / f"export{i}.json.gz"
                self.results("export", f, "-o", out, check_rc=0)
                original, exported = read_document(f), read_document(out)
                self.assertEqual(st.canonical_digest(exported), st.canonical_digest(original))
                self.assertEqual(canonical(exported), canonical(original))
        # stdout export of a run by id is the same document
        p = self.results("export", "3", check_rc=0)
        self.assertEqual(canonical(json.loads(p.stdout)), canonical(read_document(BASE)))

    def test_schema_has_cases_arguments_and_counters(self):
        self.results("ingest", BASE, check_rc=0)
        s = st.Store(self.db)
        self.addCleanup(s.close)
        with s.engine.connect() as conn:
            case = conn.execute(st.select(st.cases).where(st.cases.c.name == "daxpy/cpu_loop/n:16384")).one()
            self.assertEqual((case.family, case.variant, case.device, case.implementation, case.args),
                             ("daxpy", "cpu_loop", "cpu", "loop", {"n": 16384}))
            args = conn.execute(st.select(st.case_args.c.arg, st.case_args.c.value)
                                .where(st.case_args.c.case_id == case.id)).all()
            self.assertEqual([tuple(a) for a in args], [("n", 16384)])
            reps = conn.execute(st.select(st.entries).where(st.entries.c.case_id == case.id,
                                                            st.entries.c.run_type == "iteration")).all()
            self.assertEqual(len(reps), 30)  # 3 processes x 10 repetitions
            self.assertEqual({r.process_index for r in reps}, {0, 1, 2})
            self.assertTrue(all("bytes_per_second" in r.counters for r in reps))
            run = conn.execute(st.select(st.runs)).one()
            self.assertEqual(run.machine, "intel-xeon-processor-2c")
            self.assertEqual(run.cpu_vector_isa, "avx512")
            self.assertEqual(run.started_at, "2026-11-22T07:58:49Z")
            self.assertEqual(run.context, read_document(BASE)["context"])

    # -- safety ---------------------------------------------------------------------------------
    def test_same_file_twice_is_stored_once(self):
        self.results("ingest", BASE, check_rc=0)
        gz = self.tmp / "same.json.gz"
        gz.write_bytes(gzip.compress(BASE.read_bytes()))
        p = self.results("ingest", BASE, gz, check_rc=0)
        self.assertEqual(p.stdout.count("already stored as run 1"), 2, p.stdout)
        self.assertEqual(self.counts()["runs"], 1)

    def test_bad_files_are_refused_and_nothing_is_written(self):
        text = BASE.read_text()
        bad = {
            "truncated.json": (text[: len(text) // 2], "not JSON"),
            "truncated.json.gz": (gzip.compress(text.encode())[:5000], "truncated"),
            "foreign.json": (json.dumps({"rows": [1, 2]}), "not Google Benchmark JSON"),
            "noname.json": (json.dumps({"context": {}, "benchmarks": [{"real_time": 1}]}), "without a name"),
            "badname.json": (json.dumps({"context": {}, "benchmarks": [{"name": "flat"}]}), "is not <op>/<variant>"),
            "empty.json": ("", "not JSON"),
        }
        for name, (content, why) in bad.items():
            path = self.tmp / name
            (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
            with self.subTest(file=name):
                p = self.results("ingest", path, check_rc=2)
                self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
                self.assertIn(name, p.stderr)
                self.assertIn(why, p.stderr)
                self.assertNotIn("Traceback", p.stderr)
        self.assertEqual(self.counts(), {"runs": 0, "cases": 0, "entries": 0})
        # a good file after a bad one in the same command is still stored, exit 2 for the bad one
        p = self.results("ingest", self.tmp / "foreign.json", BASE, check_rc=2)
        self.assertEqual(self.counts()["runs"], 1)

    def test_a_transaction_that_fails_half_way_writes_nothing(self):
        class Failing(st.Store):
            def _case_ids(self, conn, names):
                ids = super()._case_ids(conn, names)  # runs, cases, case_args written in the transaction
                raise RuntimeError("disk full")

        s = Failing(self.db)
        self.addCleanup(s.close)
        with self.assertRaises(RuntimeError):
            s.ingest_file(BASE)
        self.assertEqual(self.counts(), {"runs": 0, "cases": 0, "entries": 0})

    def test_concurrent_ingests_lose_nothing(self):
        doc = read_document(DATA / "bench_small.json")
        files = []
        for i in range(8):
            d = copy.deepcopy(doc)
            d["context"]["date"] = f"2026-11-2{i}T10:00:00+00:00"
            d["context"]["git_commit"] = f"{i}" * 40
            for e in d["benchmarks"]:
                if "real_time" in e and isinstance(e["real_time"], float):
                    e["real_time"] *= 1 + i / 100
            files.append(self.tmp / f"run{i}.json")
            files[-1].write_text(json.dumps(d))
        st.Store(self.db).close()  # the schema exists before the race on the data
        with ThreadPoolExecutor(8) as pool:  # 8 processes at once (threads only wait for them)
            procs = list(pool.map(lambda f: self.results("ingest", f), files))
        for p in procs:
            self.assertEqual(p.returncode, 0, p.stderr)
        counts = self.counts()
        self.assertEqual(counts["runs"], 8)
        self.assertEqual(counts["entries"], 8 * len(doc["benchmarks"]))
        self.assertEqual(counts["cases"], len({st.parse(e.get("run_name", e["name"])).name for e in doc["benchmarks"]}))
        for f in files:
            p = self.results("export", f, check_rc=0)
            self.assertEqual(canonical(json.loads(p.stdout)), canonical(read_document(f)))
        # the same file from 8 processes at once: stored once
        with ThreadPoolExecutor(8) as pool:
            procs = list(pool.map(lambda _: self.results("ingest", BASE), range(8)))
        self.assertEqual([p.returncode for p in procs], [0] * 8, [p.stderr for p in procs])
        self.assertEqual(sum(": stored as run 9 " in p.stdout for p in procs), 1, [p.stdout for p in procs])
        self.assertEqual(self.counts()["runs"], 9)
        self.assertEqual(self.counts()["entries"], 8 * len(doc["benchmarks"]) + len(read_document(BASE)["benchmarks"]))

    # -- reading --------------------------------------------------------------------------------
    def test_runs_show_history(self):
        self.results("ingest", BASE, NEW, DATA / "bench_small.json", check_rc=0)
        runs = json.loads(self.results("runs", "--json", check_rc=0).stdout)
        self.assertEqual([r["git_commit"][:7] for r in runs], ["064aac2", "ba7a158", "ba7a158"])
        one = lambda *a: json.loads(self.results("runs", "--json", *a, check_rc=0).stdout)  # noqa: E731
        self.assertEqual(len(one("--commit", "ba7a")), 2)
        self.assertEqual(len(one("--machine", "intel-xeon-processor-2c")), 3)
        self.assertEqual(len(one("--machine", "nowhere")), 0)
        self.assertEqual(len(one("--since", "2026-11-22T07:00:00Z")), 2)
        self.assertEqual(len(one("--until", "2026-11-22T06:00:00Z")), 1)
        self.assertEqual(len(one("--until", "2026-11-22")), 3)
        self.assertIn("daxpy/cpu_loop/n:16384", self.results("show", "latest", check_rc=0).stdout)
        shown = json.loads(self.results("show", "2", "--json", check_rc=0).stdout)
        self.assertEqual(shown["run"]["id"], 2)
        self.assertEqual(len(shown["cases"]), 18)
        hist = json.loads(self.results("history", "daxpy/cpu_loop/n:16384", "--json", check_rc=0).stdout)
        self.assertEqual([h["id"] for h in hist], [1, 2])
        self.assertEqual([h["repetitions"] for h in hist], [30, 30])
        p = self.results("history", "no/such:case", check_rc=2)
        self.assertIn("no case", p.stderr)
        p = self.results("show", "99", check_rc=2)
        self.assertIn("no run 99", p.stderr)

    # -- regressions ----------------------------------------------------------------------------
    _compare_py = {}  # compare.py's answers on the committed fixtures, computed once

    def compare_py(self, base, new):
        if (base, new) in StoreTests._compare_py:
            return StoreTests._compare_py[(base, new)]
        StoreTests._compare_py[(base, new)] = self._run_compare_py(base, new)
        return StoreTests._compare_py[(base, new)]

    def _run_compare_py(self, base, new):
        out = self.tmp / "files.json"
        p = subprocess.run([sys.executable, str(ROOT / "scripts" / "compare.py"), str(base), str(new),
                            "--json", str(out)], capture_output=True, text=True)
        return p.returncode, json.loads(out.read_text())["cases"]

    def store_verdicts(self, *args):
        out = self.tmp / "store.json"
        p = self.results(*args, "--json", out)
        return p.returncode, json.loads(out.read_text())["cases"]

    def test_compare_gives_compare_py_verdicts(self):
        self.results("ingest", BASE, NEW, PLANTED, check_rc=0)
        for base, new, rc in ((BASE, NEW, 0), (BASE, PLANTED, 1)):
            with self.subTest(new=new.name):
                want_rc, want = self.compare_py(base, new)
                self.assertEqual(want_rc, rc)
                got_rc, got = self.store_verdicts("compare", base, new)  # runs named by their files
                self.assertEqual(got_rc, want_rc)
                self.assertEqual(got, want)
        got_rc, got = self.store_verdicts("compare", "1", "3")  # the same by id
        self.assertEqual((got_rc, got), self.compare_py(BASE, PLANTED))
        self.assertTrue(any(v["verdict"] == "slower" for v in got))

    def test_check_against_the_machines_baseline(self):
        self.results("ingest", BASE, PLANTED, check_rc=0)  # planted ran after base
        got_rc, got = self.store_verdicts("check")  # latest = planted, baseline = base
        self.assertEqual((got_rc, got), self.compare_py(BASE, PLANTED))
        self.results("ingest", NEW, check_rc=0)  # latest = new, baseline = the latest earlier: planted
        self.assertEqual(self.store_verdicts("check"), self.compare_py(PLANTED, NEW))
        self.results("pin", BASE, check_rc=0)  # pinned: base
        self.assertEqual(self.store_verdicts("check", "latest"), self.compare_py(BASE, NEW))
        self.assertEqual(self.store_verdicts("check", "3", "--against", "2"), self.compare_py(PLANTED, NEW))
        self.results("unpin", "intel-xeon-processor-2c", check_rc=0)
        self.assertEqual(self.store_verdicts("check"), self.compare_py(PLANTED, NEW))
        p = self.results("check", "1", check_rc=2)  # the earliest run has no baseline
        self.assertIn("no baseline", p.stderr)

    def test_a_baseline_shares_cases_with_the_run(self):
        # The GPU kit's runs: one file per family of one machine. The copy run
        # (the latest) has no case in common with the network and layer runs
        # before it: none of them is its baseline.
        gpu = sorted((ROOT / "results" / "nvidia-h100-80gb-hbm3").glob("*.json.gz"))
        self.assertEqual([f.name.split("-")[1] for f in gpu], ["resnet20.json.gz", "layers.json.gz", "copy.json.gz"])
        self.results("ingest", *gpu, check_rc=0)
        p = self.results("check", "latest", check_rc=2)
        self.assertIn("with a case in common", p.stderr)
        self.results("ingest", BASE, NEW, check_rc=0)  # another machine's runs: the Xeon's pair
        self.assertEqual(self.store_verdicts("check", "latest:intel-xeon-processor-2c"), self.compare_py(BASE, NEW))

    # -- live -----------------------------------------------------------------------------------
    def test_two_live_runs_make_a_history_of_two_points(self):
        if not Path(BENCH).exists():
            self.fail(f"{BENCH} not built (scripts/build)")
        for i in range(2):
            out = self.tmp / f"live{i}.json"
            subprocess.run([BENCH, "--benchmark_filter=^daxpy/cpu_loop/n:1024/", "--benchmark_repetitions=3",
                            "--benchmark_min_time=0.01", f"--benchmark_out={out}", "--benchmark_out_format=json"],
                           check=True, capture_output=True)
            self.results("ingest", out, check_rc=0)
        hist = json.loads(self.results("history", "daxpy/cpu_loop/n:1024", "--json", check_rc=0).stdout)
        self.assertEqual(len(hist), 2)
        self.assertEqual([h["repetitions"] for h in hist], [3, 3])
        p = self.results("check")
        self.assertIn(p.returncode, (0, 1, 3), p.stderr)  # timings of this machine: any verdict
        self.assertIn("daxpy/cpu_loop/n:1024", p.stdout)

    def test_cli_errors(self):
        p = subprocess.run(RESULTS + ["--help"], capture_output=True, text=True, env=self.env)
        self.assertEqual(p.returncode, 0)
        self.assertIn("ingest FILE", p.stdout)
        p = self.results("ingest", self.tmp / "missing.json", check_rc=2)
        self.assertIn("missing.json", p.stderr)
        self.assertNotIn("Traceback", p.stderr)
        p = self.results(check_rc=2)  # no command
        self.assertNotIn("Traceback", p.stderr)


class SQLiteStore(StoreTests, unittest.TestCase):
    def fresh_db(self):
        return str(self.tmp / "results.sqlite")

    def test_default_path_is_outside_the_tree_and_created_on_first_use(self):
        env = {k: v for k, v in os.environ.items() if k != st.ENV}
        env["XDG_DATA_HOME"] = str(self.tmp / "xdg")
        p = subprocess.run(RESULTS + ["ingest", str(BASE)], capture_output=True, text=True, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue((self.tmp / "xdg" / "dlbench" / "results.sqlite").exists())
        env.pop("XDG_DATA_HOME")
        env["HOME"] = str(self.tmp / "home")
        subprocess.run(RESULTS + ["runs"], capture_output=True, text=True, env=env, check=True)
        self.assertTrue((self.tmp / "home" / ".local" / "share" / "dlbench" / "results.sqlite").exists())


class PostgresStore(StoreTests, unittest.TestCase):
    cluster = None

    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster()
        cls.cluster.start()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def fresh_db(self):
        return self.cluster.new_database()

    def test_url_with_a_down_server_is_a_one_line_error(self):
        env = {**self.env, st.ENV: f"postgresql://postgres@/nodb?host={self.tmp}&port=1"}
        p = subprocess.run(RESULTS + ["runs"], capture_output=True, text=True, env=env)
        self.assertEqual(p.returncode, 2)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        self.assertNotIn("Traceback", p.stderr)


if __name__ == "__main__":
    unittest.main()
