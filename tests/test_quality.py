"""Disturbance detection: scripts/quality.py and dlbench.quality on runs whose
machine state is given (edited from a real run of the binary), compare.py's
treatment of noisy cases, and the counters the binary itself writes
(structure and identities only: nothing here depends on how busy the machine is)."""

import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from dlbench import compare as cmp  # noqa: E402
from dlbench.quality import quality  # noqa: E402
from dlbench.results import load  # noqa: E402

QUALITY = ROOT / "scripts" / "quality.py"
COMPARE = ROOT / "scripts" / "compare.py"
BENCH = os.environ.get("DLB_BENCH", str(ROOT / "build" / "bench"))
FILTER = "^(roofline/cpu_fma/|daxpy/cpu_loop/n:(1024|2048)/)"


def run_bench(directory: str, name: str, repetitions: int, *extra: str) -> tuple[Path, str]:
    """The binary's JSON of FILTER (the file) and its stderr."""
    out = Path(directory) / name
    p = subprocess.run([BENCH, f"--benchmark_filter={FILTER}", f"--benchmark_repetitions={repetitions}",
                        "--benchmark_min_time=0.01", f"--benchmark_out={out}", "--benchmark_out_format=json", *extra],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError(p.stdout + p.stderr)
    return out, p.stderr


def write(data: dict, directory: str, name: str) -> Path:
    path = Path(directory) / name
    path.write_text(json.dumps(data))
    return path


class BinaryCounters(unittest.TestCase):
    """What bench writes: every CPU repetition has noisy/contention/steal, a
    bracketed case frac_of_ceiling * ceiling == bytes_per_second."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        # As scripts/bench runs it: the console shows the aggregates only.
        out, cls.stderr = run_bench(cls.tmp.name, "run.json", 3, "--benchmark_display_aggregates_only=true")
        cls.data = json.loads(out.read_text())
        cls.path = out
        cls.runs = [b for b in cls.data["benchmarks"] if b.get("run_type") == "iteration"]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_every_cpu_repetition_says_whether_it_was_noisy(self):
        self.assertEqual(len(self.runs), 9)
        for b in self.runs:
            self.assertIn(b["noisy"], (0.0, 1.0), b["name"])
            if Path("/proc/pressure/cpu").exists():
                self.assertGreaterEqual(b["contention"], 0.0, b["name"])
            self.assertGreaterEqual(b["steal"], 0.0, b["name"])

    def test_bracketed_cases_carry_their_ceiling(self):
        daxpy = [b for b in self.runs if b["name"].startswith("daxpy/")]
        self.assertEqual(len(daxpy), 6)
        for b in daxpy:
            self.assertEqual(b["label"], "vs roofline/cpu_triad, 1 thread")  # cpu_loop is one thread
            self.assertGreater(b["ceiling_bytes_per_second"], 1e9)  # any machine moves a GB/s
            # frac_of_ceiling is timed just outside Google Benchmark's own
            # clock: the same figure but for the time between the two reads,
            # which a preemption can stretch (then the repetition is noisy).
            if b["noisy"] == 0:
                self.assertAlmostEqual(
                    b["frac_of_ceiling"] * b["ceiling_bytes_per_second"] / b["bytes_per_second"], 1.0, places=2)
            self.assertGreater(b["ceiling_drift"], -1.0)
        fma = [b for b in self.runs if b["name"].startswith("roofline/")]
        self.assertTrue(all("frac_of_ceiling" not in b for b in fma))

    def test_the_last_line_names_the_cases_quality_names(self):
        # bench's summary and quality.py judge the same reported repetitions
        # by the same rule, so they agree whatever the machine did (before,
        # bench counted every call, the iteration-count sizing ones too).
        line = next(x for x in self.stderr.splitlines() if "machine during the run:" in x)
        q = quality(load(self.path))
        if q.noisy_cases:
            self.assertIn(f"NOISY: {len(q.noisy_cases)} of 3 CPU cases noisy (", line)
            for name in q.noisy_cases:
                self.assertIn(name, line)
        else:
            self.assertTrue(line.endswith("no CPU case noisy"), line)

    def test_the_console_shows_the_aggregates_only_when_asked(self):
        # bench applies --benchmark_display_aggregates_only itself (its
        # reporter needs the repetitions); the console looks as Google
        # Benchmark's would, the file keeps every repetition.
        args = [BENCH, "--benchmark_filter=^daxpy/cpu_loop/n:1024/", "--benchmark_min_time=0.01"]
        for flag, repetitions, lines in (("--benchmark_display_aggregates_only=true", 2, 4),
                                         ("--benchmark_display_aggregates_only", 2, 4),
                                         ("--benchmark_display_aggregates_only=false", 2, 6),
                                         ("--benchmark_display_aggregates_only=true", 1, 1)):
            p = subprocess.run(args + [f"--benchmark_repetitions={repetitions}", flag], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            shown = [x for x in p.stdout.splitlines() if x.startswith("daxpy/cpu_loop/n:1024/")]
            self.assertEqual(len(shown), lines, (flag, repetitions, shown))
            self.assertIn("machine during the run: largest contention", p.stderr)

    def test_the_run_records_the_machine(self):
        self.assertIn("machine_load_at_start", self.data["context"])
        self.assertIn("machine during the run:", self.stderr)
        q = quality(load(self.path))
        self.assertTrue(q.recorded)
        p = subprocess.run([sys.executable, str(QUALITY), str(self.path)], capture_output=True, text=True)
        self.assertIn(p.returncode, (0, 1), p.stderr)  # clean or noisy: the machine decides
        self.assertIn(str(self.path), p.stdout)


def daxpy_1024_slower(**fields):
    """An edit for Verdicts.edited: every repetition of daxpy/cpu_loop/n:1024
    1.5 times slower, with `fields` set on it."""
    def edit(runs):
        for b in runs:
            if b["name"].startswith("daxpy/cpu_loop/n:1024"):
                b["real_time"] *= 1.5
                b.update(fields)
    return edit


class Verdicts(unittest.TestCase):
    """Machine states written into a real run: each is flagged for its reason."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        out, _ = run_bench(cls.tmp.name, "base.json", 5)
        cls.data = json.loads(out.read_text())
        # The base of every edit: a quiet machine and steady times, 1% apart
        # (what the real run measured is the machine's business, not the test's).
        index: dict[str, int] = {}
        for b in cls.data["benchmarks"]:
            if b.get("run_type") == "iteration":
                i = index[b["run_name"]] = index.get(b["run_name"], -1) + 1
                b.update(noisy=0.0, contention=0.0, steal=0.0, real_time=1000.0 * (1 + 0.01 * i))
                if "ceiling_drift" in b:
                    b.update(ceiling_drift=0.0, ceiling_bytes_per_second=50e9,
                             frac_of_ceiling=b["bytes_per_second"] / 50e9)
                if b["name"].startswith("roofline/"):
                    b["flops"] = 100e9

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def edited(self, edit, name="run.json") -> Path:
        data = json.loads(json.dumps(self.data))
        edit([b for b in data["benchmarks"] if b.get("run_type") == "iteration"])
        return write(data, self.tmp.name, name)

    def test_a_quiet_run_is_clean(self):
        path = self.edited(lambda runs: None)
        self.assertEqual(quality(load(path)).summary(), "clean")
        p = subprocess.run([sys.executable, str(QUALITY), str(path)], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn(": clean", p.stdout)

    def test_one_contended_repetition_in_five_leaves_the_median_standing(self):
        def edit(runs):
            next(b for b in runs if b["name"].startswith("daxpy/cpu_loop/n:2048")).update(noisy=1.0, contention=0.4)
        self.assertTrue(quality(load(self.edited(edit))).clean)

    def test_contended_repetitions_make_their_case_and_the_run_noisy(self):
        def edit(runs):
            for r in [b for b in runs if b["name"].startswith("daxpy/cpu_loop/n:2048")][:2]:
                r.update(noisy=1.0, contention=0.4)
        q = quality(load(self.edited(edit)))
        self.assertFalse(q.clean)
        self.assertEqual(list(q.noisy_cases), ["daxpy/cpu_loop/n:2048"])
        self.assertIn("2 of 5 repetitions noisy (contention up to 40%", q.noisy_cases["daxpy/cpu_loop/n:2048"])
        p = subprocess.run([sys.executable, str(QUALITY), "--cases", str(self.edited(edit))],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("NOISY", p.stdout)
        self.assertIn("daxpy/cpu_loop/n:2048: 2 of 5", p.stdout)

    def test_a_ceiling_whose_repetitions_spread_is_noisy(self):
        def edit(runs):
            fma = [b for b in runs if b["name"].startswith("roofline/cpu_fma")]
            for b, scale in zip(fma, (0.8, 0.9, 1.0, 1.1, 1.2)):  # relative MAD 10%
                b["flops"] = 100e9 * scale
        q = quality(load(self.edited(edit)))
        self.assertIn("repetitions spread 10% (relative MAD)", q.noisy_cases["roofline/cpu_fma"])

    def test_one_slow_first_repetition_of_a_ceiling_is_not_noise(self):
        def edit(runs):
            next(b for b in runs if b["name"].startswith("roofline/cpu_fma"))["flops"] = 50e9
        self.assertTrue(quality(load(self.edited(edit))).clean)

    def as_network(self, times, name="mnist_cnn/cpu_own/batch:1"):
        """An edit: daxpy/cpu_loop/n:1024 made a network's case (`name`, no
        ceiling bracket), its five repetitions taking `times` ns."""
        def edit(runs):
            for b, t in zip([b for b in runs if b["name"].startswith("daxpy/cpu_loop/n:1024")], times, strict=True):
                for key in ("ceiling_drift", "ceiling_bytes_per_second", "frac_of_ceiling"):
                    b.pop(key)
                b.update(name=f"{name}/real_time", run_name=f"{name}/real_time", real_time=t, time_unit="ns")
        return edit

    def test_a_network_whose_repetitions_slow_down_is_noisy(self):
        slowing = (462.0, 582.0, 598.0, 609.0, 608.0)  # resnet20 at batch 1 on the Zen 3 VM, us
        for name in ("mnist_cnn/cpu_own/batch:1", "resnet20_train/cpu_onednn/batch:64", "resnet20/peer_ort/batch:1"):
            q = quality(load(self.edited(self.as_network(slowing, name))))
            self.assertFalse(q.clean, name)
            self.assertEqual(q.noisy_cases, {name: "repetitions spread 32% (slowest over fastest)"})

    def test_a_network_within_the_spread_of_a_quiet_run_is_clean(self):
        self.assertTrue(quality(load(self.edited(self.as_network((1000.0, 1100.0, 1200.0, 1240.0, 1050.0))))).clean)

    def test_an_operator_s_spread_is_left_to_its_bracket(self):
        # Memory-bound operators spread past 25% on quiet machines (the
        # bandwidth switches level): their bracket judges them.
        def edit(runs):
            for b, t in zip([b for b in runs if b["name"].startswith("daxpy/cpu_loop/n:1024")],
                            (462.0, 582.0, 598.0, 609.0, 608.0), strict=True):
                b.update(real_time=t, time_unit="ns")
        self.assertTrue(quality(load(self.edited(edit))).clean)

    def test_a_ceiling_that_moves_during_the_run_is_noisy(self):
        def edit(runs):
            for b in runs:
                if b["name"].startswith("daxpy/cpu_loop/n:2048"):
                    b["ceiling_bytes_per_second"] = 40e9
        q = quality(load(self.edited(edit)))
        self.assertFalse(q.clean)
        self.assertEqual(q.noisy_cases, {})
        self.assertIn("the memory ceiling moved 25% during the run (40.0 to 50.0 GB/s, vs roofline/cpu_triad, "
                      "1 thread)", q.summary())

    def test_a_run_from_before_the_recording_is_neither(self):
        def edit(runs):
            for b in runs:
                for key in ("noisy", "contention", "steal"):
                    b.pop(key)
        q = quality(load(self.edited(edit)))
        self.assertFalse(q.recorded)
        self.assertFalse(q.clean)
        self.assertTrue(q.summary().startswith("not recorded"))

    def test_a_noisy_slower_case_is_a_reason_to_rerun_not_a_regression(self):
        slower = daxpy_1024_slower(noisy=1.0, contention=0.5)
        base = self.edited(lambda runs: None, "base.json")
        new = self.edited(slower, "new.json")
        verdicts = {v.name: v for v in cmp.compare(load(base), load(new))}
        v = verdicts["daxpy/cpu_loop/n:1024"]
        self.assertEqual(v.verdict, "slower")
        self.assertFalse(v.regression)
        self.assertIn("NEW 5 of 5 repetitions noisy", v.noisy)
        p = subprocess.run([sys.executable, str(COMPARE), str(base), str(new)], capture_output=True, text=True)
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        self.assertIn("rerun them", p.stdout)
        self.assertIn("NEW machine: NOISY", p.stdout)

    def test_a_slowdown_where_the_runs_met_different_ceilings_is_a_rerun(self):
        # Each run quiet, but the memory around the case was 20% slower in NEW.
        slower = daxpy_1024_slower(ceiling_bytes_per_second=40e9)
        base = self.edited(lambda runs: None, "base.json")
        new = self.edited(slower, "new.json")
        v = {v.name: v for v in cmp.compare(load(base), load(new))}["daxpy/cpu_loop/n:1024"]
        self.assertEqual(v.verdict, "slower")
        self.assertFalse(v.regression)
        self.assertIn("the memory ceiling differs between the runs: 50 vs 40 GB/s", v.noisy)

    def test_the_same_slowdown_on_a_quiet_machine_is_a_regression(self):
        slower = daxpy_1024_slower()
        base = self.edited(lambda runs: None, "base.json")
        new = self.edited(slower, "new.json")
        p = subprocess.run([sys.executable, str(COMPARE), str(base), str(new)], capture_output=True, text=True)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)

    def test_bracket_normalization_divides_out_a_slower_machine(self):
        # The machine's bandwidth fell by a third around the case, and the
        # case with it: by time it is slower, by fraction of its ceiling not.
        def slower_machine(runs):
            for b in runs:
                if b["name"].startswith("daxpy/cpu_loop/n:1024"):
                    b["real_time"] *= 1.5
                    b["bytes_per_second"] /= 1.5
                    b["ceiling_bytes_per_second"] /= 1.5
        base = self.edited(lambda runs: None, "base.json")
        new = self.edited(slower_machine, "new.json")
        by_time = {v.name: v for v in cmp.compare(load(base), load(new))}
        bracketed = {v.name: v for v in cmp.compare(load(base), load(new), normalize="bracket")}
        self.assertEqual(by_time["daxpy/cpu_loop/n:1024"].verdict, "slower")
        self.assertEqual(bracketed["daxpy/cpu_loop/n:1024"].verdict, "same")
        p = subprocess.run([sys.executable, str(COMPARE), str(base), str(new), "--normalize", "bracket"],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)


if __name__ == "__main__":
    unittest.main()
