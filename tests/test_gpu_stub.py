"""A machine whose CUDA driver is the toolkit's stub libcuda (lib64/stubs,
for linking only) is a broken GPU machine, not one without a GPU: bench
exits 2 saying so, and a GPU test binary fails (exit 1) rather than skip
(77). The stub comes from DLB_CUDA_STUB (set by ctest in CUDA builds),
put first on the library path as libcuda.so.1."""

import os
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path


class StubDriver(unittest.TestCase):
    def run_with_stub(self, *command):
        with tempfile.TemporaryDirectory() as d:
            shutil.copy(os.environ["DLB_CUDA_STUB"], Path(d) / "libcuda.so.1")
            env = {**os.environ, "LD_LIBRARY_PATH": d + os.pathsep + os.environ.get("LD_LIBRARY_PATH", "")}
            return subprocess.run(list(command), capture_output=True, text=True, env=env, timeout=120)

    def test_bench_refuses_a_stub_driver(self):
        p = self.run_with_stub(os.environ["DLB_BENCH"], "--benchmark_list_tests")
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("stub", p.stderr)
        self.assertIn("cudaErrorStubLibrary", p.stderr)

    def test_gpu_tests_fail_rather_than_skip(self):
        p = self.run_with_stub(os.environ["DLB_GPU_TEST"])
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("stub", p.stderr)


if __name__ == "__main__":
    unittest.main()
