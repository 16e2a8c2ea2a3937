"""The placement dynamic program against brute force on small random chains,
and its answers on chains whose best placement is known."""

import random
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from dlbench.placement import CPU, GPU, Copy, Layer, best_placement, brute_force, placement_cost  # noqa: E402


class Placement(unittest.TestCase):
    def test_matches_brute_force_on_random_chains(self):
        rng = random.Random(13)
        for _ in range(300):
            n = rng.randint(1, 10)
            layers = [Layer(rng.uniform(0, 1e-3), rng.uniform(0, 1e-3), rng.uniform(0, 1e6)) for _ in range(n)]
            copy = Copy(rng.uniform(1e8, 2e10), rng.uniform(1e8, 2e10), rng.uniform(0, 2e-5))
            out = rng.uniform(0, 1e5)
            total, devices = best_placement(layers, out, copy)
            self.assertAlmostEqual(total, brute_force(layers, out, copy), delta=1e-15)
            self.assertAlmostEqual(placement_cost(layers, out, copy, devices), total, delta=1e-15)

    def test_known_answers(self):
        slow_copy = Copy(1e6, 1e6, 1e-3)
        # Copies dearer than any layer: everything stays on the CPU.
        layers = [Layer(2e-4, 1e-5, 4e5) for _ in range(5)]
        self.assertEqual(best_placement(layers, 40.0, slow_copy)[1], [CPU] * 5)
        # Free copies: each layer where it is faster.
        free = Copy(float("inf"), float("inf"), 0.0)
        layers = [Layer(1.0, 2.0, 1.0), Layer(3.0, 1.0, 1.0), Layer(1.0, 2.0, 1.0)]
        self.assertEqual(best_placement(layers, 1.0, free), (3.0, [CPU, GPU, CPU]))
        # The lab's split (every other layer on the GPU) pays two copies per GPU layer.
        layers = [Layer(1e-4, 5e-5, 1e6) for _ in range(4)]
        copy = Copy(1e10, 1e10, 1e-5)
        lab = placement_cost(layers, 4e4, copy, [GPU, CPU, GPU, CPU])
        self.assertGreater(lab, best_placement(layers, 4e4, copy)[0])
        self.assertEqual(best_placement([], 0.0, copy), (0.0, []))

    def test_wrong_length_refused(self):
        with self.assertRaises(ValueError):
            placement_cost([Layer(1, 1, 1)], 1.0, Copy(1, 1), [CPU, GPU])


if __name__ == "__main__":
    unittest.main()
