"""scripts/compare.py: the verdicts on committed real runs, and its exit codes.

Fixtures (tests/data/, made on the 2-core Xeon by tests/make_compare_fixtures.sh, see
docs/methodology.md "Regression statistics"): compare_aa_base.json and compare_aa_new.json are runs of
the same binary, each three processes of a daxpy and roofline subset with 10 repetitions merged;
compare_planted.json is the same from a build with -DDLB_PLANTED_SLOWDOWN=ON (daxpy/cpu_loop 20%
slower)."""

import copy
import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from dlbench.names import split_name  # noqa: E402
DATA = ROOT / "tests" / "data"
COMPARE = ROOT / "scripts" / "compare.py"
BASE, AA_NEW, PLANTED = (DATA / f"compare_{n}.json" for n in ("aa_base", "aa_new", "planted"))
PLANTED_VARIANT = "daxpy/cpu_loop/"


def run(*args):
    return subprocess.run([sys.executable, str(COMPARE), *map(str, args)], capture_output=True, text=True)


def verdicts(*args):
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "v.json"
        p = run(*args, "--json", out)
        return p, (json.loads(out.read_text()) if out.exists() else None)


def edited(path: Path, edit) -> Path:
    """A temporary copy of a fixture with `edit(data)` applied (the edit is the test's input)."""
    data = json.loads(path.read_text())
    edit(data)
    f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump(data, f)
    f.close()
    return Path(f.name)


class RealRuns(unittest.TestCase):
    def test_aa_study_reproduces_the_readme_figures(self):
        # docs/methodology.md, "Regression statistics": pooled three a side, the
        # default rule calls nothing slower in 20 A/A comparisons and finds
        # the planted slowdown in 100 of 100 case comparisons.
        p = subprocess.run([sys.executable, str(ROOT / "scripts" / "aa_study.py"), str(BASE), str(AA_NEW),
                            "--pool", "3", "--planted", str(PLANTED)], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("20 A/A comparisons", p.stdout)
        row = next(line for line in p.stdout.splitlines() if line.startswith("0.01   0.1 "))
        self.assertEqual(row.split()[3:], ["0/0/0", "100", "+", "0", "/", "100", "0"], row)

    def test_fixtures_are_what_they_say(self):
        for f in (BASE, AA_NEW, PLANTED):
            ctx = json.loads(f.read_text())["context"]
            self.assertNotIn("-dirty", ctx["git_commit"], f)
        self.assertEqual(json.loads(BASE.read_text())["context"]["git_commit"],
                         json.loads(AA_NEW.read_text())["context"]["git_commit"])
        self.assertIn("planted_slowdown", json.loads(PLANTED.read_text())["context"])
        self.assertNotIn("planted_slowdown", json.loads(BASE.read_text())["context"])

    def test_aa_has_no_slower_case(self):
        p, v = verdicts(BASE, AA_NEW)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual([c["name"] for c in v["cases"] if c["verdict"] == "slower"], [])
        self.assertTrue(all(c["verdict"] in ("same", "faster") for c in v["cases"]), p.stdout)

    def test_planted_slowdown_is_found_and_nothing_else(self):
        p, v = verdicts(BASE, PLANTED)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        slower = {c["name"] for c in v["cases"] if c["verdict"] == "slower"}
        planted = {c["name"] for c in v["cases"] if c["name"].startswith(PLANTED_VARIANT)}
        self.assertEqual(slower, planted, p.stdout)
        for c in v["cases"]:
            if c["name"] in planted:
                self.assertGreater(c["change"], 0.10)

    def test_planted_is_found_with_roofline_normalization_too(self):
        p, v = verdicts(BASE, PLANTED, "--normalize", "roofline")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        slower = {c["name"] for c in v["cases"] if c["verdict"] == "slower"}
        self.assertEqual(slower, {c["name"] for c in v["cases"] if c["name"].startswith(PLANTED_VARIANT)})

    def test_normalization_absorbs_a_uniformly_slower_machine(self):
        def slow_everything(data):  # the whole machine 30% slower, ceilings included
            for e in data["benchmarks"]:
                for key in ("real_time", "cpu_time"):
                    if key in e:
                        e[key] *= 1.3
        slow = edited(AA_NEW, slow_everything)
        p, v = verdicts(BASE, slow)
        self.assertEqual(p.returncode, 1)
        self.assertGreater(sum(c["verdict"] == "slower" for c in v["cases"]), 10)
        p, v = verdicts(BASE, slow, "--normalize", "roofline")
        self.assertEqual(p.returncode, 0, p.stdout)
        # the ceilings themselves are compared as measured: slower, but they are not regressions of code
        self.assertEqual({split_name(c["name"]).op for c in v["cases"] if c["verdict"] == "slower"}, {"roofline"})


class Inputs(unittest.TestCase):
    def test_json_output_matches_table(self):
        p, v = verdicts(BASE, PLANTED)
        for c in v["cases"]:
            self.assertIn(c["name"], p.stdout)
        self.assertEqual(v["regressions"], sum(c["regression"] for c in v["cases"]))

    def test_errored_case_that_was_fine_is_a_regression(self):
        target = "daxpy/cpu_omp/n:262144"

        def break_one(data):
            data["benchmarks"] = [e for e in data["benchmarks"] if not e["run_name"].startswith(target + "/")]
            data["benchmarks"].append({"name": target + "/real_time", "run_name": target + "/real_time",
                                       "run_type": "iteration", "error_occurred": True,
                                       "error_message": "WRONG RESULT: planted by the test"})
        p, v = verdicts(BASE, edited(AA_NEW, break_one))
        self.assertEqual(p.returncode, 1, p.stdout)
        case = next(c for c in v["cases"] if c["name"] == target)
        self.assertEqual((case["verdict"], case["regression"]), ("errored", True))

    def test_new_and_gone(self):
        def drop_eigen(data):
            data["benchmarks"] = [e for e in data["benchmarks"] if "/cpu_eigen/" not in e["name"]]
        p, v = verdicts(BASE, edited(AA_NEW, drop_eigen))
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertTrue(any(c["verdict"] == "gone" for c in v["cases"]))
        p, v = verdicts(edited(BASE, drop_eigen), AA_NEW)
        self.assertTrue(any(c["verdict"] == "new" for c in v["cases"]))

    def test_bad_inputs_exit_2(self):
        with tempfile.TemporaryDirectory() as d:
            text = Path(d) / "console.txt"
            text.write_text("daxpy/cpu_loop/n:1024/real_time 110 ns\n")
            other = Path(d) / "other.json"
            other.write_text("[1, 2, 3]")
            for bad, message in ((Path(d) / "missing.json", "cannot read"), (text, "not JSON"),
                                 (other, "not Google Benchmark JSON")):
                p = run(BASE, bad)
                self.assertEqual(p.returncode, 2, bad)
                self.assertIn(message, p.stderr)

    def test_no_common_cases_exit_2(self):
        def rename(data):
            for e in data["benchmarks"]:
                for k in ("name", "run_name"):
                    e[k] = "other_" + e[k]
        p = run(BASE, edited(AA_NEW, rename))
        self.assertEqual(p.returncode, 2)
        self.assertIn("no cases in common", p.stderr)

    def test_other_machine_refused_unless_asked(self):
        def other_cpu(data):
            data["context"]["cpu_model"] = "Some Other CPU"
        other = edited(AA_NEW, other_cpu)
        p = run(BASE, other)
        self.assertEqual(p.returncode, 2)
        self.assertIn("different machines", p.stderr)
        p = run(BASE, other, "--cross-machine")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("CROSS-MACHINE", p.stdout)

    def test_other_microarchitecture_refused(self):
        # Same model string, different CPUID family/model: two machines.
        def zen(name):
            def edit(data):
                data["context"]["cpu_microarchitecture"] = name
            return edit
        p = run(edited(BASE, zen("zen4")), edited(AA_NEW, zen("zen5")))
        self.assertEqual(p.returncode, 2)
        self.assertIn("cpu_microarchitecture: 'zen4' vs 'zen5'", p.stderr)
        p = run(edited(BASE, zen("zen4")), AA_NEW)  # a run from before it was recorded
        self.assertEqual(p.returncode, 2)
        self.assertIn("cannot be confirmed", p.stderr)
        p = run(edited(BASE, zen("zen4")), edited(AA_NEW, zen("zen4")))
        self.assertNotEqual(p.returncode, 2, p.stderr)

    def test_single_process_is_warned_about(self):
        def first_process(data):
            data["benchmarks"] = [e for e in data["benchmarks"] if e.get("process_index", 0) == 0]
            del data["context"]["processes"]
        p = run(edited(BASE, first_process), AA_NEW)
        self.assertIn("BASE is one process", p.stderr)

    def test_single_repetition_is_flagged(self):
        def one_rep(data):
            seen = set()
            kept = []
            for e in data["benchmarks"]:
                if e.get("run_type") == "iteration" and e["run_name"] not in seen:
                    seen.add(e["run_name"])
                    kept.append(e)
            data["benchmarks"] = kept
        p = run(edited(BASE, one_rep), edited(PLANTED, one_rep))
        self.assertEqual(p.returncode, 0)  # no test possible with one repetition: nothing is called slower
        self.assertIn("one repetition", p.stderr)


class History(unittest.TestCase):
    def test_append_and_draw(self):
        with tempfile.TemporaryDirectory() as d:
            hist = Path(d) / "history.jsonl"
            for f in (BASE, PLANTED):
                p = subprocess.run([sys.executable, str(ROOT / "scripts" / "history.py"), str(f), "--history", str(hist)],
                                   capture_output=True, text=True)
                self.assertEqual(p.returncode, 0, p.stderr)
            lines = [json.loads(line) for line in hist.read_text().splitlines()]
            self.assertEqual(len(lines), 2 * 18)
            loop = [l for l in lines if l["case"] == "daxpy/cpu_loop/n:4194304"]
            self.assertEqual([l["repetitions"] for l in loop], [30, 30])
            self.assertGreater(loop[1]["median_s"], loop[0]["median_s"] * 1.1)  # the planted slowdown
            p = subprocess.run([sys.executable, str(ROOT / "scripts" / "plot.py"), "--history", str(hist),
                                "--out-dir", d], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertTrue((Path(d) / "history_daxpy.png").exists())
            self.assertTrue((Path(d) / "history_roofline.png").exists())

    def test_bad_history_exit_2(self):
        with tempfile.TemporaryDirectory() as d:
            bad = Path(d) / "history.jsonl"
            bad.write_text('{"case": "x"}\n')
            p = subprocess.run([sys.executable, str(ROOT / "scripts" / "plot.py"), "--history", str(bad),
                                "--out-dir", d], capture_output=True, text=True)
            self.assertEqual(p.returncode, 2)
            self.assertIn("not a history line", p.stderr)


if __name__ == "__main__":
    unittest.main()
