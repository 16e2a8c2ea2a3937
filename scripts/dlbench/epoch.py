"""The shared start of the one-epoch comparison with PyTorch (issue 35): the
counter-based generator of kernels/nn/train/epoch.h in NumPy, bit for bit.

    init:  parameter j (state_dict order), element i:
             r = splitmix64(splitmix64(seed + j) ^ i)
             u = (r >> 40) 2^-24
             value = float32((2u - 1) / sqrt(fan_in))   (double, rounded once)
           fan_in: a conv's c r r, an linear layer's inputs; its bias the same
           (PyTorch's default bounds for Conv2d and Linear: 1/sqrt(fan_in))
    order: Fisher-Yates over [0, n): for i = n-1 down to 1,
             j = splitmix64(splitmix64(seed) ^ i) mod (i + 1); swap order[i], order[j]

NumPy only (no torch): the tests in .venv import it too.
"""

from __future__ import annotations

import math

import numpy as np

MASK = (1 << 64) - 1


def splitmix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 on uint64 arrays (wrapping arithmetic)."""
    x = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def splitmix64_int(x: int) -> int:
    return int(splitmix64(np.array([x & MASK], dtype=np.uint64))[0])


def init_values(seed: int, j: int, count: int, fan_in: int) -> np.ndarray:
    """The fresh float32 values of trainable tensor j (count elements)."""
    key = np.uint64(splitmix64_int(seed + j))
    r = splitmix64(np.arange(count, dtype=np.uint64) ^ key)
    u = (r >> np.uint64(40)).astype(np.float64) * 2.0**-24
    return ((2.0 * u - 1.0) / math.sqrt(fan_in)).astype(np.float32)


def epoch_order(seed: int, n: int) -> np.ndarray:
    """The permutation of [0, n) as int64."""
    key = np.uint64(splitmix64_int(seed))
    i = np.arange(n, dtype=np.uint64)
    j = (splitmix64(i ^ key) % (i + np.uint64(1))).astype(np.int64)
    order = list(range(n))
    for k in range(n - 1, 0, -1):
        m = int(j[k])
        order[k], order[m] = order[m], order[k]
    return np.array(order, dtype=np.int64)


def window_means(losses, window: int) -> list[float]:
    """Mean of each run of `window` consecutive values (the last one shorter)."""
    return [float(np.mean(losses[i : i + window])) for i in range(0, len(losses), window)]


def augment_of(seed: int, index: int, pad: int = 4, flip: bool = True) -> tuple[int, int, bool]:
    """kernels/nn/data/augment.cpp's augment_of: image `index`'s crop offset (dy, dx)
    in the image zero-padded by `pad`, and whether it is flipped."""
    r = splitmix64_int(splitmix64_int(seed) ^ index)
    span = 2 * pad + 1
    return (r & 0xFFFF) % span, ((r >> 16) & 0xFFFF) % span, flip and ((r >> 32) & 1) != 0
