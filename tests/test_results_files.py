"""Results files in both forms: plain Google Benchmark JSON and the
gzip-compressed .json.gz that runs are committed as. Every reader goes
through dlbench.results, so a .json.gz must read exactly as its .json, and a
damaged one must be refused naming the file and the problem."""

import gzip
import json
import subprocess
import sys
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

from dlbench.results import ResultsError, load, merge_files, read_document, write_document  # noqa: E402
from tests.temp_dir import TempDirTestCase  # noqa: E402

FIXTURE = ROOT / "tests" / "data" / "bench_small.json"


class ResultsFiles(TempDirTestCase):
    def test_gz_reads_as_its_json(self):
        gz = self.dir / "run.json.gz"
        gz.write_bytes(gzip.compress(FIXTURE.read_bytes()))
        plain, packed = load(FIXTURE), load(gz)
        self.assertEqual(plain.context, packed.context)
        self.assertEqual(sorted(plain.cases), sorted(packed.cases))
        for name, case in plain.cases.items():
            self.assertEqual(case.runs, packed.cases[name].runs, name)

    def test_write_document_round_trips_and_is_deterministic(self):
        doc = read_document(FIXTURE)
        a, b = self.dir / "a.json.gz", self.dir / "b.json.gz"
        write_document(a, doc)
        write_document(b, doc)
        self.assertEqual(a.read_bytes(), b.read_bytes())  # mtime 0: same bytes
        self.assertEqual(read_document(a), doc)
        self.assertEqual(a.read_bytes()[:2], b"\x1f\x8b")  # gzip magic
        plain = self.dir / "c.json"
        write_document(plain, doc)
        self.assertEqual(read_document(plain), doc)
        self.assertEqual(sorted(p.name for p in self.dir.iterdir()), ["a.json.gz", "b.json.gz", "c.json"])

    def test_damaged_files_are_refused_with_the_reason(self):
        data = gzip.compress(FIXTURE.read_bytes())
        truncated = self.dir / "truncated.json.gz"
        truncated.write_bytes(data[: len(data) // 2])
        not_gzip = self.dir / "plain-named.json.gz"
        not_gzip.write_bytes(FIXTURE.read_bytes())
        not_json = self.dir / "text.json.gz"
        not_json.write_bytes(gzip.compress(b"{ not json"))
        cut_json = self.dir / "cut.json"
        cut_json.write_bytes(FIXTURE.read_bytes()[:1000])
        for path, reason in ((truncated, "ends early"), (not_gzip, "cannot read"), (not_json, "not JSON"),
                             (cut_json, "not JSON"), (self.dir / "missing.json.gz", "cannot read")):
            with self.subTest(path=path.name):
                with self.assertRaises(ResultsError) as e:
                    load(path)
                self.assertIn(str(path), str(e.exception))
                self.assertIn(reason, str(e.exception))

    def test_quality_cli_reads_gz_and_names_a_bad_file(self):
        gz = self.dir / "run.json.gz"
        gz.write_bytes(gzip.compress(FIXTURE.read_bytes()))
        cli = [sys.executable, str(ROOT / "scripts" / "quality.py")]
        p = subprocess.run(cli + [str(FIXTURE)], capture_output=True, text=True)
        q = subprocess.run(cli + [str(gz)], capture_output=True, text=True)
        self.assertEqual(p.returncode, q.returncode, q.stderr)
        self.assertEqual(p.stdout.replace(str(FIXTURE), "F"), q.stdout.replace(str(gz), "F"))
        bad = self.dir / "bad.json.gz"
        bad.write_bytes(b"\x1f\x8b\x08\x00garbage")
        r = subprocess.run(cli + [str(bad)], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("bad.json.gz", r.stderr)
        self.assertNotIn("Traceback", r.stderr)

    def test_merged_processes_keep_each_wall_time_and_sum_them(self):
        doc = read_document(FIXTURE)
        paths = []
        for i, wall in enumerate((12.5, 30.25, None)):
            d = json.loads(json.dumps(doc))
            if wall is not None:
                d["context"]["dlbench_wall_s"] = wall
            paths.append(self.dir / f"{i}.json")
            write_document(paths[-1], d)
        both = merge_files(paths[:2])["context"]
        self.assertEqual((both["process_wall_s"], both["dlbench_wall_s"]), ([12.5, 30.25], 42.8))
        self.assertEqual(both["process_runs"], [None, None])  # what each ran (dlbench_run), where recorded
        # One process without a wall time: the sum would understate the run.
        all_three = merge_files(paths)["context"]
        self.assertEqual(all_three["process_wall_s"], [12.5, 30.25, None])
        self.assertNotIn("dlbench_wall_s", all_three)
        self.assertNotIn("process_wall_s", merge_files([paths[2], paths[2]])["context"])

    def test_merged_rounds_keep_what_any_round_of_peers_labelled_left_or_stopped(self):
        doc = read_document(FIXTURE)
        rounds = [({"a/peer_x": "x 1.0"}, ["a/peer_y"], None), ({"a/peer_z": "z 2.0"}, ["a/peer_y", "b/peer_y"],
                                                                  "SIGTERM"), ({}, [], None)]
        paths = []
        for i, (labels, not_run, stopped) in enumerate(rounds):
            d = json.loads(json.dumps(doc))
            if labels:
                d["context"]["peers"] = labels
            if not_run:
                d["context"]["peers_not_run"] = not_run
            if stopped:
                d["context"]["peers_stopped"] = stopped
            paths.append(self.dir / f"{i}.json")
            write_document(paths[-1], d)
        merged = merge_files(paths)["context"]
        self.assertEqual(merged["peers"], {"a/peer_x": "x 1.0", "a/peer_z": "z 2.0"})
        self.assertEqual(merged["peers_not_run"], ["a/peer_y", "b/peer_y"])
        self.assertEqual(merged["peers_stopped"], "SIGTERM")  # the second round's, though the first had none
        plain = merge_files(paths[2:])["context"]
        self.assertFalse({"peers", "peers_not_run", "peers_stopped"} & set(plain))

    def test_walltime_records_into_json_and_gz_and_refuses_bad_input(self):
        cli = [sys.executable, str(ROOT / "scripts" / "dlbench" / "walltime.py"), "record"]
        gz = self.dir / "run.json.gz"
        write_document(gz, read_document(FIXTURE))
        p = subprocess.run(cli + [str(gz), "--wall-s", "61.04", "--run", "build/bench --suite=default"],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        context = load(gz).context
        self.assertEqual((context["dlbench_wall_s"], context["dlbench_run"]), (61.0, "build/bench --suite=default"))
        self.assertRegex(context["dlbench_load_at_end"], r"^[\d.]+ [\d.]+ [\d.]+$")
        self.assertEqual(load(gz).cases.keys(), load(FIXTURE).cases.keys())
        not_json = self.dir / "text.json"
        not_json.write_text("{ not json")
        for args, message in (([str(self.dir / "missing.json"), "--wall-s", "1"], "missing.json: cannot read"),
                              ([str(not_json), "--wall-s", "1"], "text.json: not JSON"),
                              ([str(gz), "--wall-s", "-3"], "not a duration"),
                              ([str(gz), "--wall-s", "1", "--key", "other"], "must end in _wall_s")):
            with self.subTest(message=message):
                p = subprocess.run(cli + args + ["--run", "x"], capture_output=True, text=True)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn(message, p.stderr)
                self.assertNotIn("Traceback", p.stderr)

    def test_committed_runs_are_compressed_and_readable(self):
        files = sorted((ROOT / "results").rglob("*.json*"))
        self.assertTrue(files)
        for f in files:
            self.assertTrue(f.name.endswith(".json.gz") or f.name.endswith(".jsonl"), f)
        load(files[0])
        load(files[-1])


if __name__ == "__main__":
    unittest.main()
