"""bench --benchmark_out=FILE in JSON is written as the run goes: a run that
`timeout` stops (SIGTERM) leaves a complete JSON file holding every case it
finished, where Google Benchmark's own reporter writes only at the end and
leaves an empty file. A run to its end writes Google Benchmark's format (the
byte-for-byte comparison with JSONReporter is test_bench_json_out, in C++);
other formats keep Google Benchmark's reporter; the console summary of the
display reporter stays."""

import json
import os
import signal
import subprocess
import tempfile
import time
import unittest
from pathlib import Path

BENCH = os.environ.get("DLB_BENCH", "build/bench")

# Cheap single-threaded CPU cases, each held to --benchmark_min_time.
FILTER = "^daxpy/cpu_loop/"
ARGS = ["--benchmark_min_time=0.2", "--benchmark_repetitions=1"]


def listed(flt):
    p = subprocess.run([BENCH, f"--benchmark_filter={flt}", "--benchmark_list_tests"], capture_output=True,
                       text=True, timeout=120, check=True)
    return [line for line in p.stdout.splitlines() if line]


def load(path):
    try:
        return json.loads(Path(path).read_text())
    except (ValueError, OSError):
        return None


class CutRun(unittest.TestCase):
    def test_sigterm_keeps_every_finished_case(self):
        cases = listed(FILTER)
        self.assertGreaterEqual(len(cases), 4, cases)
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "cut.json"
            p = subprocess.Popen([BENCH, f"--benchmark_filter={FILTER}", *ARGS, f"--benchmark_out={out}",
                                  "--benchmark_out_format=json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
            seen = 0
            deadline = time.monotonic() + 120
            try:
                # Until two cases are in the file, then stop it as `timeout` does.
                # Only what the file held in the middle of the run counts (a
                # file written at the end is complete a moment before bench exits).
                while seen < 2 and time.monotonic() < deadline and p.poll() is None:
                    time.sleep(0.02)
                    j = load(out)
                    if j is not None and len(j["benchmarks"]) < len(cases):
                        seen = max(seen, len(j["benchmarks"]))
                p.send_signal(signal.SIGTERM)
            finally:
                stdout, stderr = p.communicate(timeout=60)
            self.assertGreaterEqual(seen, 2, "no two finished cases in the JSON file while bench ran: " + stderr)
            self.assertEqual(p.returncode, -signal.SIGTERM, "bench ended before it was stopped: " + stderr)
            text = out.read_text()
            got = json.loads(text)  # complete, valid JSON
        self.assertTrue(text.endswith("\n  ]\n}\n"), text[-40:])
        self.assertIn("machine", got["context"])  # bench's own context, as Google Benchmark writes it
        names = [b["run_name"] for b in got["benchmarks"]]
        self.assertGreaterEqual(len(names), seen)
        self.assertLess(len(names), len(cases), "every case finished: nothing was cut")
        self.assertEqual(names, cases[:len(names)])  # the finished cases, in order
        for b in got["benchmarks"]:
            for key in ("name", "run_type", "iterations", "real_time", "cpu_time", "time_unit", "bytes_per_second"):
                self.assertIn(key, b)


class WholeRun(unittest.TestCase):
    def test_a_whole_run_writes_every_case_and_the_console_summary(self):
        cases = listed("^daxpy/cpu_loop/n:1024/")
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "run.json"
            p = subprocess.run([BENCH, "--benchmark_filter=^daxpy/cpu_loop/n:1024/", "--benchmark_min_time=0.01",
                                "--benchmark_repetitions=3", f"--benchmark_out={out}"], capture_output=True,
                               text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            got = json.loads(out.read_text())
        # 3 repetitions and Google Benchmark's aggregates (mean, median, stddev, cv), in that order.
        kinds = [(b["run_type"], b.get("aggregate_name", "")) for b in got["benchmarks"]]
        self.assertEqual(kinds[:3], [("iteration", "")] * 3)
        self.assertEqual([k for k, _ in kinds[3:]], ["aggregate"] * (len(kinds) - 3))
        self.assertIn(("aggregate", "mean"), kinds)
        self.assertEqual({b["run_name"] for b in got["benchmarks"]}, set(cases))
        # The display reporter (TallyingReporter) still reports and tallies
        # the case's repetitions (a tally of none says "not watched").
        self.assertIn("daxpy/cpu_loop/n:1024", p.stdout)
        self.assertIn("bench: machine during the run: largest contention", p.stderr)

    def test_other_formats_keep_google_benchmarks_reporter(self):
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "run.csv"
            p = subprocess.run([BENCH, "--benchmark_filter=^daxpy/cpu_loop/n:1024/", "--benchmark_min_time=0.01",
                                f"--benchmark_out={out}", "--benchmark_out_format=csv"], capture_output=True,
                               text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            text = out.read_text()
        self.assertIn("\nname,iterations,real_time", text)  # after Google Benchmark's context lines
        self.assertIn('"daxpy/cpu_loop/n:1024/real_time"', text)

    def test_the_environment_names_the_file_as_for_google_benchmark(self):
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "env.json"
            p = subprocess.run([BENCH, "--benchmark_filter=^daxpy/cpu_loop/n:1024/", "--benchmark_min_time=0.01"],
                               capture_output=True, text=True, timeout=120,
                               env={**os.environ, "BENCHMARK_OUT": str(out)})
            self.assertEqual(p.returncode, 0, p.stderr)
            got = json.loads(out.read_text())
        self.assertEqual(got["benchmarks"][0]["run_name"], "daxpy/cpu_loop/n:1024/real_time")


if __name__ == "__main__":
    unittest.main()
