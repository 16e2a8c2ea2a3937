"""bench's descriptor flags (--softmax=, --gemm=, --daxpy=, --copy=, --net=,
--conv=) and batch files (--shapes=FILE) on the real binary: each registers
its family's every variant at the shape under the usual case names (the
same names as a shape of the suite, with the user's values), bad input
exits 2 naming the field or the line, a descriptor given alone runs alone
(with --suite, beside the suite), repeating a flag adds shapes, and the
shipped batch files (shapes/) parse and register what they list.
DLB_BENCH is the bench binary (set by ctest)."""

import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from dlbench.names import split_name  # noqa: E402
BENCH = os.environ.get("DLB_BENCH", str(ROOT / "build" / "bench"))


def bench(*args):
    return subprocess.run([BENCH, *args], capture_output=True, text=True, timeout=300, cwd=ROOT)


_listings = {}


def listed(*args):
    """The case names --benchmark_list_tests prints (exit 0 required)."""
    if args not in _listings:
        p = bench("--benchmark_list_tests", *args)
        if p.returncode != 0:
            raise AssertionError(f"bench {' '.join(args)}: exit {p.returncode}\n{p.stderr}")
        _listings[args] = p.stdout.split()
    return _listings[args]


def suite_cases(pattern):
    """The full suite's case names that match `pattern` (a regex)."""
    return {n for n in listed() if re.search(pattern, n)}


def gpu_present():
    p = bench("--benchmark_list_tests", "--benchmark_filter=^roofline/gpu_")
    return bool(p.stdout.split())


class EachFlagRegistersTheFamilysCases(unittest.TestCase):
    """A shape of the suite, with the user's values: the same variants."""

    def assert_same_cases(self, args, suite_pattern, old, new):
        expected = {n.replace(old, new) for n in suite_cases(suite_pattern)}
        self.assertTrue(expected, suite_pattern)
        self.assertEqual(set(listed(*args)), expected)

    def test_softmax_registers_softmax_and_log_softmax(self):
        self.assert_same_cases(("--softmax=rows:3/cols:7",), r"^(log_)?softmax/[^/]+/rows:128/cols:1024/",
                               "rows:128/cols:1024", "rows:3/cols:7")
        names = listed("--softmax=rows:3/cols:7")
        self.assertIn("softmax/cpu_naive/rows:3/cols:7/real_time", names)
        self.assertIn("log_softmax/cpu_fused/rows:3/cols:7/real_time", names)

    def test_gemm_registers_every_precision(self):
        self.assert_same_cases(("--gemm=m:5/n:7/k:9",), r"^gemm/[^/]+/m:64/n:10/k:64/", "m:64/n:10/k:64",
                               "m:5/n:7/k:9")
        variants = {split_name(n).variant for n in listed("--gemm=m:5/n:7/k:9")}
        self.assertTrue({"cpu_naive_f32", "cpu_ref_s8"} <= variants, variants)
        # bf16 rows exist only where the CPU has bf16 (AVX-512 BF16 or a
        # GPU); where the suite has them, the descriptor's listing must too.
        if any("bf16" in split_name(n).variant for n in suite_cases(r"^gemm/")):
            self.assertTrue(any("bf16" in v for v in variants), variants)

    def test_daxpy(self):
        self.assert_same_cases(("--daxpy=n:1000",), r"^daxpy/[^/]+/n:1024/", "n:1024/", "n:1000/")
        self.assertEqual(set(listed("--daxpy=n:4K")), {n.replace("n:1000/", "n:4096/") for n in listed("--daxpy=n:1000")})

    def test_net_inference(self):
        self.assert_same_cases(("--net=mnist_lenet/batch:5",), r"^mnist_lenet/[^/]+/batch:16/", "batch:16/",
                               "batch:5/")

    def test_net_training_step(self):
        # The step's cases (CPU impls; GPU impls with every copy mode), not
        # the loader's (<net>_train/.../workers:N, <net>_load/...).
        self.assert_same_cases(("--net=resnet20_train/batch:5",), r"^resnet20_train/[^/]+/batch:64(/h2d:[a-z]+)?/",
                               "batch:64/", "batch:5/")
        self.assertIn("resnet20_train/cpu_eigen/batch:5/real_time", listed("--net=resnet20_train/batch:5"))

    def test_copy_is_gpu_only(self):
        p = bench("--copy=bytes:4K", "--benchmark_list_tests")
        if gpu_present():
            names = p.stdout.split()
            self.assertIn("copy/gpu_register_cost/bytes:4096/manual_time", names)
            self.assertTrue(all(n.startswith("copy/") and "/bytes:4096/" in n for n in names), names)
        else:
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(p.stdout.strip(), "")
            self.assertIn("--copy=bytes:4096: copy is GPU only: no case registered without a GPU", p.stderr)

    def test_conv(self):
        self.assert_same_cases(("--conv=n1c16h32w32k16r3s3stride1pad1",),
                               r"^conv/[^/]+/n:1/c:16/h:32/w:32/k:16/r:3/s:3/stride:1/pad:1/", "", "")


class BadInputExits2NamingTheField(unittest.TestCase):
    def test_bad_descriptors(self):
        # Every family's malformed descriptors, --conv's benchdnn-style ones among them.
        cases = {
            "--conv=n64c16h32w32k16r3s3stride1pad1x": "unknown field 'x'",
            "--conv=n0c16h32w32k16r3": "n must be a positive integer, got 0",
            "--conv=n1c1h2k1r5": "the 5x5 filter is larger than the padded 2x2 input",
            "--conv=n1c16h32k16": "field 'r' is missing",
            "--conv=": "--conv= needs a value, e.g. --conv=n64c16h32w32k16r3s3stride1pad1",
            "--softmax=rows:0/cols:5": "softmax descriptor 'rows:0/cols:5': rows must be at least 1, got 0",
            "--softmax=rows:3": "field 'cols' is missing",
            "--softmax=rows:3/cols:4/rows:5": "field 'rows' given twice",
            "--softmax=rows:3/width:4": "unknown field 'width' (fields rows cols;",
            "--gemm=m:64/n:10/k:3000000000": "k 3000000000 is past the limit 2147483647",
            "--gemm=m:a/n:1/k:1": "field 'm' must be an integer, got 'a'",
            "--daxpy=n:2G": "n 2G is past the limit 2147483647",
            "--copy=bytes:0": "bytes must be at least 1, got 0",
            "--copy=bytes:2T": "field 'bytes' must be an integer (suffix K, M or G), got '2T'",
            "--net=resnet50/batch:8": "unknown network 'resnet50' (networks: resnet20 resnet20_train",
            "--net=resnet20/batch:20000": "batch 20000 is past the limit 10000",
            "--net=resnet20": "field 'batch' is missing",
            "--softmax=": "--softmax= needs a value, e.g. --softmax=rows:128/cols:1024",
            "--shapes=": "--shapes= needs a value",
            "--shapes=/nonexistent/shapes.txt": "--shapes=/nonexistent/shapes.txt: cannot read it",
            "--shapes=shapes": "--shapes=shapes: a directory, not a file",
            "--shapes=/dev/zero": "--shapes=/dev/zero: larger than 64 MiB, not a batch file of descriptors",
            # Memory that would not fit: 2^31-1 squared, 16 bytes each.
            "--softmax=rows:2147483647/cols:2147483647": "needs at least",
        }
        for flag, message in cases.items():
            with self.subTest(flag=flag):
                p = bench(flag, "--benchmark_list_tests")
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn("bench: ", p.stderr)
                self.assertIn(message, p.stderr)
                self.assertEqual(p.stdout.strip(), "")
        p = bench("--gemm=m:100000/n:100000/k:100000", "--benchmark_list_tests")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertRegex(p.stderr, r"gemm m:100000/n:100000/k:100000: needs at least 120\.0 GB of host memory "
                                   r"\(A, B, C in fp32\), this machine has [0-9.]+ GB")


class AloneRunsAlone(unittest.TestCase):
    def test_a_descriptor_alone_registers_its_cases_only(self):
        names = listed("--conv=n2c5h9w9k4r3s3stride1pad1")
        self.assertTrue(names)
        self.assertTrue(all(n.startswith("conv/") and "/n:2/c:5/h:9/w:9/k:4/" in n for n in names), names)

    def test_with_suite_the_suite_runs_too(self):
        names = listed("--suite=default", "--gemm=m:5/n:7/k:9")
        self.assertIn("gemm/cpu_naive_f32/m:5/n:7/k:9/real_time", names)
        default = listed("--suite=default")
        self.assertEqual(set(names) - set(default), {n for n in names if "/m:5/n:7/k:9/" in n})
        self.assertEqual(set(default) - set(names), set())

    def test_a_user_shape_of_the_suite_is_registered_once(self):
        names = listed("--suite=full", "--daxpy=n:1024")
        self.assertEqual(len(names), len(set(names)))
        self.assertEqual(sorted(names), sorted(listed()))

    def test_the_run_holds_the_descriptors_cases_only(self):
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "run.json"
            p = bench("--daxpy=n:1000", "--benchmark_min_time=0.001", f"--benchmark_out={out}",
                      "--benchmark_out_format=json")
            self.assertEqual(p.returncode, 0, p.stderr)
            run = json.loads(out.read_text())
        self.assertEqual(run["context"]["suite"], "descriptors")
        names = {r["run_name"] for r in run["benchmarks"]}
        self.assertEqual(names, {n for n in listed("--daxpy=n:1000")})
        for r in run["benchmarks"]:
            self.assertFalse(r.get("error_occurred"), r)
            # Each variant's own bound (kernels/daxpy/daxpy.cpp): bit-exact but
            # cpu_eigen, whose a*x + y the compiler may or may not contract into
            # one FMA (the sanitizer build does not): at most 2^-52.
            bound = 2.0 ** -52 if "/cpu_eigen/" in r["run_name"] else 0.0
            self.assertLessEqual(r["max_rel_err"], bound, r["run_name"])
            self.assertGreater(r["bytes_per_second"], 0)


class RepeatingAddsShapes(unittest.TestCase):
    def test_repeated_flags_add_and_the_same_shape_counts_once(self):
        a, b = set(listed("--gemm=m:5/n:7/k:9")), set(listed("--gemm=m:6/n:7/k:9"))
        both = listed("--gemm=m:5/n:7/k:9", "--gemm=m:6/n:7/k:9", "--gemm=k:9/n:7/m:5")
        self.assertEqual(len(both), len(set(both)))
        self.assertEqual(set(both), a | b)
        mixed = set(listed("--gemm=m:5/n:7/k:9", "--daxpy=n:1000"))
        self.assertEqual(mixed, a | set(listed("--daxpy=n:1000")))

    def test_conv_comma_form(self):
        both = set(listed("--conv=n1c3h8k4r3,n2c3h8k4r3"))
        self.assertEqual(both, set(listed("--conv=n1c3h8k4r3")) | set(listed("--conv=n2c3h8k4r3")))


class BatchFile(unittest.TestCase):
    def write(self, text):
        f = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False)
        f.write(text)
        f.close()
        self.addCleanup(os.unlink, f.name)
        return f.name

    def test_lines_register_as_the_flags_do(self):
        path = self.write("# comment\n\ngemm m:5/n:7/k:9   # trailing\n  daxpy n:1000\nnet mnist_lenet/batch:5\n")
        self.assertEqual(set(listed(f"--shapes={path}")),
                         set(listed("--gemm=m:5/n:7/k:9", "--daxpy=n:1000", "--net=mnist_lenet/batch:5")))
        # With a flag beside it: both.
        self.assertEqual(set(listed(f"--shapes={path}", "--softmax=rows:3/cols:7")),
                         set(listed(f"--shapes={path}")) | set(listed("--softmax=rows:3/cols:7")))

    def test_every_bad_line_is_named_and_nothing_runs(self):
        path = self.write("gemm m:5/n:7/k:9\ngemm m:0/n:7/k:9\n# fine\nmatmul m:1\nsoftmax rows:3\nnet resnet20/batch:1\n")
        p = bench(f"--shapes={path}")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertEqual(p.stdout.strip(), "")
        self.assertIn(f"bench: {path}: 3 bad lines, nothing run:", p.stderr)
        self.assertIn(f"{path}:2: gemm descriptor 'm:0/n:7/k:9': m must be at least 1, got 0", p.stderr)
        self.assertIn(f"{path}:4: unknown family 'matmul'", p.stderr)
        self.assertIn(f"{path}:5: softmax descriptor 'rows:3': field 'cols' is missing", p.stderr)
        self.assertNotIn(f"{path}:1:", p.stderr)
        self.assertNotIn(f"{path}:6:", p.stderr)

    def test_a_file_without_descriptors_is_refused(self):
        path = self.write("# nothing\n")
        p = bench(f"--shapes={path}", "--benchmark_list_tests")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("no descriptor in the file", p.stderr)


class ShippedShapes(unittest.TestCase):
    def descriptors(self, name, family):
        out = []
        for line in (ROOT / "shapes" / name).read_text().splitlines():
            line = line.split("#")[0].strip()
            if line:
                f, d = line.split()
                self.assertEqual(f, family)
                out.append(d)
        return out

    def variants_by_shape(self, names, family, fields):
        """The variants listed for each shape of `family` (the name's
        `fields` fields after the variant): every name is of that family."""
        by_shape = {}
        for n in names:
            parsed = split_name(n)
            self.assertEqual(parsed.op, family, n)
            by_shape.setdefault("/".join(parsed.parts[:fields]), set()).add(parsed.variant)
        return by_shape

    def test_resnet20_conv(self):
        shapes = set()
        for d in self.descriptors("resnet20_conv.txt", "conv"):
            fields = dict(re.findall(r"([a-z]+)(\d+)", d))
            shapes.add("n:{n}/c:{c}/h:{h}/w:{w}/k:{k}/r:{r}/s:{s}/stride:{stride}/pad:{pad}".format(**fields))
        self.assertEqual(len(shapes), 8)
        by_shape = self.variants_by_shape(listed("--shapes=shapes/resnet20_conv.txt"), "conv", 9)
        self.assertEqual(set(by_shape), shapes)
        for shape, variants in by_shape.items():
            self.assertIn("cpu_direct", variants, shape)
        # The 1x1 stride-2 shortcuts are among them.
        self.assertIn("n:64/c:16/h:32/w:32/k:32/r:1/s:1/stride:2/pad:0", by_shape)

    def test_network_gemms(self):
        shapes = set(self.descriptors("network_gemms.txt", "gemm"))
        names = listed("--shapes=shapes/network_gemms.txt")
        # Every shape with every variant the gemm family has at a suite shape
        # of the same kind (all are below the plain loops' 2^30 multiply-adds).
        variants = {split_name(n).variant for n in suite_cases(r"^gemm/[^/]+/m:64/n:10/k:64/")}
        registered = self.variants_by_shape(names, "gemm", 3)
        self.assertEqual(set(registered), shapes)
        for shape, got in registered.items():
            self.assertEqual(got, variants, shape)


if __name__ == "__main__":
    unittest.main()
