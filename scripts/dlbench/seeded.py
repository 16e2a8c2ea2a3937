"""bench's seeded test data in NumPy, bit for bit (kernels/common/random.cpp),
so that a peer (scripts/peers) runs on exactly the inputs the C++ cases run on.

A value is a pure function of (seed, index): uniform in [lo, hi) from the top
53 bits of a SplitMix64-style hash, and one element in about a thousand
(decided by a second stream, seed + 1) multiplied by 64. tests/test_common.cpp
(FillRandom.GoldenValues) and tests/test_peers.py hold both sides to the same
values."""

from __future__ import annotations

import numpy as np

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_STEP = np.uint64(0xD1B54A32D192ED03)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_CHUNK = 1 << 22  # elements per pass: bounds the temporaries of 2^26-element fills


def _mix(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def _mix_int(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def _bits(seed: int, index: np.ndarray) -> np.ndarray:
    """bits(seed, index) of random.cpp for a uint64 array of indices (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        return _mix(np.uint64(_mix_int((seed + _GOLDEN) & _MASK)) ^ (index * _STEP))


def unit_random(seed: int, index: np.ndarray) -> np.ndarray:
    """Doubles in [0, 1): the value random.cpp's unit_random gives at each index."""
    return (_bits(seed, np.asarray(index, dtype=np.uint64)) >> np.uint64(11)).astype(np.float64) * 2.0**-53


def fill_random(n: int, seed: int, dtype=np.float32, lo: float = -1.0, hi: float = 1.0,
                outlier_fraction: float = 1e-3, outlier_scale: float = 64.0) -> np.ndarray:
    """fill_random(span, seed, FillSpec{lo, hi, outlier_fraction, outlier_scale}) of random.cpp."""
    out = np.empty(n, dtype=dtype)
    threshold = np.uint64(int(outlier_fraction * 2.0**64)) if 0 < outlier_fraction < 1 else None
    for begin in range(0, n, _CHUNK):
        index = np.arange(begin, min(n, begin + _CHUNK), dtype=np.uint64)
        v = lo + (hi - lo) * unit_random(seed, index)
        if outlier_fraction >= 1:
            v *= outlier_scale
        elif threshold is not None:
            v[_bits(seed + 1, index) < threshold] *= outlier_scale
        out[begin:begin + len(index)] = v  # one rounding, double -> dtype, as static_cast does
    return out


def fnv1a(data: bytes) -> int:
    """64-bit FNV-1a of a byte string: the checksum both sides of the golden test compute."""
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & _MASK
    return h
