"""The bound on the first 20 losses of two epochs from the shared start
(scripts/dlbench/epoch.py's losses_agree, issue 46), without PyTorch: our
CPU epoch (build/train_epoch, DLB_TRAIN_EPOCH set by ctest) against the
committed PyTorch reference holds it; the same curve with a planted error,
and our epoch with lr 0.02, do not. The whole-epoch figures the epoch peer
also holds are tests/test_epoch.cpp's."""

import json
import math
import os
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from dlbench import epoch  # noqa: E402

TRAIN_EPOCH = os.environ.get("DLB_TRAIN_EPOCH", str(ROOT / "build" / "train_epoch"))
NETS = ("mnist_lenet", "mnist_cnn")


def reference(net: str) -> dict:
    return json.loads((ROOT / "models" / "fashion-mnist" / f"{net}.epoch-reference.json").read_text())


def our_losses(net: str, *args: str) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "losses.json"
        p = subprocess.run([TRAIN_EPOCH, f"--network={net}", "--steps=20", "--window=20", f"--losses={out}", *args],
                           capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise AssertionError(f"train_epoch {net} {args}: exit {p.returncode}: {p.stderr}")
        return json.loads(out.read_text())["losses"]


class Bound(unittest.TestCase):
    def test_the_bound_grows_one_update_share_a_step(self):
        self.assertEqual(epoch.step_tolerance(0), 1e-5)
        self.assertAlmostEqual(epoch.step_tolerance(19), 2e-4)

    def test_planted_errors_and_bad_curves(self):
        theirs = reference("mnist_lenet")["losses"]
        self.assertTrue(epoch.losses_agree(theirs, theirs).holds)
        for step in (0, 10, 19):
            planted = list(theirs)
            planted[step] *= 1.01
            a = epoch.losses_agree(planted, theirs)
            self.assertFalse(a.holds, step)
            self.assertEqual(a.worst_step, step)
            self.assertAlmostEqual(a.difference, 0.01, places=6)
        # just inside and just outside step 10's bound, 1.1e-4
        inside, outside = list(theirs), list(theirs)
        inside[10] *= 1 + 1.09e-4
        outside[10] *= 1 + 1.11e-4
        self.assertTrue(epoch.losses_agree(inside, theirs).holds)
        self.assertFalse(epoch.losses_agree(outside, theirs).holds)
        # a step past the 20 compared is not looked at
        late = list(theirs)
        late[20] *= 2
        self.assertTrue(epoch.losses_agree(late, theirs).holds)
        nan = list(theirs)
        nan[3] = math.nan
        self.assertFalse(epoch.losses_agree(nan, theirs).holds)
        self.assertEqual(epoch.losses_agree(nan, theirs).worst_step, 3)
        with self.assertRaisesRegex(ValueError, "20 steps asked, the curves have 5 and 937"):
            epoch.losses_agree(theirs[:5], theirs)

    def test_the_whole_epoch_figures_are_test_epochs(self):
        source = (ROOT / "tests" / "test_epoch.cpp").read_text()
        figure = lambda name: float(re.search(rf"constexpr \S+ {name} = ([\d.e-]+);", source)[1])  # noqa: E731
        self.assertEqual(epoch.WINDOW, figure("kWindow"))
        self.assertEqual(epoch.WINDOW_LOSS_TOLERANCE, figure("kWindowLossTolerance"))
        self.assertEqual(epoch.ACCURACY_POINTS, figure("kAccuracyPoints"))


class OursAgainstPyTorchs(unittest.TestCase):
    def test_our_cpu_epoch_holds_it(self):
        for net in NETS:
            with self.subTest(net=net):
                ref = reference(net)
                ours = our_losses(net)
                a = epoch.losses_agree(ours, ref["losses"])
                self.assertTrue(a.holds, str(a))
                # PyTorch's own two roundings (2 and 1 threads) too
                self.assertTrue(epoch.losses_agree(ref["other_runs"][0]["losses"], ref["losses"]).holds)

    def test_our_epoch_with_another_learning_rate_fails_it(self):
        ref = reference("mnist_lenet")
        a = epoch.losses_agree(our_losses("mnist_lenet", "--lr=0.02"), ref["losses"])
        self.assertFalse(a.holds, str(a))
        self.assertGreater(a.difference, 10 * a.tolerance)


class EpochPeerValidation(unittest.TestCase):
    """scripts/dlbench/peers/epoch.py's check of a whole epoch (NumPy only:
    the peer itself needs a GPU): PyTorch's other rounding of the same epoch
    (the reference's run on 1 thread) passes; a curve or an accuracy off
    does not."""

    def test_the_other_rounding_passes_and_planted_errors_do_not(self):
        from dlbench.peers import epoch as peer

        for net in NETS:
            with self.subTest(net=net):
                ref = reference(net)
                other = ref["other_runs"][0]
                problem, share = peer.validate(other["losses"], other["test_accuracy"], ref)
                self.assertIsNone(problem)
                self.assertLessEqual(share, 1.0)
                shifted = list(other["losses"])
                shifted[500:600] = [v + 0.01 for v in shifted[500:600]]
                problem, _ = peer.validate(shifted, other["test_accuracy"], ref)
                self.assertRegex(problem, r"^steps 500..599: mean loss 0.0\d+ from PyTorch's CPU epoch's \(bound 0.0065\)$")
                problem, _ = peer.validate(other["losses"], other["test_accuracy"] - 0.01, ref)
                self.assertRegex(problem, r"^test accuracy \S+% against PyTorch's CPU epoch's \S+% \(bound 0.5 point")
                first = list(other["losses"])
                first[5] *= 1.001
                problem, share = peer.validate(first, other["test_accuracy"], ref)
                self.assertRegex(problem, r"^the first 20 steps' losses .*OUTSIDE the bound.* step 5,")
                self.assertGreater(share, 1.0)
                problem, _ = peer.validate(other["losses"][:900], other["test_accuracy"], ref)
                self.assertEqual(problem, "900 steps, the reference has 937")

    def test_the_counters(self):
        from dlbench.peers import epoch as peer

        losses = reference("mnist_lenet")["losses"]
        c = peer.counters_of(losses, 0.8, 0.5, 0.1)
        self.assertEqual(c["last_loss"], losses[936])
        self.assertAlmostEqual(c["last_window_loss"], sum(losses[900:]) / 37)
        self.assertEqual([c[f"loss_{s}"] for s in range(20)], losses[:20])
        self.assertNotIn("loss_20", c)
        self.assertEqual((c["test_accuracy"], c["test_loss"], c["steps"]), (0.8, 0.5, 937.0))
        self.assertEqual(peer.case_names(), [("mnist_cnn", "mnist_cnn_epoch/peer_torch_cuda_graph/batch:64"),
                                             ("mnist_lenet", "mnist_lenet_epoch/peer_torch_cuda_graph/batch:64")])


if __name__ == "__main__":
    unittest.main()
