"""scripts/dashboard, looked at in a real browser: Debian's chromium,
headless, driven by Selenium through Debian's chromedriver (both installed
by scripts/setup; nothing is downloaded).

A store made of committed runs (two runs of one machine, so that the
overview has a baseline and regressions; a run with peers; a default-suite
run with layer profiles; the H100's per-family files) is turned into a
site, and every family page, the overview, the history index and some
history pages are opened from disk: no console error, every chart drawn
with the traces the generator meant (site.json), the machine filter hides
the other machines' traces and rows (also when given in the address), the
case filter of the history index narrows the list, the flagged regressions
are compare.py's. A screenshot of the overview is written to
$DLB_ARTIFACTS (ctest: the build directory) for a person to look at.

Live: two runs of build/bench (DLB_BENCH) ingested on SQLite and on a
throwaway PostgreSQL server (tests/pg_cluster.py) give a dashboard with both
runs on the overview and a history of two points."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests"))

from dlbench import compare as cmp  # noqa: E402
from dlbench.results import load  # noqa: E402
from pg_cluster import Cluster  # noqa: E402

BENCH = os.environ.get("DLB_BENCH", str(ROOT / "build" / "bench"))
CHROMIUM = os.environ.get("DLB_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("DLB_CHROMEDRIVER", "/usr/bin/chromedriver")
PY = [sys.executable]
RESULTS = PY + [str(ROOT / "scripts" / "results")]
DASHBOARD = PY + [str(ROOT / "scripts" / "dashboard")]

BASE = ROOT / "results/intel-xeon-processor-2c/20261122T083446Z.json.gz"
NEW = ROOT / "results/intel-xeon-processor-2c/20261122T091132Z.json.gz"
COMMITTED = [BASE, NEW,
             ROOT / "results/amd-epyc-2c/20261125T081823Z.json.gz",  # peers
             ROOT / "results/amd-epyc-zen4-2c/20261128T105426Z.json.gz",  # the default suite, profiles
             *sorted((ROOT / "results/nvidia-h100-80gb-hbm3").glob("*.json.gz"))]  # one file per family


def browser():
    """A headless chromium; a clear failure where scripts/setup has not run."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not Path(path).exists():
            raise AssertionError(f"{path} not found: scripts/setup installs Debian's chromium and chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1800", "--disable-extensions", "--no-first-run"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def run(cmd, env, rc=0):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
    if rc is not None and p.returncode != rc:
        raise AssertionError(f"{' '.join(map(str, cmd))}: exit {p.returncode}, expected {rc}\n{p.stdout}\n{p.stderr}")
    return p


class BrowserTest(unittest.TestCase):
    driver = None

    @classmethod
    def setUpClass(cls):
        cls.driver = browser()

    @classmethod
    def tearDownClass(cls):
        if cls.driver is not None:
            cls.driver.quit()

    def open(self, path: Path, fragment: str = "") -> None:
        """Loads a page from disk and waits for its charts; fails on any console error."""
        d = self.driver
        d.get(path.resolve().as_uri() + fragment)
        if fragment:  # a fragment-only change does not reload: make sure it did
            d.refresh()
        deadline = time.time() + 30
        while not d.execute_script("return document.body && document.body.getAttribute('data-ready') === '1'"):
            if time.time() > deadline:
                self.fail(f"{path}: not ready after 30 s; console: {d.get_log('browser')}")
            time.sleep(0.05)
        errors = [e for e in d.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
        self.assertEqual(errors, [], f"{path}: console")

    def charts(self) -> list[dict]:
        """Every plotly chart of the page: its id, trace names, visibility and drawn SVG traces."""
        return self.driver.execute_script(
            "return Array.from(document.querySelectorAll('.js-plotly-plot')).map(g => ({id: g.id, "
            "names: g.data.map(t => t.name), visible: g.data.map(t => t.visible !== false), "
            "points: g.data.map(t => (t.x || []).filter(v => v !== null).length), "
            "drawn: g.querySelectorAll('g.trace').length}))")


def check_page(test: BrowserTest, site: Path, pages: dict, path: str) -> list[dict]:
    """Opens a page of the site and checks that it drew the charts and traces site.json names."""
    test.open(site / path)
    meant = pages[path]["charts"]
    drawn = test.charts()
    test.assertEqual([c["id"] for c in drawn], [c["id"] for c in meant], path)
    for d, m in zip(drawn, meant):
        test.assertEqual(d["names"], m["traces"], f"{path} {d['id']}")
        test.assertEqual(d["drawn"], len(m["traces"]), f"{path} {d['id']}: SVG traces drawn")
        test.assertGreater(sum(d["points"]), 0, f"{path} {d['id']}: no data")
    return drawn


def build_site(env: dict, out: Path) -> dict:
    p = run(DASHBOARD + ["-o", out], env)
    assert "pages" in p.stdout, p.stdout
    return json.loads((out / "site.json").read_text())


class CommittedRuns(BrowserTest):
    @classmethod
    def setUpClass(cls):
        cls.tmp = Path(tempfile.mkdtemp(prefix="dlb-dash-"))
        cls.env = {**os.environ, "DLB_RESULTS_DB": str(cls.tmp / "results.sqlite")}
        run(RESULTS + ["ingest", *COMMITTED], cls.env)
        cls.site = cls.tmp / "site"
        cls.manifest = build_site(cls.env, cls.site)
        cls.pages = {p["path"]: p for p in cls.manifest["pages"]}
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def check_page(self, path: str) -> list[dict]:
        return check_page(self, self.site, self.pages, path)

    def test_every_family_page_and_the_overview_draw_their_series(self):
        family_pages = [p for p in self.pages if "/" not in p]
        expected = {"index.html", "daxpy.html", "softmax.html", "conv.html", "gemm.html", "copy.html",
                    "networks.html", "profiles.html", "peers.html", "training.html"}  # the default suite has training
        self.assertEqual(set(family_pages), expected)
        for path in sorted(family_pages):
            with self.subTest(page=path):
                drawn = self.check_page(path)
                if path != "index.html":
                    self.assertTrue(drawn, f"{path}: no chart")
        # The charts answer their family's question: named series are there.
        names = {c["id"]: c["traces"] for p in self.pages.values() for c in p["charts"]}
        self.assertTrue(any("ceiling" in n for n in names["daxpy-sweep"]), names["daxpy-sweep"])
        self.assertTrue(any(n.startswith("gpu_cudnn") for n in names["resnet20-batch"]))
        self.assertTrue(any(n.startswith("peer_torch") for n in names["resnet20-batch"]))
        self.assertTrue(any(n.startswith("ours best cpu") for n in names["resnet20-peers"]))
        self.assertIn("resnet20-layers-batch64", names)  # the H100's profile at batch 64
        self.assertTrue(any(n.startswith("gpu_d2h_pinned") for n in names["copy-sweep"]))

    def test_history_pages(self):
        self.check_page("history/index.html")
        case = "daxpy/cpu_loop/n:1024"  # in both runs of the Xeon and in others
        page = next(p for p in self.pages.values() if p["title"] == case)
        drawn = self.check_page(page["path"])
        xeon = "intel-xeon-processor-2c"
        median = drawn[0]["names"].index(f"{xeon}: median")
        self.assertEqual(drawn[0]["points"][median], 2)  # BASE and NEW
        self.assertEqual(len(self.driver.find_elements("css selector", f'#points tr[data-machine="{xeon}"]')), 2)

    def test_machine_filter_hides_other_machines(self):
        from selenium.webdriver.support.ui import Select
        path = "networks.html"
        self.check_page(path)
        meant = {c["id"]: c["machines"] for c in self.pages[path]["charts"]}
        machines = self.pages[path]["machines"]
        self.assertGreater(len(machines), 1)
        chosen = machines[0]
        Select(self.driver.find_element("id", "machine-filter")).select_by_value(chosen)
        for c in self.charts():
            self.assertEqual(c["visible"], [m in ("", chosen) for m in meant[c["id"]]], c["id"])
            self.assertLess(sum(c["visible"]), len(c["visible"]), c["id"])
        rows = self.driver.find_elements("css selector", "#runs tbody tr")
        shown = [r.get_attribute("data-machine") for r in rows if r.is_displayed()]
        self.assertEqual(shown, [chosen])
        # The same filter from the address (a link someone was sent).
        other = machines[-1]
        self.open(self.site / path, f"#machine={other}")
        for c in self.charts():
            self.assertEqual(c["visible"], [m in ("", other) for m in meant[c["id"]]], c["id"])
        Select(self.driver.find_element("id", "machine-filter")).select_by_value("all")
        self.assertTrue(all(all(c["visible"]) for c in self.charts()))

    def test_case_filter_narrows_the_history_index(self):
        self.open(self.site / "history/index.html")
        field = self.driver.find_element("id", "case-filter")
        field.send_keys("daxpy/cpu_loop/")
        items = self.driver.find_elements("css selector", "#cases li")
        shown = [li.get_attribute("data-name") for li in items if li.is_displayed()]
        expected = sorted({n for f in COMMITTED for n in load(f).cases if "daxpy/cpu_loop/" in n})
        self.assertEqual(shown, expected)
        self.assertEqual(self.driver.find_element("id", "case-count").text, str(len(expected)))

    def test_overview_flags_compare_py_regressions_and_is_screenshot(self):
        self.check_page("index.html")
        verdicts = cmp.compare(load(BASE), load(NEW))
        want = sorted(v.name for v in verdicts if v.regression or v.rerun)
        self.assertTrue(want, "the two Xeon runs have regressions by compare.py's rule")
        rows = self.driver.find_elements("css selector", '#regressions tbody tr[data-machine="intel-xeon-processor-2c"]')
        self.assertEqual(sorted(r.find_elements("css selector", "td")[1].text for r in rows), want)
        latest = [r.get_attribute("data-machine") for r in self.driver.find_elements("css selector", "#latest tbody tr")]
        self.assertEqual(latest, sorted({load(f).context["machine"] for f in COMMITTED}))
        out = Path(os.environ.get("DLB_ARTIFACTS", self.tmp))
        out.mkdir(parents=True, exist_ok=True)
        shot = out / "dashboard-overview.png"
        self.assertTrue(self.driver.save_screenshot(str(shot)))
        self.assertGreater(shot.stat().st_size, 20_000)
        print(f"\nscreenshot of the overview: {shot}", file=sys.stderr)

    def test_pages_need_no_network(self):
        for page in self.site.rglob("*.html"):
            text = page.read_text()
            self.assertNotIn('src="http', text, page)
            self.assertNotIn('href="http', text, page)
        self.assertTrue((self.site / "plotly.min.js").stat().st_size > 1_000_000)


class LiveRuns:
    """scripts/bench's daxpy twice, ingested: both runs on the overview, a history of two points."""

    def fresh_db(self) -> str:
        raise NotImplementedError

    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="dlb-dash-live-"))
        self.env = {**os.environ, "DLB_RESULTS_DB": self.fresh_db()}

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_two_bench_runs_give_two_runs_and_a_history_of_two_points(self):
        if not Path(BENCH).exists():
            self.fail(f"{BENCH} not built (scripts/build)")
        case = "daxpy/cpu_loop/n:1024"
        # With a training step and the loader at two thread counts: the training page.
        cases = f"^({case}|mnist_lenet_train/cpu_onednn/batch:64|mnist_cnn_load/cpu/batch:64/threads:[01])/"
        for i in range(2):
            out = self.tmp / f"live{i}.json"
            subprocess.run([BENCH, f"--benchmark_filter={cases}", "--benchmark_repetitions=3",
                            "--benchmark_min_time=0.01", f"--benchmark_out={out}", "--benchmark_out_format=json"],
                           check=True, capture_output=True)
            run(RESULTS + ["ingest", out], self.env)
        manifest = build_site(self.env, self.tmp / "site")
        self.assertEqual(manifest["runs"], 2)
        machine = load(self.tmp / "live0.json").context["machine"]
        self.open(self.tmp / "site" / "index.html")
        runs = next(c for c in self.charts() if c["id"] == "runs")
        self.assertEqual(runs["points"][runs["names"].index(machine)], 2)
        page = next(p for p in manifest["pages"] if p["title"] == case)
        self.open(self.tmp / "site" / page["path"])
        hist = self.charts()[0]
        self.assertEqual(hist["points"][hist["names"].index(f"{machine}: median")], 2)
        pages = {p["path"]: p for p in manifest["pages"]}
        drawn = {c["id"]: c for c in check_page(self, self.tmp / "site", pages, "training.html")}
        self.assertEqual(sorted(drawn), ["mnist_cnn_load-batch64", "mnist_lenet_train-batch",
                                         "mnist_lenet_train-phases"])
        self.assertEqual(drawn["mnist_lenet_train-phases"]["names"], ["forward", "backward", "optimizer"])
        self.assertEqual(drawn["mnist_cnn_load-batch64"]["points"], [2])  # threads 0 and 1

    def test_errors_are_one_line(self):
        p = run(DASHBOARD + ["-o", self.tmp / "site"], self.env, rc=2)  # an empty store
        self.assertIn("no runs", p.stderr)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        (self.tmp / "file").write_text("")
        run(RESULTS + ["ingest", NEW], self.env)
        p = run(DASHBOARD + ["-o", self.tmp / "file" / "site"], self.env, rc=2)
        self.assertIn("cannot write", p.stderr)
        self.assertNotIn("Traceback", p.stderr)


class LiveSQLite(LiveRuns, BrowserTest):
    def fresh_db(self):
        return str(self.tmp / "results.sqlite")


class LivePostgres(LiveRuns, BrowserTest):
    cluster = None

    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster()
        cls.cluster.start()
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.cluster.stop()

    def fresh_db(self):
        return self.cluster.new_database()

if __name__ == "__main__":
    unittest.main()
