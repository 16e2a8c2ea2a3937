"""Every row of the training table (kernels/nn/train/train_variants.h) is
reachable: bench registers its cases (CPU rows on the networks they take,
GPU rows listed by --list_families without a device, the --net descriptor
for every CPU row), and train_epoch --impl takes every row (a GPU row
without a device exits 2 saying so) and refuses any other name, naming the
rows. The rows come from train_epoch --list_impls,
which prints the table. DLB_BENCH and DLB_TRAIN_EPOCH are the binaries (set
by ctest)."""

import os
import re
import subprocess
import sys
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from dlbench.names import split_name  # noqa: E402
BENCH = os.environ.get("DLB_BENCH", str(ROOT / "build" / "bench"))
TRAIN_EPOCH = os.environ.get("DLB_TRAIN_EPOCH", str(ROOT / "build" / "train_epoch"))
TRAINABLE = ("resnet20", "mnist_cnn", "mnist_lenet")


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=300)


def table_rows():
    p = run(TRAIN_EPOCH, "--list_impls")
    if p.returncode != 0:
        raise AssertionError(p.stderr)
    rows = [tuple(line.split()) for line in p.stdout.splitlines() if line.strip()]
    for row in rows:
        if len(row) != 2 or row[1] not in ("cpu", "gpu"):
            raise AssertionError(f"train_epoch --list_impls: not '<name> <device>': {row}")
    return rows


def listed_train_variants(listing: str) -> dict[str, set[str]]:
    """device -> the variants bench --list_families lists in the families
    whose names are <network>_train/...."""
    found = {"cpu": set(), "gpu": set()}
    for block in listing.split("\n\n"):
        if not re.search(r"^  names   \S*_train\b", block, re.M):
            continue
        for device in ("cpu", "gpu"):
            m = re.search(rf"^  {device.upper()}     (.+?)(?: \(\d[\d,]* cases.*\))?$", block, re.M)
            if m and m.group(1) != "none" and not m.group(1).startswith("none "):
                found[device] |= {v.strip() for v in m.group(1).split(",")}
    return found


def list_tests(*args):
    p = run(BENCH, *args, "--benchmark_list_tests=true")
    if p.returncode != 0:
        raise AssertionError(p.stdout + p.stderr)
    return p.stdout.split()


class TrainTableReachable(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rows = table_rows()
        cls.cpu = [name for name, device in cls.rows if device == "cpu"]
        cls.gpu = [name for name, device in cls.rows if device == "gpu"]

    def test_the_table_has_its_cpu_rows(self):
        self.assertIn("cpu_eigen", self.cpu)
        self.assertIn("cpu_own", self.cpu)
        self.assertEqual(len(set(self.cpu + self.gpu)), len(self.rows), "a name given twice")

    def test_bench_lists_every_row(self):
        p = run(BENCH, "--list_families")
        self.assertEqual(p.returncode, 0, p.stderr)
        listed = listed_train_variants(p.stdout)
        for name, device in self.rows:
            self.assertIn(name, listed[device], f"{name}: no {device} training case in bench --list_families")
        # Nothing in bench's training families that the table does not have.
        self.assertEqual(listed["cpu"] | listed["gpu"], set(self.cpu + self.gpu))

    def test_bench_registers_every_cpu_row_on_the_networks_it_takes(self):
        names = list_tests("--benchmark_filter=^[a-z0-9_]+_train/cpu_[a-z0-9_]+/batch:[0-9]+/real_time$")
        got = {(split_name(n).op.removesuffix("_train"), split_name(n).variant) for n in names}
        for impl in self.cpu:
            takes = {net for net, i in got if i == impl}
            # cpu_own takes chains of stride-1 convolutions: not resnet20 (batch-norm, joins, strides).
            want = set(TRAINABLE) - ({"resnet20"} if impl == "cpu_own" else set())
            self.assertEqual(takes, want, impl)

    def test_the_descriptor_registers_every_cpu_row(self):
        names = list_tests("--net=mnist_cnn_train/batch:3")
        got = {split_name(n).variant for n in names
               if split_name(n).op == "mnist_cnn_train" and split_name(n).args.get("batch") == 3}
        self.assertEqual(got, set(self.cpu))

    def test_train_epoch_takes_every_row_and_names_them(self):
        for impl in self.cpu + self.gpu:
            with self.subTest(impl=impl):
                # --impl is checked before --window: a taken row gets to the window's error.
                p = run(TRAIN_EPOCH, f"--impl={impl}", "--window=0")
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                self.assertIn("--window needs at least 1 step", p.stderr)
        names = self.cpu + self.gpu
        listing = ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]
        p = run(TRAIN_EPOCH, "--impl=blas")
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn(f"--impl is {listing}, not 'blas'", p.stderr)
        p = run(TRAIN_EPOCH, "--help")
        self.assertIn("--impl=" + "|".join(names) + "]", p.stdout)

    def test_a_gpu_row_without_a_device_says_so(self):
        if not self.gpu:
            self.skipTest("this build has no GPU rows")
        if "no CUDA device visible" not in run(BENCH, "--list_families").stdout:
            self.skipTest("a CUDA device is visible: the kit runs the GPU epoch")
        for impl in self.gpu:
            with self.subTest(impl=impl):
                p = run(TRAIN_EPOCH, f"--impl={impl}", "--steps=1", "--network=mnist_lenet")
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                self.assertIn(f"--impl={impl} runs on a GPU, and this machine has no CUDA device", p.stderr)

    def test_the_listing_parser_sees_the_families(self):
        listing = ("\ntrain: one step\n  names   {a_train|b_train}/<variant>/batch:<batch>\n"
                   "  CPU     cpu_x, cpu_y (4 cases)\n  GPU     none\n"
                   "\ntrain_gpu: gpu\n  names   {a_train}/<variant>/batch:<batch>/h2d:<h2d>\n"
                   "  CPU     none\n  GPU     gpu_z (6 cases; needs a GPU: no CUDA device visible)\n"
                   "\nnn: nets\n  names   a/<variant>/batch:<batch>\n  CPU     cpu_w (1 cases)\n")
        self.assertEqual(listed_train_variants(listing), {"cpu": {"cpu_x", "cpu_y"}, "gpu": {"gpu_z"}})


if __name__ == "__main__":
    unittest.main()
