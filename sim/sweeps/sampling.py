"""Points drawn from ranges: the samplers of a sweep's ``sample.method`` (``SAMPLERS``).

A sampler takes ``ranges`` ({key: (low, high)}), a point count and a seed and returns that
many points ({key: value}). Integer bounds give integers (both ends included); other bounds
give numbers rounded to ``DIGITS`` significant digits, so a value reads the same in the rows,
the CSV and the run key on every machine.
"""
from __future__ import annotations

import numpy as np

DIGITS = 6


def _value(low, high, u: float):
    """The value at ``u`` in [0, 1) of the range."""
    if isinstance(low, int) and isinstance(high, int):
        return int(min(high, low + np.floor(u * (high - low + 1))))
    return float(f"{low + u * (high - low):.{DIGITS}g}")


def uniform(ranges: dict, points: int, seed: int) -> list[dict]:
    """Independent uniform draws of every key."""
    rng = np.random.default_rng(seed)
    u = rng.random((points, len(ranges)))
    return [{k: _value(*ranges[k], u[i, j]) for j, k in enumerate(ranges)} for i in range(points)]


def latin_hypercube(ranges: dict, points: int, seed: int) -> list[dict]:
    """Latin hypercube: each key's range cut into ``points`` equal strata, each stratum drawn
    once (at a uniform place inside it), the strata of the keys paired at random; so every
    key's values spread over its whole range even with few points."""
    rng = np.random.default_rng(seed)
    u = np.empty((points, len(ranges)))
    for j in range(len(ranges)):
        u[:, j] = (rng.permutation(points) + rng.random(points)) / points
    return [{k: _value(*ranges[k], u[i, j]) for j, k in enumerate(ranges)} for i in range(points)]


SAMPLERS = {"random": uniform, "lhs": latin_hypercube}
