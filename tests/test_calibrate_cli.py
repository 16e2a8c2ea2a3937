"""build/calibrate: writes a network's activation ranges over the first
training images; the file reads back (the int8 rows read it); bad arguments
exit 2 with the reason. DLB_CALIBRATE is the binary (set by ctest)."""

import json
import os
import struct
import subprocess
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CALIBRATE = os.environ.get("DLB_CALIBRATE", str(ROOT / "build" / "calibrate"))


def calibrate(*args):
    return subprocess.run([CALIBRATE, *args], capture_output=True, text=True, timeout=300)


def ranges(path):
    data = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        out[name] = struct.unpack("<2f", data[8 + n + begin:8 + n + end])
    return header["__metadata__"], out


class Calibrate(unittest.TestCase):
    def test_writes_ranges_within_the_committed_ones(self):
        # 20 images are among the committed file's first 500: every range
        # lies inside the committed one.
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "lenet.calibration.safetensors"
            p = calibrate("--network=mnist_lenet", "--images=20", f"--out={out}")
            self.assertEqual(p.returncode, 0, p.stderr)
            meta, fresh = ranges(out)
            self.assertEqual(meta["images"], "20")
            self.assertEqual(meta["network"], "mnist_lenet")
            _, committed = ranges(ROOT / "models/fashion-mnist/mnist_lenet.calibration.safetensors")
            self.assertEqual(fresh.keys(), committed.keys())
            for name, (lo, hi) in fresh.items():
                self.assertLessEqual(lo, hi, name)
                self.assertGreaterEqual(lo, committed[name][0], name)
                self.assertLessEqual(hi, committed[name][1], name)
                self.assertIn(name, p.stdout)

    def test_bad_arguments_exit_2_with_the_reason(self):
        cases = {
            (): "--network is required",
            ("--network=vgg16",): "unknown network 'vgg16'",
            ("--network=mnist_lenet", "--images=x"): "--images needs a non-negative integer",
            ("--network=mnist_lenet", "--images=0"): "the training set has 60000",
            ("--network=mnist_lenet", "--images=60001"): "the training set has 60000",
            ("--network=mnist_lenet", "--frobnicate"): "unknown argument '--frobnicate'",
            ("--network=mnist_lenet", "--images=1", "--out=/nonexistent/dir/x.safetensors"): "cannot write",
        }
        for args, reason in cases.items():
            with self.subTest(args=args):
                p = calibrate(*args)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn(reason, p.stderr)


if __name__ == "__main__":
    unittest.main()
