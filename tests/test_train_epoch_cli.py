"""build/train_epoch: a few steps of the epoch print the loss windows beside
PyTorch's and the test accuracy; bad arguments and a missing reference exit 2
with the reason. DLB_TRAIN_EPOCH is the binary (set by ctest)."""

import json
import os
import re
import subprocess
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRAIN_EPOCH = os.environ.get("DLB_TRAIN_EPOCH", str(ROOT / "build" / "train_epoch"))


def train_epoch(*args, env=None):
    return subprocess.run([TRAIN_EPOCH, *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


class TrainEpoch(unittest.TestCase):
    def test_a_few_steps_beside_pytorchs(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "losses.json"
            p = train_epoch("--network=mnist_lenet", "--steps=5", "--window=2", "--workers=1", f"--losses={out}")
            self.assertEqual(p.returncode, 0, p.stderr)
            rows = re.findall(r"^(\d+)-(\d+)\s+([\d.]+)\s+([\d.]+)\s+([-+][\d.]+)$", p.stdout, re.M)
            self.assertEqual([(int(a), int(b)) for a, b, *_ in rows], [(0, 1), (2, 3), (4, 4)])
            # The first window: the same start and batches as PyTorch's, not yet diverged.
            self.assertAlmostEqual(float(rows[0][2]), float(rows[0][3]), places=3)
            self.assertRegex(p.stdout, r"test accuracy: \d\.\d{4}")
            written = json.loads(out.read_text())
            self.assertEqual(len(written["losses"]), 5)
            reference = json.loads((ROOT / "models/fashion-mnist/mnist_lenet.epoch-reference.json").read_text())
            self.assertAlmostEqual(written["losses"][0], reference["losses"][0], delta=1e-5 * reference["losses"][0])

    def test_without_pytorchs_column_when_the_configuration_differs(self):
        p = train_epoch("--network=mnist_lenet", "--steps=2", "--window=2", "--augment")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"(?m)^0-1\s+[\d.]+$")
        self.assertNotIn("PyTorch", p.stdout)

    def test_bad_input_exits_2_with_the_reason(self):
        cases = {
            ("--frobnicate",): "unknown argument '--frobnicate'",
            ("--network=vgg16",): "--network=vgg16: unknown network; train_epoch runs mnist_cnn, mnist_lenet",
            ("--network=resnet20",): "--network=resnet20: no PyTorch epoch reference to start from and compare with",
            ("--steps=0",): "--steps=0: give at least 1 step, or leave --steps out for the whole epoch (937 steps)",
            # The rows it names: test_train_variants_cli (they depend on the build).
            ("--impl=blas",): "--impl is cpu_eigen, ",
            ("--window=0",): "--window needs at least 1 step",
            ("--steps=-1",): "--steps needs a non-negative integer",
            ("--steps=938",): "938 steps, an epoch of batch 64 has 937",
            ("--workers=100",): "100 loader threads is too many",
            ("--lr=fast",): "--lr needs a non-negative number, got 'fast'",
        }
        for args, reason in cases.items():
            with self.subTest(args=args):
                p = train_epoch(*args)
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                self.assertIn(reason, p.stderr)

    def test_the_networks_it_names_are_those_it_runs(self):
        # Both messages name what runs, and it does run (one step each).
        for args in (("--network=vgg16",), ("--network=resnet20",)):
            p = train_epoch(*args)
            self.assertEqual(p.returncode, 2, p.stderr)
            named = re.search(r"train_epoch runs (.*)$", p.stderr.strip())[1].split(", ")
            self.assertEqual(named, ["mnist_cnn", "mnist_lenet"])
        for network in named:
            with self.subTest(network=network):
                p = train_epoch(f"--network={network}", "--steps=1", "--window=1")
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertRegex(p.stdout, r"(?m)^0-0\s+[\d.]+")


if __name__ == "__main__":
    unittest.main()
