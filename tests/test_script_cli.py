"""What every script that reads a run shares (issue 42's new-user findings):

- a closed pipe (`scripts/results compare 1 1 | head`) ends quietly, with
  no BrokenPipeError traceback (dlbench.cli);
- a run whose cases are flagged noisy is named, with how many and why, by
  plot.py, profile.py and placement.py on stderr and by the dashboard on its
  pages (dlbench.quality.warning); a clean run gets no such line;
- case names are taken apart in one place (dlbench.names), and
  `scripts/results history` takes a name as the console prints it;
- `scripts/results check` with no baseline says how to make one, and a
  comparison counts the cases BASE has and NEW lacks per family instead of
  listing them (--gone lists them);
- the default folder of scripts/plot.py (what scripts/bench uses) is
  plots/<machine>/<run>/, which git ignores, and no figure is written over a
  tracked file but by --docs;
- the "not JSON" message says "at" once.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from dlbench import names  # noqa: E402
from dlbench.quality import warning  # noqa: E402
from dlbench.results import ResultsError, load, read_document  # noqa: E402

PY = [sys.executable]
SCRIPTS = ROOT / "scripts"
DATA = ROOT / "tests" / "data"
LAYERS = DATA / "placement_cpu_small.json"  # resnet20 and its layer cases on a CPU, clean
GPU_LAYERS = DATA / "placement_gpu_small.json"
BASE, NEW = DATA / "compare_aa_base.json", DATA / "compare_aa_new.json"


def run(args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(PY + [str(a) for a in args], capture_output=True, text=True, timeout=300, **kw)


class Tmp(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="dlb-script-cli-"))
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", str(self.tmp)]))

    def noisy_copy(self, source: Path = LAYERS) -> Path:
        """`source` with every repetition of every CPU case disturbed, as
        bench flags them (noisy 1, contention 60%)."""
        doc = read_document(source)
        doc = copy.deepcopy(doc)
        for b in doc["benchmarks"]:
            if b.get("run_type", "iteration") == "iteration" and "noisy" in b:
                b["noisy"], b["contention"] = 1.0, 0.6
        out = self.tmp / f"noisy-{source.name}"
        out.write_text(json.dumps(doc))
        return out


class ClosedPipe(Tmp):
    """The reader of stdout is gone before the script writes: no traceback."""

    def closed_reader(self, args, env=None) -> tuple[int, str]:
        p = subprocess.Popen(PY + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=env)
        p.stdout.close()  # the only read end: the script's first write into the pipe fails (EPIPE)
        _, err = p.communicate(timeout=300)
        return p.returncode, err.decode()

    def assert_quiet(self, rc: int, err: str):
        self.assertNotIn("Traceback", err)
        self.assertNotIn("BrokenPipeError", err)
        self.assertEqual(rc, 141, err)  # as a shell reports a command ended by SIGPIPE

    def test_results_compare_into_a_closed_pipe(self):
        env = {**os.environ, "DLB_RESULTS_DB": str(self.tmp / "store.sqlite")}
        self.assertEqual(run([SCRIPTS / "results", "ingest", BASE], env=env).returncode, 0)
        self.assert_quiet(*self.closed_reader([SCRIPTS / "results", "compare", "1", "1"], env=env))

    def test_profile_into_a_closed_pipe(self):
        self.assert_quiet(*self.closed_reader([SCRIPTS / "profile.py", LAYERS, "--batch", "1,64"]))

    def test_compare_py_into_a_closed_pipe(self):
        self.assert_quiet(*self.closed_reader([SCRIPTS / "compare.py", BASE, NEW]))

    def test_an_open_pipe_is_untouched(self):
        p = run([SCRIPTS / "profile.py", LAYERS, "--batch", "1,64"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("resnet20 cpu_", p.stdout)


class NoisyWarning(Tmp):
    def expected_head(self, path: Path) -> str:
        r = load(path)
        cpu = [c for c in r.cases.values() if c.runs_on == "cpu" and c.runs]
        return f"{len(cpu)} of {len(cpu)} CPU cases flagged NOISY (CPU contention up to 60%)"

    def test_the_shared_line(self):
        noisy = self.noisy_copy()
        line = warning(load(noisy))
        self.assertIn(self.expected_head(noisy), line)
        self.assertIn(f"scripts/quality.py {noisy} --cases", line)
        self.assertIsNone(warning(load(LAYERS)), "a clean run gets no warning")

    def test_profile_says_so(self):
        noisy = self.noisy_copy()
        p = run([SCRIPTS / "profile.py", noisy, "--batch", "1,64"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(f"profile.py: warning: {noisy}: {self.expected_head(noisy)}", p.stderr)
        self.assertIn("resnet20 cpu_", p.stdout)  # the tables still come
        clean = run([SCRIPTS / "profile.py", LAYERS, "--batch", "1,64"])
        self.assertNotIn("warning", clean.stderr)

    def test_plot_says_so(self):
        noisy = self.noisy_copy()
        p = run([SCRIPTS / "plot.py", noisy, "--out-dir", self.tmp / "plots"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(f"plot.py: warning: {noisy}: {self.expected_head(noisy)}", p.stderr)

    def test_placement_says_so(self):
        noisy = self.noisy_copy()
        p = run([SCRIPTS / "placement.py", noisy, GPU_LAYERS, DATA / "placement_gpu_more_small.json"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(f"placement: warning: {noisy}: {self.expected_head(noisy)}", p.stderr)
        self.assertEqual(p.stderr.count("warning"), 1, "the clean GPU run gets none")

    def test_dashboard_says_so_on_its_pages(self):
        noisy = self.noisy_copy()
        db = self.tmp / "store.sqlite"
        self.assertEqual(run([SCRIPTS / "results", "--db", db, "ingest", noisy]).returncode, 0)
        site = self.tmp / "site"
        p = run([SCRIPTS / "dashboard", "--db", db, "-o", site])
        self.assertEqual(p.returncode, 0, p.stderr)
        for page in ("index.html", "networks.html", "profiles.html"):
            text = (site / page).read_text()
            self.assertIn('<div id="noisy">', text, page)
            self.assertIn(self.expected_head(noisy), text, page)
        # One run, no baseline: the overview says so instead of "None".
        index = (site / "index.html").read_text()
        self.assertIn("No baseline: no machine has an earlier stored run", index)
        self.assertNotIn('<p id="regressions">None', index)


class CaseNames(Tmp):
    # Every shape of name `bench --suite=full --benchmark_list_tests` prints (and a GPU one).
    SHAPES = {
        "daxpy/cpu_omp/n:33554432/real_time": ("daxpy/cpu_omp/n:33554432", "daxpy", "cpu_omp", {"n": 33554432}),
        "roofline/cpu_fma/real_time": ("roofline/cpu_fma", "roofline", "cpu_fma", {}),
        "resnet20_layer/cpu_own/batch:1/layer:3/iterations:100/manual_time":
            ("resnet20_layer/cpu_own/batch:1/layer:3", "resnet20_layer", "cpu_own", {"batch": 1, "layer": 3}),
        "resnet20_layer/cpu_own/batch:1/pass/manual_time":
            ("resnet20_layer/cpu_own/batch:1/pass", "resnet20_layer", "cpu_own", {"batch": 1}),
        "mnist_cnn_load/cpu_own/batch:64/threads:2/real_time":
            ("mnist_cnn_load/cpu_own/batch:64/threads:2", "mnist_cnn_load", "cpu_own", {"batch": 64, "threads": 2}),
        "copy/gpu_h2d_pinned/bytes:1048576/manual_time":
            ("copy/gpu_h2d_pinned/bytes:1048576", "copy", "gpu_h2d_pinned", {"bytes": 1048576}),
    }

    def test_every_shape(self):
        for full, (name, op, variant, args) in self.SHAPES.items():
            n = names.split_name(full)
            self.assertEqual((n.name, n.op, n.variant, n.args), (name, op, variant, args), full)
            self.assertEqual(names.split_name(n.name), n, "the stored form parses to the same")
        self.assertEqual(names.split_name("resnet20_layer/cpu_own/batch:1/pass").rest, "cpu_own/batch:1/pass")
        with self.assertRaises(names.BadName):
            names.split_name("daxpy/real_time")

    def test_the_documented_rule_holds_for_every_name(self):
        """README's and architecture.md's rule, on every case of every committed run
        (CPU, GPU, peers) and, where bench is built, of the full suite."""
        for page in ("README.md", "docs/architecture.md"):
            self.assertIn(f"`{names.GRAMMAR}`", (ROOT / page).read_text().replace("\n", " "), page)
        seen = set()
        for f in sorted((ROOT / "results").glob("*/*.json.gz")):
            seen |= {b.get("run_name", b["name"]) for b in read_document(f)["benchmarks"]}
        bench = Path(os.environ.get("DLB_BENCH", ROOT / "build" / "bench"))
        if bench.exists():
            p = subprocess.run([str(bench), "--suite=full", "--benchmark_list_tests"], capture_output=True,
                               text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stderr)
            listed = p.stdout.split()
            # A listing, not a stub: 972 cases with AVX2 alone (no int8 or
            # bf16 rows), 1,656 with AVX-512 VNNI and BF16 (README.md).
            self.assertGreater(len(listed), 900)
            seen |= set(listed)
        self.assertTrue(any("/pass/" in n for n in seen) and any("/iterations:" in n for n in seen))
        bad = sorted(n for n in seen if not names.PATTERN.fullmatch(n))
        self.assertEqual(bad, [])
        for n in seen:
            self.assertFalse(names.split_name(n).name.endswith("_time"), n)

    def test_results_history_takes_the_console_name(self):
        db = self.tmp / "store.sqlite"
        self.assertEqual(run([SCRIPTS / "results", "--db", db, "ingest", LAYERS]).returncode, 0)
        entry = next(b for b in read_document(LAYERS)["benchmarks"] if "/iterations:" in b["name"])
        console = entry["run_name"]
        self.assertTrue(console.endswith("/manual_time"), console)
        for asked in (console, names.case_name(console)):
            p = run([SCRIPTS / "results", "--db", db, "history", asked])
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("amd-epyc-zen4-2c", p.stdout)
        p = run([SCRIPTS / "results", "--db", db, "history", "resnet20_layer/cpu_own/batch:999/real_time"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("no case 'resnet20_layer/cpu_own/batch:999' in the store", p.stderr)

    def test_no_script_splits_names_itself(self):
        """Issue 43: names are parsed in dlbench.names only."""
        offenders = []
        for path in [*SCRIPTS.glob("*.py"), *SCRIPTS.glob("dlbench/**/*.py"),
                     *(SCRIPTS / n for n in ("results", "dashboard", "peers"))]:
            # names.py is the one place; peers/descriptors.py parses the user's
            # descriptors (--softmax=rows:R/cols:C), not case names.
            if path.name == "names.py" or path.relative_to(SCRIPTS).as_posix() == "dlbench/peers/descriptors.py":
                continue
            for i, line in enumerate(path.read_text().splitlines(), 1):
                if 'split("/")' in line or "split('/')" in line or 'split("/", 1)' in line:
                    offenders.append(f"{path.relative_to(ROOT)}:{i}")
        self.assertEqual(offenders, [])


class ResultsCheck(Tmp):
    def test_no_baseline_says_how_to_make_one(self):
        db = self.tmp / "store.sqlite"
        self.assertEqual(run([SCRIPTS / "results", "--db", db, "ingest", LAYERS]).returncode, 0)
        p = run([SCRIPTS / "results", "--db", db, "check"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("has no baseline", p.stderr)
        self.assertIn("scripts/results ingest results/amd-epyc-zen4-2c/*.json.gz", p.stderr)
        self.assertIn("run scripts/bench again", p.stderr)

    def test_gone_cases_are_counted_per_family(self):
        doc = read_document(NEW)
        families = {}
        for b in doc["benchmarks"]:
            families.setdefault(names.split_name(b["name"]).op, 0)
        keep = sorted(families)[0]
        doc["benchmarks"] = [b for b in doc["benchmarks"] if names.split_name(b["name"]).op == keep]
        part = self.tmp / "part.json"
        part.write_text(json.dumps(doc))
        gone = sorted({c for c in load(BASE).cases if names.split_name(c).op != keep})
        self.assertGreater(len(gone), 1)
        p = run([SCRIPTS / "compare.py", BASE, part])
        self.assertIn(f"{len(gone)} cases of BASE not in NEW (gone): ", p.stdout)
        self.assertIn("(--gone lists them)", p.stdout)
        rows = [line for line in p.stdout.splitlines() if line.startswith("gone ")]
        self.assertEqual(rows, [], "no gone row without --gone")
        p = run([SCRIPTS / "compare.py", BASE, part, "--gone"])
        rows = [line for line in p.stdout.splitlines() if line.startswith("gone ")]
        self.assertEqual(len(rows), len(gone))
        self.assertNotIn("(--gone lists them)", p.stdout)


class PlotFolders(Tmp):
    def test_default_folder_is_the_runs_own_and_ignored(self):
        p = run([SCRIPTS / "plot.py", DATA / "softmax_small.json"], cwd=self.tmp)
        self.assertEqual(p.returncode, 0, p.stderr)
        machine = load(DATA / "softmax_small.json").machine
        written = sorted(self.tmp.rglob("*.png"))
        self.assertTrue(written)
        for png in written:
            rel = png.relative_to(self.tmp)
            self.assertEqual(rel.parts[:3], ("plots", machine, "softmax_small"), rel)
            # In this repository, that folder is git-ignored: never a tracked figure.
            ignored = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", str(rel)])
            if (ROOT / ".git").exists():
                self.assertEqual(ignored.returncode, 0, f"{rel} is not git-ignored")

    def test_bench_draws_into_the_runs_folder(self):
        text = (SCRIPTS / "bench").read_text()
        calls = [line for line in text.splitlines() if "scripts/plot.py" in line and not line.lstrip().startswith("#")]
        self.assertTrue(calls)
        for line in calls:
            if "--print-machine" in line:
                continue
            self.assertIn('--out-dir "', line)
            self.assertNotIn("--out-dir plots ", line + " ")
        self.assertIn('plots="plots/$machine/$stamp"', text)

    def test_never_over_a_tracked_file(self):
        repo = self.tmp / "repo"
        (repo / "plots").mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        fig = repo / "plots" / "softmax.png"
        fig.write_bytes(b"committed figure")
        subprocess.run(["git", "-C", str(repo), "add", "plots/softmax.png"], check=True)
        p = run([SCRIPTS / "plot.py", DATA / "softmax_small.json", "--out-dir", repo / "plots"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("would overwrite 1 file(s) git tracks (softmax.png)", p.stderr)
        self.assertIn("scripts/plot.py --docs", p.stderr)
        self.assertEqual(fig.read_bytes(), b"committed figure")
        p = run([SCRIPTS / "plot.py", DATA / "softmax_small.json", "--out-dir", repo / "plots" / "mine"])
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_docs_draws_what_the_pages_embed_from_the_runs_they_name(self):
        root = self.tmp / "tree"
        (root / "docs").mkdir(parents=True)
        (root / "results" / "m").mkdir(parents=True)
        for name in ("softmax_small.json", "networks_small.json"):
            (root / "results" / "m" / name).write_bytes((DATA / name).read_bytes())
        (root / "docs" / "a.md").write_text(
            "![softmax](../plots/softmax.png)\n![made elsewhere](../plots/placement.png)\n"
            "<!-- BEGIN GENERATED softmax FROM results/m/softmax_small.json -->\n"
            "<!-- END GENERATED softmax -->\n")
        (root / "docs" / "b.md").write_text(
            "<!-- FIGURES networks FROM results/m/networks_small.json -->\n![n](../plots/networks.png)\n"
            "<!-- BEGIN GENERATED networks FROM results/m/softmax_small.json -->\n"
            "<!-- END GENERATED networks -->\n")
        p = run([SCRIPTS / "plot.py", "--docs", "--root", root])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(sorted(x.name for x in (root / "plots").iterdir()), ["networks.png", "softmax.png"])
        self.assertIn("not drawn here (no generated block of its page draws it): plots/placement.png (docs/a.md)",
                      p.stderr)
        self.assertIn("plots/networks.png  (docs/b.md, networks from results/m/networks_small.json)", p.stdout)

    def test_docs_takes_no_files(self):
        p = run([SCRIPTS / "plot.py", "--docs", DATA / "softmax_small.json"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("--docs takes no files", p.stderr)


class NotJson(Tmp):
    def test_at_once(self):
        bad = self.tmp / "bad.json"
        bad.write_text('{"context": {"machine": "x')
        with self.assertRaises(ResultsError) as e:
            load(bad)
        self.assertNotIn("at at", str(e.exception))
        self.assertIn("Unterminated string starting at line 1, column 25", str(e.exception))


if __name__ == "__main__":
    unittest.main()
