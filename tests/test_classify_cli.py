"""build/classify: classifies test images with every backend of the build and
prints label, top-1 and top-5; bad arguments and bad weight files exit 2 with
a one-line reason, never a crash. DLB_CLASSIFY is the binary (set by ctest)."""

import os
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from dlbench.names import precision_of  # noqa: E402
CLASSIFY = os.environ.get("DLB_CLASSIFY", str(ROOT / "build" / "classify"))


def classify(*args):
    return subprocess.run([CLASSIFY, *args], capture_output=True, text=True, timeout=120)


class Classify(unittest.TestCase):
    def test_prints_label_top1_top5_for_every_network(self):
        for network in ("resnet20", "mnist_cnn", "mnist_lenet"):
            with self.subTest(network=network):
                p = classify(f"--network={network}", "--images=4", "--first=10")
                self.assertEqual(p.returncode, 0, p.stderr)
                lines = [l for l in p.stdout.splitlines() if l.startswith("image")]
                self.assertEqual([int(l.split()[1]) for l in lines], [10, 11, 12, 13])
                for line in lines:
                    self.assertEqual(line.count("%)"), 5, line)  # five classes in the top-5
                self.assertRegex(p.stdout, r"\d of 4 correct")

    def test_backends_agree(self):
        # The build's backends, read from the error for an unknown one.
        p = classify("--backend=none")
        self.assertEqual(p.returncode, 2)
        backends = re.search(r"this build has: (.*)\)", p.stderr).group(1).split(", ")
        # fp32 rows print the same lines up to the top-5 (probabilities to
        # 0.1%); reduced-precision rows (_bf16, _s8) the same top-1 classes.
        full, classes = set(), set()
        for backend in backends:
            p = classify(f"--backend={backend}", "--images=6")
            self.assertEqual(p.returncode, 0, p.stderr)
            lines = [l.split("top-5")[0] for l in p.stdout.splitlines() if l.startswith("image")]
            classes.add("\n".join(re.sub(r"\s+[\d.]+%", "", l) for l in lines))
            if precision_of(backend) == "fp32":
                full.add("\n".join(lines))
        self.assertEqual(len(full), 1, full)
        self.assertEqual(len(classes), 1, classes)

    def test_bad_input_exits_2_with_the_reason(self):
        with tempfile.TemporaryDirectory() as tmp:
            truncated = Path(tmp) / "cut.safetensors"
            truncated.write_bytes((ROOT / "models/fashion-mnist/mnist_lenet.safetensors").read_bytes()[:5000])
            garbage = Path(tmp) / "garbage.safetensors"
            garbage.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
            cases = {
                ("--frobnicate",): "unknown argument '--frobnicate'",
                ("--network=vgg16",): "unknown network 'vgg16'",
                ("--images=-3",): "--images needs a non-negative integer",
                ("--images=20000",): "the test set has images 0..9999",
                ("--network=mnist_lenet", f"--weights={truncated}"): "run past the end of the file",
                ("--network=mnist_lenet", f"--weights={garbage}"): "not valid JSON",
                ("--network=mnist_cnn", "--weights=" + str(ROOT / "models/fashion-mnist/mnist_lenet.safetensors")):
                    "tensor 'conv1.weight': shape [20, 1, 5, 5], expected [32, 1, 3, 3]",
                ("--weights=/nonexistent.safetensors",): "cannot open",
                (f"--weights={tmp}",): "not a regular file",
                ("--first=9223372036854775807", "--images=10"): "the test set has images 0..9999",
                ("--first=9999", "--images=2"): "the test set has images 0..9999",
            }
            for args, message in cases.items():
                with self.subTest(args=args):
                    p = classify(*args)
                    self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                    self.assertIn("classify: ", p.stderr)
                    self.assertIn(message, p.stderr)

    def test_more_images_than_a_batch(self):
        # 300 images run as batches of 256 and 44; the answers are those of
        # smaller runs over the same images.
        whole = classify("--network=mnist_lenet", "--images=300")
        self.assertEqual(whole.returncode, 0, whole.stderr)
        tail = classify("--network=mnist_lenet", "--images=4", "--first=296")
        self.assertEqual(tail.returncode, 0, tail.stderr)
        top1 = lambda out: [l.split("top-5")[0] for l in out.splitlines() if l.startswith("image")]
        self.assertEqual(len(top1(whole.stdout)), 300)
        self.assertEqual(top1(whole.stdout)[-4:], top1(tail.stdout))

    def test_missing_data_set_names_the_package(self):
        env = dict(os.environ, DLB_FASHION_MNIST_DIR="/nonexistent")
        p = subprocess.run([CLASSIFY], capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(p.returncode, 2)
        self.assertIn("dataset-fashion-mnist", p.stderr)


if __name__ == "__main__":
    unittest.main()
