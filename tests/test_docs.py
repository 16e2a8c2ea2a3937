"""The generated pages: README.md and docs/*.md are what scripts/readme.py
makes from the result files their markers name (regenerated here and
compared byte for byte), and the marker handling: each BEGIN marker names
its own sources, a missing source is exit 2 naming it, a stale page is
exit 1 naming the page, and a rewrite keeps the markers as they were."""

import gzip
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "readme.py"
NETWORKS = ROOT / "tests" / "data" / "networks_small.json"
SOFTMAX = ROOT / "tests" / "data" / "softmax_small.json"


# The pages this test checks the links of: the README's own documentation.
PAGES = ("daxpy", "softmax", "conv", "copies", "gemm", "networks", "precision", "profiles", "peers",
         "training", "methodology", "architecture")
# Pages the README links to that other changes add.
LANDING_ELSEWHERE = {"gpu-kit.md", "results-store.md", "placement.md"}


def anchors(text: str) -> set[str]:
    """GitHub's anchors for a page's headings."""
    out = set()
    for heading in re.findall(r"^#+ (.*)$", re.sub(r"```.*?```", "", text, flags=re.S), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        out.add(slug)
    return out


def readme(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def load_script():
    spec = importlib.util.spec_from_file_location("dlbench_readme", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


class CommittedDocs(unittest.TestCase):
    def test_every_page_is_what_its_markers_generate(self):
        p = readme("--check")
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_every_family_page_has_a_block_that_names_its_sources(self):
        module = load_script()
        for page in sorted((ROOT / "docs").glob("*.md")):
            for block in module.blocks(page.read_text()):
                for source in block.sources:
                    self.assertTrue((ROOT / source).is_file(), f"{page.name}: {block.family}: {source}")

    def test_readme_is_at_most_300_lines(self):
        self.assertLessEqual(len((ROOT / "README.md").read_text().splitlines()), 300)

    def test_relative_links_and_anchors_resolve(self):
        for page in [ROOT / "README.md", *(ROOT / "docs" / f"{name}.md" for name in PAGES)]:
            for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", page.read_text()):
                if "://" in target:
                    continue
                path = (page.parent / target) if target else page
                where = f"{page.relative_to(ROOT)}: {target}#{anchor}"
                if not path.exists() and path.name in LANDING_ELSEWHERE:
                    continue
                self.assertTrue(path.exists(), where)
                if anchor and path.suffix == ".md":
                    self.assertIn(anchor, anchors(path.read_text()), where)


class ReadmeCounts(unittest.TestCase):
    """The case counts README states: the suites' from the binary's own
    listing, the committed run's from its file (not typed and left)."""

    def listing(self, suite, *args):
        bench = os.environ.get("DLB_BENCH", str(ROOT / "build" / "bench"))
        if not Path(bench).is_file():
            self.skipTest(f"no bench binary at {bench}")
        p = subprocess.run([bench, f"--suite={suite}", *args, "--benchmark_list_tests"], capture_output=True,
                           text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        return [l for l in p.stdout.splitlines() if "/" in l]

    def test_the_suites_counts(self):
        readme = " ".join((ROOT / "README.md").read_text().split())
        m = re.search(r"Without a GPU the default suite has ([\d,]+) cases and the full suite ([\d,]+) "
                      r"with AVX-512 VNNI and BF16, ([\d,]+) and ([\d,]+) with AVX2 alone", readme)
        self.assertIsNotNone(m, "README no longer states the suites' counts")
        default, full = self.listing("default"), self.listing("full")
        if any("/gpu_" in c for c in full) or not any("/cpu_onednn" in c for c in full) \
                or not any("/cpu_eigen" in c for c in full):
            self.skipTest("counts are stated for a build with every CPU library and no GPU")
        # Which of the two CPUs this is, by the rows only they register:
        # oneDNN's int8 (VNNI) and bf16 (AVX512-BF16) rows, or neither.
        int8 = any("/cpu_onednn_s8/" in c for c in full)
        bf16 = any("/cpu_onednn_bf16/" in c for c in full)
        if int8 != bf16:
            self.skipTest("counts are stated for AVX-512 with VNNI and BF16, and for AVX2 alone")
        first = 1 if int8 else 3
        self.assertEqual(int(m.group(first).replace(",", "")), len(default))
        self.assertEqual(int(m.group(first + 1).replace(",", "")), len(full))

    def test_the_first_runs_count(self):
        """The first five minutes' run: scripts/bench passes --suite=default."""
        m = re.search(r"scripts/bench --benchmark_filter='([^']+)' +# seconds: (\d+) cases",
                      (ROOT / "README.md").read_text())
        self.assertIsNotNone(m, "README's first run no longer says how many cases it runs")
        self.assertEqual(int(m.group(2)), len(self.listing("default", f"--benchmark_filter={m.group(1)}")))

    def test_the_committed_runs_duration(self):
        """The default-suite run README says the time of (its durations
        block): the cases, repetitions, wall time, load and noisy cases are
        the file's, read here on their own."""
        readme = " ".join((ROOT / "README.md").read_text().split())
        m = re.search(r"the `default` suite \((\d+) cases, (\d+) repetitions\) on `[^`]+`: ([\d.]+) (s|minutes), "
                      r"load average ([\d.]+) at its start and ([\d.]+) at its end on \d+ CPUs "
                      r"\(`(results/[^`]+)`, commit `\w+`, (\d+) cases flagged noisy\)", readme)
        self.assertIsNotNone(m, "README no longer says how long its default-suite run took")
        with gzip.open(ROOT / m.group(7)) as f:
            run = json.load(f)
        context = run["context"]
        self.assertEqual(context["suite"], "default")
        self.assertEqual(int(m.group(1)), len({b["run_name"] for b in run["benchmarks"]}))
        self.assertEqual(int(m.group(2)), max(b["repetitions"] for b in run["benchmarks"]))
        minutes = m.group(4) == "minutes"
        self.assertAlmostEqual(float(m.group(3)) * (60 if minutes else 1), context["dlbench_wall_s"],
                               delta=3 if minutes else 0.5)
        self.assertEqual(m.group(5), f"{float(context['machine_load_at_start'].split()[1]):.1f}")
        self.assertEqual(m.group(6), f"{float(context['dlbench_load_at_end'].split()[0]):.1f}")
        sys.path.insert(0, str(ROOT / "scripts"))
        try:
            from dlbench import quality, results
        finally:
            sys.path.pop(0)
        self.assertEqual(int(m.group(8)), len(quality.quality(results.load(ROOT / m.group(7))).noisy_cases))

    def test_the_counters_example_is_the_committed_runs(self):
        """The abridged repetition README shows, and the figures its prose
        reads from it, are the committed file's, as shown (rounded)."""
        text = (ROOT / "README.md").read_text()
        m = re.search(r"One repetition of that case, from\s+`(results/[^`]+)`.*?```json\n(.*?)```\n\n(.*?)\n\n",
                      text, re.S)
        self.assertIsNotNone(m, "README no longer shows a repetition from a committed run")
        source, excerpt, prose = m.group(1), m.group(2), " ".join(m.group(3).split())
        shown = json.loads("{" + excerpt.strip().rstrip(",") + "}")
        with gzip.open(ROOT / source) as f:
            run = json.load(f)
        entry = next(b for b in run["benchmarks"] if b["name"] == shown["name"] and b.get("run_type") == "iteration"
                     and b.get("repetition_index") == shown["repetition_index"])
        for key, value in shown.items():
            with self.subTest(key=key):
                if isinstance(value, float):
                    decimals = len(repr(value).partition(".")[2])
                    self.assertEqual(value, round(entry[key], decimals))
                else:
                    self.assertEqual(value, entry[key])
        m = re.search(r"One call took (\d+) ms .* at ([\d.]+) GB/s; that is ([\d.]+) times .* the ceiling moved (\d+)%",
                      prose)
        self.assertIsNotNone(m, prose)
        per_call_ms = entry["real_time"] / 1e6  # the time unit is ns
        self.assertEqual(entry["time_unit"], "ns")
        self.assertEqual(int(m.group(1)), round(per_call_ms))
        self.assertEqual(m.group(2), f"{entry['bytes_per_second'] / 1e9:.1f}")
        self.assertEqual(m.group(3), f"{entry['frac_of_ceiling']:.2f}")
        self.assertEqual(int(m.group(4)), round(abs(entry["ceiling_drift"]) * 100))


class TypedDurations(unittest.TestCase):
    """How long a run took is generated (scripts/readme.py's durations
    blocks, from the wall time the committed runs record), never typed: a
    figure typed from one run goes stale at the next, and one estimated
    reads as measured. Outside the generated blocks README may state only
    settings and the default suite's target; no page may say how long a
    suite or the kit's bench step took or takes."""

    BLOCK = re.compile(r"<!-- BEGIN GENERATED (\S+?)(?: FROM [^>\n]*?)? -->\n.*?<!-- END GENERATED \1 -->", re.S)
    DURATION = re.compile(r"\b\d[\d.,]*\s?(?:s|secs?|seconds?|mins?|minutes?|h|hours?)\b|\b(?:an|one|half an) hour\b")
    # README's typed durations that are no run's time: Google Benchmark's
    # minimum time per repetition (the default and the example), and the
    # default suite's target.
    README_SETTINGS = re.compile(r"repetitions of (?:at least )?0\.1 s|repetition at least 0\.5 s|"
                                 r"meant to end within 15 minutes")
    # A suite's or the bench step's time, typed: "the full suite about an
    # hour", "the bench families took 193 s".
    RUN_TIME = re.compile(r"\b(?:suites?|bench families|bench step|scripts/bench|full set)\b[^.;]{0,80}?"
                          r"\b(?:took|takes|ran in|in about|about|estimated at)\b[^.;]{0,30}?"
                          r"(?:\d[\d.,]*\s?(?:s|seconds?|minutes?|hours?)\b|an hour)", re.I)

    def outside_blocks(self, page):
        return " ".join(self.BLOCK.sub(" ", page.read_text()).split())

    def test_readme_types_no_duration_but_settings(self):
        text = self.README_SETTINGS.sub(" ", self.outside_blocks(ROOT / "README.md"))
        typed = [text[max(0, m.start() - 60):m.end() + 10] for m in self.DURATION.finditer(text)]
        self.assertEqual(typed, [], "README types these durations (generate them: scripts/readme.py durations)")

    def test_no_page_types_how_long_a_suite_took(self):
        for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
            with self.subTest(page=page.name):
                self.assertEqual([m.group(0) for m in self.RUN_TIME.finditer(self.outside_blocks(page))], [])

    def test_the_pages_state_the_durations_their_blocks_generate(self):
        """README's and the kit page's durations come from blocks that name
        committed runs with a recorded time (not only runs that predate it)."""
        for page in (ROOT / "README.md", ROOT / "docs" / "gpu-kit.md"):
            with self.subTest(page=page.name):
                blocks = [b for b in load_script().blocks(page.read_text()) if b.family == "durations"]
                self.assertTrue(blocks, f"{page.name}: no durations block")
                self.assertTrue(all(b.sources for b in blocks))
                text = page.read_text()
                generated = text[text.index("<!-- BEGIN GENERATED durations"):]
                self.assertRegex(generated.split("<!-- END GENERATED durations")[0], r"cases in \d+ s|: [\d.]+ minutes")


class Recipes(unittest.TestCase):
    """docs/architecture.md's recipes end at examples/ that ctest builds and
    runs; the code a recipe shows must be the example's, so that neither
    drifts from the other."""

    def code_spans(self, section_title):
        text = (ROOT / "docs" / "architecture.md").read_text()
        start = text.index(section_title)
        ends = [i for i in (text.find("\n\n**", start + len(section_title)), text.find("\n## ", start)) if i >= 0]
        end = min(ends)
        # Code, not a file's or a test's name: a call, a block or a
        # declaration with a space in it, or a macro's call.
        return [c for c in re.findall(r"`([^`]+)`", text[start:end])
                if (("(" in c or "{" in c or c.endswith(";")) and " " in c) or re.match(r"DLB_\w+\(", c)]

    def assert_recipe_is_example(self, section_title, example, at_least):
        """Every code span of the recipe under `section_title` (at least
        `at_least` of them) stands in examples/<example>.cpp, which ctest
        builds and runs as example_<example>."""
        source = (ROOT / "examples" / f"{example}.cpp").read_text()
        spans = self.code_spans(section_title)
        self.assertGreaterEqual(len(spans), at_least, spans)
        for code in spans:
            with self.subTest(code=code):
                self.assertIn(code, source)
        self.assertIn(f"add_test(NAME example_{example}", (ROOT / "examples" / "CMakeLists.txt").read_text())

    def test_the_variant_recipe_is_the_examples_code(self):
        self.assert_recipe_is_example("**A variant**", "daxpy_variant", 2)

    def test_the_network_backend_recipe_is_the_examples_code(self):
        self.assert_recipe_is_example("**A network backend**", "net_backend", 4)

    def test_the_training_backend_recipe_is_the_examples_code_and_the_trees_names(self):
        """Its C++ is examples/train_backend.cpp's; the other names it uses
        are the tree's (the seam's, the step's, the table's and the case's
        declarations, and the files it points into), so renaming one there
        fails here as well as in the example's build."""
        example = (ROOT / "examples" / "train_backend.cpp").read_text()
        spans = self.code_spans("**A training backend**")
        self.assertGreaterEqual(len(spans), 10, spans)
        for code in spans:
            with self.subTest(code=code):
                self.assertIn(code, example)
        cmake = (ROOT / "examples" / "CMakeLists.txt").read_text()
        self.assertIn("add_test(NAME example_train_backend", cmake)
        text = (ROOT / "docs" / "architecture.md").read_text()
        start = text.index("**A training backend**")
        section = text[start:text.index("\n## ", start)]
        names = set(re.findall(r"`([^`\s]+)`", section))
        # What the recipe adds (the example holds it), and what it names of
        # the tree that is no declaration (the tools and tests it feeds).
        own = {"cpu_naive", "NaiveStep", "make_naive_train_step", "plain_layer_chain",
               "kernels/nn/train/train_naive.cpp", "example_train_backend", "test_docs", "test_train",
               "bench", "--impl=cpu_naive", "<network>_train/cpu_naive/batch:<b>"}
        train = ROOT / "kernels" / "nn" / "train"
        headers = "\n".join(  # the declarations, not what comments say of them
            re.sub(r"//.*", "", p.read_text()) for p in (
                train / "train_walk.h", train / "walked_step.h", train / "train.h", train / "train_params.h", train / "train_variants.h",
                train / "train_variants.cpp", ROOT / "kernels" / "nn" / "model" / "network.h",
                ROOT / "kernels" / "common" / "error.h", ROOT / "bench" / "cases" / "nn" / "train" / "train_case.h"))
        checked = 0
        for name in sorted(names - own):
            if "/" in name or name.endswith((".h", ".cpp", ".txt")):
                path = name if "/" in name else f"kernels/nn/train/{name}"
                with self.subTest(file=name):
                    self.assertTrue((ROOT / path).is_file(), f"{name}: no such file in the tree")
                checked += 1
            elif re.fullmatch(r"\w+((::|\.)\w+)*", name):  # dlb::Unsupported, io.add_to_input: the last part
                with self.subTest(name=name):
                    self.assertTrue(re.search(rf"\b{re.split(r'::|[.]', name)[-1]}\b", headers),
                                    f"{name}: not declared by the seam, the step, the table or the case")
                checked += 1
        self.assertGreaterEqual(checked, 20, sorted(names - own))
        # The tree's names inside the recipe's code and its row's fields:
        # each still in the recipe and still declared.
        for name in ("TrainStep", "TrainLayers", "TrainCalls", "TrainIo", "train_flow", "WalkedStep", "PlainParamsStep",
                     "set_input", "loss_forward", "loss_backward",
                     "backward_weights", "backward_data", "need_dx", "add_to_input", "bn_name", "make_gpu",
                     "tolerance", "accepts", "TrainCase", "validate", "Unsupported"):
            with self.subTest(seam=name):
                self.assertRegex(section, rf"\b{name}\b")
                self.assertTrue(re.search(rf"\b{name}\b", headers), f"{name}: no longer declared in the tree")
        for name in own - {"test_docs", "test_train", "bench", "example_train_backend", "--impl=cpu_naive",
                           "<network>_train/cpu_naive/batch:<b>", "kernels/nn/train/train_naive.cpp"}:
            with self.subTest(own=name):
                self.assertIn(name, example)


    def test_the_operator_recipe_is_the_examples_code_and_the_trees_names(self):
        """Steps 1 to 4's C++ is examples/operator.cpp's; the CMake calls of
        every step are the project's functions with their keywords, on
        targets the build defines; step 6's names are the figure modules'
        and readme.py's."""
        example = (ROOT / "examples" / "operator.cpp").read_text()
        helpers = (ROOT / "cmake" / "DlbHelpers.cmake").read_text()
        cmake_lists = "\n".join(p.read_text() for p in ROOT.glob("**/CMakeLists.txt")
                                if not {"build", ".venv", ".venv-peers"} & set(p.relative_to(ROOT).parts))
        figures = (ROOT / "scripts" / "dlbench" / "figures" / "daxpy.py").read_text()
        spans = self.code_spans("**An operator**")
        cxx = [c for c in spans if not re.match(r"dlb_\w+\(|target_sources\(|def ", c)]
        self.assertGreaterEqual(len(cxx), 12, cxx)
        for code in cxx:
            with self.subTest(code=code):
                self.assertIn(code, example)
        calls = [c for c in spans if re.match(r"(dlb_\w+|target_sources)\(", c)]
        self.assertGreaterEqual(len(calls), 6, calls)
        for code in calls:
            with self.subTest(code=code):
                command, target, rest = re.fullmatch(r"(\w+)\((\S+) (.*)\)", code).groups()
                if command == "target_sources":
                    self.assertRegex(cmake_lists, rf"add_(library|executable)\({re.escape(target)}\b")
                    self.assertTrue(rest.startswith("PRIVATE "), code)
                    continue
                self.assertRegex(helpers, rf"function\({command} ", f"{command}: not cmake/DlbHelpers.cmake's")
                keywords = re.findall(r"\b[A-Z]{3,}\b", rest)
                if keywords:
                    m = re.search(rf"function\({command} .*\n\s*cmake_parse_arguments\(([^)]*)\)", helpers)
                    self.assertIsNotNone(m, f"{command} takes no keywords")
                    for keyword in keywords:
                        self.assertIn(keyword, m.group(1), code)
        section = " ".join((ROOT / "docs" / "architecture.md").read_text().split())
        section = section[section.index("**An operator**"):section.index("**A network backend**")]
        for keyword in ("EIGEN", "ONEDNN", "CUDA", "CUDNN"):
            self.assertIn(f"`{keyword}`", section)
            self.assertIn(keyword, re.search(r"function\(dlb_kernel_sources .*\n\s*cmake_parse_arguments\(([^)]*)\)",
                                             helpers).group(1))
        self.assertIn("add_subdirectory(daxpy)", (ROOT / "kernels" / "CMakeLists.txt").read_text())
        self.assertIn("`add_subdirectory(relu)`", section)
        defs = [c for c in spans if c.startswith("def ")]
        self.assertEqual(len(defs), 2, defs)
        for code in defs:
            with self.subTest(code=code):
                self.assertIn(code, figures)
        self.assertIn('`FAMILY = "relu"`', section)
        self.assertIn('FAMILY = "daxpy"', figures)
        marker = re.search(r"`(<!-- BEGIN GENERATED relu FROM [^`]+)`", section).group(1)
        block = load_script().blocks(marker + "\n<!-- END GENERATED relu -->\n")
        self.assertEqual([b.family for b in block], ["relu"])
        self.assertIn("add_test(NAME example_operator", (ROOT / "examples" / "CMakeLists.txt").read_text())


class Markers(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = Path(self.dir.name)
        (self.root / "results" / "m").mkdir(parents=True)
        (self.root / "docs").mkdir()
        shutil.copy(NETWORKS, self.root / "results" / "m" / "networks.json")
        shutil.copy(SOFTMAX, self.root / "results" / "m" / "softmax.json")

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, text):
        path = self.root / name
        path.write_text(text)
        return path

    def test_parses_family_and_sources(self):
        module = load_script()
        text = ("<!-- BEGIN GENERATED daxpy FROM results/a.json.gz results/b.json -->\nx\n"
                "<!-- END GENERATED daxpy -->\n<!-- BEGIN GENERATED copy -->\n<!-- END GENERATED copy -->\n")
        blocks = module.blocks(text)
        self.assertEqual([(b.family, b.sources) for b in blocks],
                         [("daxpy", ["results/a.json.gz", "results/b.json"]), ("copy", [])])

    def test_each_block_from_its_own_sources_and_check_names_the_stale_page(self):
        readme_text = "# r\nno blocks here\n"
        page_text = ("# n\n<!-- BEGIN GENERATED networks FROM results/m/networks.json -->\nold\n"
                     "<!-- END GENERATED networks -->\n\n"
                     "<!-- BEGIN GENERATED softmax FROM results/m/softmax.json -->\nold\n"
                     "<!-- END GENERATED softmax -->\n")
        self.write("README.md", readme_text)
        page = self.write("docs/n.md", page_text)
        p = readme("--root", str(self.root), "--check")
        self.assertEqual(p.returncode, 1)
        self.assertIn("docs/n.md is out of date", p.stderr)
        self.assertNotIn("README.md", p.stderr)
        self.assertEqual(page.read_text(), page_text)  # --check changes nothing

        p = readme("--root", str(self.root))
        self.assertEqual(p.returncode, 0, p.stderr)
        text = page.read_text()
        self.assertNotIn("old", text)
        self.assertIn("<!-- BEGIN GENERATED networks FROM results/m/networks.json -->\n", text)
        self.assertIn("From `results/m/networks.json`", text)
        self.assertIn("**resnet20**", text)
        self.assertIn("From `results/m/softmax.json`", text)
        self.assertEqual((self.root / "README.md").read_text(), readme_text)
        p = readme("--root", str(self.root), "--check")
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_block_without_sources_says_there_are_no_results(self):
        page = self.write("docs/c.md", "<!-- BEGIN GENERATED copy -->\nx\n<!-- END GENERATED copy -->\n")
        p = readme("--root", str(self.root))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("(no results for this family", page.read_text())

    def test_missing_source_exits_2_naming_it(self):
        text = "<!-- BEGIN GENERATED networks FROM results/m/gone.json.gz -->\n<!-- END GENERATED networks -->\n"
        page = self.write("docs/n.md", text)
        for args in ((), ("--check",)):
            p = readme("--root", str(self.root), *args)
            self.assertEqual(p.returncode, 2)
            self.assertIn("results/m/gone.json.gz", p.stderr)
            self.assertIn("docs/n.md", p.stderr)
            self.assertNotIn("Traceback", p.stderr)
        self.assertEqual(page.read_text(), text)

    def assert_check_exits_2(self, page_text, named):
        """readme.py --check with docs/n.md of `page_text` exits 2, naming `named`."""
        self.write("docs/n.md", page_text)
        p = readme("--root", str(self.root), "--check")
        self.assertEqual(p.returncode, 2)
        self.assertIn(named, p.stderr)

    def test_source_that_is_not_results_exits_2_naming_it(self):
        self.write("results/m/bad.json", "{}")
        self.assert_check_exits_2("<!-- BEGIN GENERATED networks FROM results/m/bad.json -->\n"
                                  "<!-- END GENERATED networks -->\n", "bad.json")

    def test_unknown_family_exits_2(self):
        self.assert_check_exits_2("<!-- BEGIN GENERATED networkz FROM results/m/networks.json -->\n"
                                  "<!-- END GENERATED networkz -->\n", "networkz")

    def test_files_given_rewrite_one_page_and_name_them_in_the_marker(self):
        page = self.write("docs/n.md", "<!-- BEGIN GENERATED networks FROM results/m/old.json -->\nold\n"
                          "<!-- END GENERATED networks -->\n")
        source = self.root / "results" / "m" / "networks.json"
        p = readme(str(source), "--readme", str(page), "--families", "networks")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(f"<!-- BEGIN GENERATED networks FROM {source.as_posix()} -->\n", page.read_text())


if __name__ == "__main__":
    unittest.main()
