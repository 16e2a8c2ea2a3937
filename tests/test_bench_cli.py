"""bench's own command line (bench/command_line.h): --help lists every
DLB_BENCH_FLAG, the suites and every DLB_ environment variable the sources read,
before Google Benchmark's flags; --list_families accounts for every registered
case; --check_only validates and times nothing; a flag without its value, a
GPU suite without a GPU and --trace without a network case fail before
anything runs; a bare run of the full suite says so. The flags and variables
are read from the sources here, so that one added without help fails the test.
DLB_BENCH is the bench binary (set by ctest)."""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from dlbench.names import case_name, split_name  # noqa: E402
BENCH = os.environ.get("DLB_BENCH", str(ROOT / "build" / "bench"))


def bench(*args, timeout=300):
    return subprocess.run([BENCH, *args], capture_output=True, text=True, timeout=timeout)


def bench_output(*args):
    """bench's standard output for `args`; the run must succeed."""
    p = bench(*args)
    assert p.returncode == 0, p.stderr
    return p.stdout


def sources(*folders, suffixes=(".cpp", ".h", ".cu")):
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in suffixes and path.is_file():
                yield path, path.read_text(errors="replace")


def own_flags():
    """(name, value) of every DLB_BENCH_FLAG in bench/: value "" for a switch."""
    flags = []
    for path, text in sources("bench"):
        for m in re.finditer(r'DLB_BENCH_FLAG\(\s*\w+\s*,\s*"(\w+)"\s*,\s*"([^"]*)"', text):
            flags.append(m.groups())
    return flags


def environment_variables():
    """Every DLB_ variable bench, the kernels, the references, scripts/bench and
    the GPU test binaries read."""
    names = set()
    for path, text in sources("bench", "kernels", "reference"):
        names |= set(re.findall(r'getenv\(\s*"(DLB_\w+)"', text))
    names |= set(re.findall(r'getenv\(\s*"(DLB_\w+)"', (ROOT / "tests/gpu_test_main.cpp").read_text()))
    names |= set(re.findall(r"\$\{(DLB_\w+)", (ROOT / "scripts/bench").read_text()))
    return names


def listed_names(*args):
    p = bench("--benchmark_list_tests", *args)
    return p, [line for line in p.stdout.split("\n") if line]


class Help(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.out = bench_output("--help")
        cls.ours = cls.out[cls.out.index("dlbench's own flags:"):cls.out.index("Google Benchmark's flags:")]

    def test_own_flags_come_before_google_benchmarks(self):
        self.assertLess(self.out.index("dlbench's own flags:"), self.out.index("Google Benchmark's flags:"))
        self.assertLess(self.out.index("Google Benchmark's flags:"), self.out.index("[--benchmark_filter=<regex>]"))
        self.assertNotIn("[--benchmark_", self.ours)

    def test_every_flag_is_listed(self):
        flags = own_flags()
        self.assertGreaterEqual({name for name, _ in flags},
                                {"suite", "gpu_min_time", "trace", "conv", "list_families", "check_only"})
        for name, value in flags:
            with self.subTest(flag=name):
                line = f"  --{name}={value}\n" if value else f"  --{name}\n"
                self.assertIn(line, self.ours)

    def test_every_suite_is_listed_with_its_help(self):
        suites = re.search(r'DLB_BENCH_FLAG\(suite, "suite", "([^"]+)"', (ROOT / "bench/suites.cpp").read_text())[1]
        for suite in suites.split("|"):
            with self.subTest(suite=suite):
                self.assertRegex(self.ours, rf"(?m)^        {re.escape(suite)} +\S")
        self.assertRegex(self.ours, r"(?m)^        gpu-quick .*\(needs a GPU\)$")

    def test_every_environment_variable_is_listed(self):
        names = environment_variables()
        self.assertGreaterEqual(names, {"DLB_MODELS_DIR", "DLB_FASHION_MNIST_DIR", "DLB_MIN_TIME", "DLB_REQUIRE_GPU"})
        for name in names:
            with self.subTest(variable=name):
                self.assertRegex(self.ours, rf"(?m)^  {name}\n      \S")


class ValuesAndSuites(unittest.TestCase):
    def test_a_flag_without_its_value_says_what_it_needs(self):
        for name, value in own_flags():
            with self.subTest(flag=name):
                if value:
                    p = bench(f"--{name}", "--benchmark_list_tests")
                    self.assertIn(f"bench: --{name} needs a value: --{name}={value}, e.g. --{name}=", p.stderr)
                else:
                    p = bench(f"--{name}=yes", "--benchmark_list_tests")
                    self.assertIn(f"bench: --{name} takes no value: --{name}", p.stderr)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertNotIn("unknown argument", p.stderr)
                self.assertEqual(p.stdout, "")

    def test_gpu_quick_without_a_gpu_exits_2_saying_why(self):
        if "GPU cases are not registered" not in bench("--benchmark_list_tests", "--benchmark_filter=^roofline/").stderr:
            self.skipTest("a GPU is visible")
        p = bench("--suite=gpu-quick")
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("--suite=gpu-quick holds GPU cases only and needs a GPU", p.stderr)
        # scripts/gpu-kit's check without a GPU reads this phrase.
        self.assertIn("GPU cases are not registered", p.stderr)
        self.assertNotIn("Failed to match", p.stderr)
        self.assertEqual(p.stdout, "")


class Trace(unittest.TestCase):
    def test_a_filter_without_a_network_case_fails_before_running(self):
        with tempfile.TemporaryDirectory() as d:
            trace, out = Path(d) / "t.json", Path(d) / "run.json"
            p = bench(f"--trace={trace}", "--benchmark_filter=^daxpy/cpu_loop/n:1024/", "--benchmark_min_time=0.001",
                      f"--benchmark_out={out}", "--benchmark_out_format=json")
            self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
            self.assertIn("--trace: the filter '^daxpy/cpu_loop/n:1024/' selects no case that writes a trace", p.stderr)
            self.assertIn("--trace needs a network case (<network>/<backend>/batch:<b>) or a layer case", p.stderr)
            self.assertIn("(Google Benchmark: ", bench(f"--trace={trace}", "--benchmark_filter=((").stderr)
            self.assertEqual(p.stdout, "")  # nothing ran
            self.assertFalse(out.exists())
            self.assertFalse(trace.exists())

    def test_a_filter_with_a_network_case_passes_the_check(self):
        # Listing only: the check passes, then nothing runs, so no trace is
        # written and bench says so at the end (exit 2, the at_end message).
        with tempfile.TemporaryDirectory() as d:
            p = bench(f"--trace={Path(d) / 't.json'}", "--benchmark_filter=^mnist_lenet/cpu_own/batch:1/",
                      "--benchmark_list_tests")
        self.assertNotIn("selects no case that writes a trace", p.stderr)
        self.assertIn("mnist_lenet/cpu_own/batch:1/", p.stdout)


class FullSuiteNote(unittest.TestCase):
    def test_a_bare_run_says_it_is_the_full_suite(self):
        _, names = listed_names()
        # Killed as soon as the note is out: the note comes before any case runs.
        proc = subprocess.Popen([BENCH], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            note = None
            for line in proc.stderr:
                if "the full suite" in line:
                    note = line
                    break
                if line.startswith("Run on ("):  # Google Benchmark's context: the run has begun
                    break
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            proc.stderr.close()
        self.assertIsNotNone(note)
        self.assertEqual(note.strip(),
                         f"bench: the full suite: {len(names):,} cases; scripts/bench runs "
                         "the default suite (--suite=default; --benchmark_filter=REGEX narrows either)")

    def test_no_note_with_a_filter(self):
        p = bench("--benchmark_filter=^daxpy/cpu_loop/n:1024/", "--benchmark_min_time=0.001")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("the full suite", p.stderr)


class ListFamilies(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.out = bench_output("--list_families")
        cls.families = {}
        for block in cls.out.split("\n\n")[1:]:
            lines = block.strip("\n").split("\n")
            name, answers = lines[0].split(": ", 1)
            family = {"answers": answers, "names": [], "prefixes": set(), "suites": "", "cpu": [], "gpu": [],
                      "gpu_line": ""}
            for line in lines[1:]:
                key, rest = line.strip().split(None, 1)
                if key == "names":
                    family["names"].append(rest)
                    family["prefixes"] |= set(split_name(rest).op.strip("{}").split("|"))
                elif key == "suites":
                    family["suites"] = rest
                elif key in ("CPU", "GPU"):
                    variants = [] if rest.startswith("none") else rest.split(" (")[0].split(", ")
                    family[key.lower()] = variants
                    if key == "GPU":
                        family["gpu_line"] = rest
            cls.families[name] = family

    def test_every_registered_case_belongs_to_a_listed_family(self):
        p, names = listed_names()
        self.assertEqual(p.returncode, 0, p.stderr)
        # A listing, not a stub: 972 cases with AVX2 alone (no int8 or bf16
        # rows), 1,656 with AVX-512 VNNI and BF16 (README.md).
        self.assertGreater(len(names), 900)
        for listed in names:
            n = split_name(listed)
            owners = [f for f, fam in self.families.items()
                      if n.op in fam["prefixes"] and n.variant in fam["cpu"] + fam["gpu"]]
            self.assertTrue(owners, listed)

    def test_each_family_says_what_it_answers_and_where_it_runs(self):
        self.assertGreaterEqual(set(self.families), {"roofline", "daxpy", "softmax", "gemm", "conv", "nn", "layers"})
        gpu_visible = "GPU: none" not in self.out.split("\n")[0]
        for name, fam in self.families.items():
            with self.subTest(family=name):
                self.assertGreater(len(fam["answers"]), 20)
                self.assertTrue(fam["names"])
                self.assertIn("full (", fam["suites"])
                self.assertTrue(fam["cpu"] or fam["gpu"])
                if fam["gpu"] and not gpu_visible:
                    self.assertIn("needs a GPU", fam["gpu_line"])
        self.assertEqual(self.families["daxpy"]["names"], ["daxpy/<variant>/n:<n>"])
        self.assertIn("cpu_loop", self.families["daxpy"]["cpu"])

    def test_the_count_is_the_registered_cases(self):
        _, names = listed_names()
        m = re.match(r"bench: \d+ families, ([\d,]+) cases: ([\d,]+) CPU, ([\d,]+) GPU", self.out)
        self.assertTrue(m, self.out[:200])
        total, cpu, gpu = (int(x.replace(",", "")) for x in m.groups())
        self.assertEqual(total, cpu + gpu)
        if "GPU: none" in self.out.split("\n")[0]:
            self.assertEqual(cpu, len(names))  # a run here registers the CPU ones

    def test_it_takes_no_other_flag_of_dlbenchs(self):
        p = bench("--list_families", "--conv=n1c3h7w7k5r3s3stride1pad1")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--list_families lists every family and takes no other flag", p.stderr)


class CheckOnly(unittest.TestCase):
    FILTER = "^(daxpy/cpu_loop/n:1024|daxpy/cpu_eigen/n:65536|(log_)?softmax/cpu_[a-z0-9_]+/rows:128/cols:1024)/"

    def test_one_line_per_case_nothing_timed(self):
        _, names = listed_names(f"--benchmark_filter={self.FILTER}")
        cases = [case_name(n) for n in names]
        self.assertGreater(len(cases), 4)
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "run.json"
            p = bench("--check_only", f"--benchmark_filter={self.FILTER}", "--benchmark_repetitions=3",
                      f"--benchmark_out={out}", "--benchmark_out_format=json")
            runs = json.loads(out.read_text())["benchmarks"]
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        lines = p.stdout.strip().split("\n")
        self.assertEqual(lines[-1], f"check_only: {len(cases)} cases: {len(cases)} pass, 0 FAIL, 0 unsupported, "
                                    "0 bad input")
        self.assertEqual([re.match(r"pass +(\S+): ok: max_rel_err", line)[1] for line in lines[:-1]], cases)
        # Nothing timed: every run Google Benchmark reports is the skipped check.
        self.assertTrue(runs)
        self.assertTrue(all(r.get("error_occurred") and r["error_message"].startswith("check_only: ") for r in runs))
        self.assertNotIn("the full suite", p.stderr)

    def test_missing_weights_are_bad_input(self):
        with tempfile.TemporaryDirectory() as d:
            p = subprocess.run([BENCH, "--check_only", "--benchmark_filter=^mnist_lenet/cpu_own/batch:1/"],
                               capture_output=True, text=True, timeout=300, env={**os.environ, "DLB_MODELS_DIR": d})
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertRegex(p.stdout, r"(?m)^bad input    mnist_lenet/cpu_own/batch:1: mnist_lenet: .*mnist_lenet.safetensors")
        self.assertIn("check_only: 1 case: 0 pass, 0 FAIL, 0 unsupported, 1 bad input", p.stdout)

    def test_refused_beside_trace(self):
        with tempfile.TemporaryDirectory() as d:
            trace = Path(d) / "t.json"
            p = bench("--check_only", f"--trace={trace}", "--benchmark_filter=^mnist_lenet/cpu_own/batch:1/")
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("--check_only times nothing, so --trace has nothing to write", p.stderr)
            self.assertFalse(trace.exists())


if __name__ == "__main__":
    unittest.main()
