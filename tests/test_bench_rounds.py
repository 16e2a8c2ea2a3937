"""scripts/bench --peers with DLB_PROCESSES > 1 runs the peers in rounds,
after each bench process, into that process's part of the one file: the
ratio of ours to a peer then pools repetitions that met the same phases of
a shared machine (docs/peers.md, "Rounds"). Runs the whole script (its
setup and build are no-ops on a built tree) on daxpy with the NumPy peer
(in .venv), into a temporary results folder and store (DLB_RESULTS_DIR,
DLB_RESULTS_DB)."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from dlbench.results import read_document  # noqa: E402

CASES = "^daxpy/(cpu_loop|peer_numpy)/n:1024/"


class Rounds(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="dlb-rounds-"))
        self.plots = None

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)
        if self.plots is not None:
            shutil.rmtree(self.plots, ignore_errors=True)

    def bench(self, processes: int, venv: str = ".venv", status: int = 0) -> tuple[dict, str]:
        env = dict(os.environ, DLB_RESULTS_DIR=str(self.tmp / "results"), DLB_RESULTS_DB=str(self.tmp / "db.sqlite"),
                   DLB_PROCESSES=str(processes), DLB_REPETITIONS="2", DLB_MIN_TIME="0.01", DLB_PEERS_VENV=venv)
        p = subprocess.run([str(ROOT / "scripts" / "bench"), "--peers", f"--benchmark_filter={CASES}"], cwd=ROOT,
                           env=env, capture_output=True, text=True, timeout=900)
        self.assertEqual(p.returncode, status, p.stdout[-3000:] + p.stderr[-3000:])
        m = re.search(r"bench: results in (\S+), plots in (\S+)/", p.stdout)
        self.assertIsNotNone(m, p.stdout[-3000:])
        self.plots = ROOT / m.group(2)
        out = Path(m.group(1))
        self.assertEqual(out.parent.parent, self.tmp / "results")  # not the source tree's results/
        self.assertEqual(list((ROOT / "results").glob(f"*/{out.name}")), [])
        return read_document(out), p.stderr

    def test_peers_after_each_process_into_its_part(self):
        doc, _ = self.bench(2)
        context = doc["context"]
        self.assertEqual(context["processes"], 2)
        self.assertIn("after each of the 2 processes", context["dlbench_peers_run"])
        self.assertIn("daxpy/peer_numpy", context["peers"])
        for index in (0, 1):
            with self.subTest(process=index):
                names = {e["run_name"] for e in doc["benchmarks"]
                         if e.get("process_index") == index and e.get("run_type") == "iteration"}
                self.assertEqual(names, {"daxpy/cpu_loop/n:1024/real_time", "daxpy/peer_numpy/n:1024/real_time"})
        # Each round's peers come after its bench process's cases, in the file as in time.
        order = [(e.get("process_index"), "peer" in e["run_name"]) for e in doc["benchmarks"]]
        self.assertEqual(order, sorted(order))

    def test_rounds_whose_peers_fail_keep_ours_and_end_in_exit_1(self):
        doc, stderr = self.bench(2, venv=str(self.tmp / "no-such-venv"), status=1)
        self.assertIn("the peers failed in round 1 2 of 2", stderr)
        self.assertIn("failed in round 1 2", doc["context"]["dlbench_peers_run"])
        names = {(e.get("process_index"), e["run_name"]) for e in doc["benchmarks"] if e.get("run_type") == "iteration"}
        self.assertEqual(names, {(0, "daxpy/cpu_loop/n:1024/real_time"), (1, "daxpy/cpu_loop/n:1024/real_time")})


if __name__ == "__main__":
    unittest.main()
