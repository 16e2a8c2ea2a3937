"""scripts/readme.py: rewrites the generated blocks from JSON, only the
families asked for with --families, and --check says when README is stale.
Runs on the committed networks fixture."""

import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "scripts" / "readme.py"
FIXTURE = ROOT / "tests" / "data" / "networks_small.json"

TEXT = """# t
<!-- BEGIN GENERATED networks -->
old networks
<!-- END GENERATED networks -->
<!-- BEGIN GENERATED softmax -->
kept softmax
<!-- END GENERATED softmax -->
"""


def readme(*args):
    return subprocess.run([sys.executable, str(README), *args], capture_output=True, text=True)


class Readme(unittest.TestCase):
    def test_families_rewrites_only_those_blocks_and_check_agrees(self):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "README.md"
            path.write_text(TEXT)
            self.assertEqual(readme(str(FIXTURE), "--readme", str(path), "--families", "networks", "--check").returncode, 1)
            p = readme(str(FIXTURE), "--readme", str(path), "--families", "networks")
            self.assertEqual(p.returncode, 0, p.stderr)
            text = path.read_text()
            self.assertNotIn("old networks", text)
            self.assertIn("**resnet20**", text)
            self.assertIn(f"From `{FIXTURE.as_posix()}`", text)
            self.assertIn("kept softmax", text)
            self.assertEqual(readme(str(FIXTURE), "--readme", str(path), "--families", "networks", "--check").returncode, 0)

    def test_unknown_family_exits_2(self):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "README.md"
            path.write_text(TEXT)
            p = readme(str(FIXTURE), "--readme", str(path), "--families", "networkz")
            self.assertEqual(p.returncode, 2)
            self.assertIn("unknown families networkz", p.stderr)
            self.assertEqual(path.read_text(), TEXT)


class Durations(unittest.TestCase):
    """A durations block says how long each named run took, from the wall
    time it recorded (scripts/dlbench/walltime.py) or a GPU kit summary's
    family lines; a run without one is said to have none, never given one."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = Path(self.dir.name)
        (self.root / "results" / "m").mkdir(parents=True)
        (self.root / "docs").mkdir()
        doc = json.loads((ROOT / "tests" / "data" / "bench_small.json").read_text())
        doc["context"].update(suite="default", machine_load_at_start="loadavg 3.24 6.59 3.35; cpu pressure avg10 0%")
        (self.root / "results" / "m" / "old.json").write_text(json.dumps(doc))
        stamped = self.root / "results" / "m" / "new.json"
        stamped.write_text(json.dumps(doc))
        p = subprocess.run([sys.executable, str(ROOT / "scripts" / "dlbench" / "walltime.py"), "record", str(stamped),
                            "--wall-s", "754.26", "--run", "build/bench --suite=default"],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        (self.root / "results" / "g").mkdir()
        (self.root / "results" / "g" / "1-summary.txt").write_text(
            "kit: abc\nbench roofline: 5 cases in 11s (limit 15s)\n  gpu_name: X\n"
            "FAIL: bench copy: over its 65s limit: 40 cases kept (complete), 10 of 50 listed lost\n")
        self.page = self.root / "docs" / "d.md"

    def tearDown(self):
        self.dir.cleanup()

    def generate(self, sources):
        self.page.write_text(f"<!-- BEGIN GENERATED durations FROM {sources} -->\n<!-- END GENERATED durations -->\n")
        return readme("--root", str(self.root))

    def test_the_recorded_wall_time_load_and_cases(self):
        p = self.generate("results/m/new.json results/m/old.json")
        self.assertEqual(p.returncode, 0, p.stderr)
        text = " ".join(self.page.read_text().split())
        context = json.loads((self.root / "results" / "m" / "new.json").read_text())["context"]
        self.assertEqual(context["dlbench_wall_s"], 754.3)
        self.assertEqual(context["dlbench_run"], "build/bench --suite=default")
        end = float(context["dlbench_load_at_end"].split()[0])
        self.assertIn("the `default` suite (17 cases, 2 repetitions) on `intel-xeon-processor-2c`: 12.6 minutes, "
                      f"load average 3.2 at its start and {end:.1f} at its end on 2 CPUs "
                      "(`results/m/new.json`, commit ", text)
        self.assertIn("the `default` suite (17 cases, 2 repetitions) on `intel-xeon-processor-2c`: its wall time is "
                      "not recorded", text)
        self.assertEqual(readme("--root", str(self.root), "--check").returncode, 0)

    def test_a_kit_summary_sums_its_families(self):
        p = self.generate("results/g/1-summary.txt")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("(2 families, one process each): 45 cases in 76 s on `g` (copy cut at its limit), by the kit's "
                      "own clock (its summary, `results/g/1-summary.txt`): roofline 5 in 11 s, copy 40 in 65 s.",
                      " ".join(self.page.read_text().split()))

    def test_a_kit_runs_families_sum_once_each_without_the_peers(self):
        """The kit's files of one run (one stamp) make one line: the bench
        families' seconds summed, each process once (the networks file has
        the fused family and the peers merged in), the peers' not."""
        sys.path.insert(0, str(ROOT / "scripts"))
        try:
            from dlbench import results
        finally:
            sys.path.pop(0)
        doc = json.loads((self.root / "results" / "m" / "old.json").read_text())
        doc["context"]["suite"] = "gpu-quick"
        g = self.root / "results" / "g"
        parts = {}
        for name, wall, run in (("daxpy", 10, "scripts/gpu-kit bench, family daxpy"),
                                ("networks", 20, "scripts/gpu-kit bench, family networks"),
                                ("fused", 5, "scripts/gpu-kit bench, family fused"),
                                ("peers", 100, "scripts/gpu-kit peers: scripts/peers --list_gpu")):
            d = json.loads(json.dumps(doc))
            d["context"].update(dlbench_wall_s=wall, dlbench_run=run)
            parts[name] = g / f"{name}.json"
            results.write_document(parts[name], d)
        results.write_document(g / "1-daxpy.json", results.read_document(parts["daxpy"]))
        results.write_document(g / "1-peers.json", results.read_document(parts["peers"]))
        results.write_document(g / "1-networks.json",
                               results.merge_files([parts["networks"], parts["fused"], parts["peers"]]))
        p = self.generate("results/g/1-daxpy.json results/g/1-networks.json results/g/1-peers.json")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("the `gpu-quick` suite (17 cases, 2 repetitions, 3 files) on `intel-xeon-processor-2c`: 35 s",
                      " ".join(self.page.read_text().split()))

    def test_a_summary_without_family_lines_or_for_a_table_exits_2(self):
        (self.root / "results" / "g" / "2-summary.txt").write_text("kit: abc\n")
        p = self.generate("results/g/2-summary.txt")
        self.assertEqual(p.returncode, 2)
        self.assertIn("results/g/2-summary.txt: no bench family line", p.stderr)
        self.page.write_text("<!-- BEGIN GENERATED networks FROM results/g/1-summary.txt -->\n"
                             "<!-- END GENERATED networks -->\n")
        p = readme("--root", str(self.root), "--check")
        self.assertEqual(p.returncode, 2)
        self.assertIn("durations blocks only", p.stderr)


if __name__ == "__main__":
    unittest.main()
