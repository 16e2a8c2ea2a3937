"""bench and the test binaries on bad input and on their own flags: a
network whose weights are missing makes bench exit 2 naming the file (not an
errored case and exit 0), and makes test_nn fail its tests, each saying why
(not abort while the tests are registered); --suite and --gpu_min_time take
only what they know, exit 2 otherwise."""

import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

BENCH = os.environ.get("DLB_BENCH", "build/bench")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from dlbench.names import split_name  # noqa: E402
TEST_NN = os.environ.get("DLB_TEST_NN", "build/tests/test_nn")


def run(cmd, **env):
    return subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env}, timeout=300)


class MissingWeights(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.missing = os.path.join(self.tmp.name, "no-models")

    def tearDown(self):
        self.tmp.cleanup()

    def test_bench_exits_2_naming_the_file(self):
        for flt in ("^mnist_cnn/cpu_own/batch:1/", "^mnist_cnn_layer/cpu_own/batch:1/pass",
                    "^mnist_cnn_train/cpu_eigen/batch:64/", "^mnist_cnn_load/cpu/batch:64/threads:0/"):
            with self.subTest(filter=flt):
                p = run([BENCH, f"--benchmark_filter={flt}", "--benchmark_min_time=0.001"], DLB_MODELS_DIR=self.missing)
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                self.assertIn(os.path.join(self.missing, "mnist_cnn.safetensors"), p.stderr)
                self.assertIn("bad input", p.stdout + p.stderr)

    def test_a_network_that_loads_still_exits_0(self):
        p = run([BENCH, "--benchmark_filter=^mnist_lenet/cpu_own/batch:1/", "--benchmark_min_time=0.001"])
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_test_binary_fails_its_tests_instead_of_aborting(self):
        p = run([TEST_NN, "--gtest_filter=Backends/BackendTest.*mnist_cnn_cpu_own_batch1*"], DLB_MODELS_DIR=self.missing)
        self.assertEqual(p.returncode, 1, p.stdout[-2000:] + p.stderr[-2000:])  # gtest's "tests failed", not 134
        self.assertIn("mnist_cnn.safetensors", p.stdout + p.stderr)
        self.assertIn("FAILED", p.stdout)
        self.assertNotIn("terminate called", p.stderr)


class Flags(unittest.TestCase):
    def test_unknown_suite_and_bad_gpu_min_time_exit_2(self):
        for args, message in ((["--suite=nope"], "no such suite (known: full, default, gpu-quick)"),
                              (["--gpu_min_time=abc"], "not a number of seconds"),
                              (["--gpu_min_time=0"], "not a number of seconds"),
                              (["--suite="], "needs a value")):
            with self.subTest(args=args):
                p = run([BENCH, "--benchmark_list_tests", *args])
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                self.assertIn(message, p.stderr)

    def test_suites_are_subsets_and_the_last_one_given_wins(self):
        def listed(*args):
            p = run([BENCH, "--benchmark_list_tests", *args])
            self.assertEqual(p.returncode, 0, p.stderr)
            return set(p.stdout.split())

        full, default = listed(), listed("--suite=default")
        self.assertEqual(listed("--suite=full"), full)
        self.assertTrue(default < full)
        self.assertEqual(listed("--suite=full", "--suite=default"), default)
        # Every family keeps at least one case in the default suite.
        families = lambda names: {split_name(n).op for n in names}  # noqa: E731
        self.assertEqual(families(default), families(full))
        # --conv shapes are registered whatever the suite, beside the
        # suite's when --suite is given (bench/user_shapes.h).
        conv = listed("--suite=default", "--conv=n3c5h9w9k7r3s3stride1pad1", "--benchmark_filter=^conv/")
        suite_conv = listed("--suite=default", "--benchmark_filter=^conv/")
        self.assertTrue(conv - suite_conv)
        self.assertTrue(all("/n:3/c:5/" in n for n in conv - suite_conv))
        self.assertTrue(suite_conv < conv)


if __name__ == "__main__":
    unittest.main()
