"""``GPU.kernel_ps`` and ``GPU.searched_tile`` (their helpers inlined for speed) against the
plain formulas they replace, on both calibrations and a sweep of shapes (fixed seed)."""
from __future__ import annotations

import math
import random

import pytest

from sim.cost.gpu import _tile_bytes, load_gpu


def reference_kernel_ps(gpu, flops: int, nbytes: int, tiles: int) -> int:
    wave = gpu.wave_factor(tiles)
    terms = (flops / gpu.sustained_flops * wave,
             nbytes / gpu.sustained_bandwidth * (wave if gpu.memory_wave else 1))
    return gpu.launch_ps + math.ceil(max(terms) * 1e12)


def reference_searched_tile(gpu, m: int, n: int, k: int, bpe: int) -> tuple[int, int, int]:
    best = None
    for tm in dict.fromkeys(min(c, m) for c in gpu.tile_candidates):
        for tn in dict.fromkeys(min(c, n) for c in gpu.tile_candidates):
            if (tm + tn) * gpu.l1_tile_k * bpe + tm * tn * bpe > gpu.l1_bytes:
                continue
            blocks = -(-m // tm) * -(-n // tn)
            cost = _tile_bytes(m, n, k, bpe, tm, tn) * gpu.wave_factor(blocks) ** 2
            if best is None or cost < best[0]:
                best = (cost, tm, tn, blocks)
    return best[1:]


@pytest.mark.parametrize("calibration", ["physical", "attacc"])
def test_kernel_ps_equals_the_roofline_formula(calibration):
    gpu = load_gpu("a100", calibration)
    rng = random.Random(3)
    for _ in range(3000):
        flops, nbytes = rng.randint(0, 10**12), rng.randint(0, 10**10)
        tiles = rng.choice((1, gpu.sms, gpu.sms + 1, rng.randint(1, 5000)))
        assert gpu.kernel_ps(flops, nbytes, tiles) == reference_kernel_ps(gpu, flops, nbytes, tiles)


def test_searched_tile_equals_the_plain_search():
    gpu = load_gpu("a100", "attacc")
    rng = random.Random(4)
    shapes = [(m, n, k) for m in (1, 7, 16, 64, 129, 1152) for n, k in ((1024, 4096), (9216, 9216), (50272, 2048))]
    shapes += [(rng.randint(1, 2048), rng.randint(1, 30000), rng.randint(1, 30000)) for _ in range(300)]
    for m, n, k in shapes:
        for bpe in (1, 2):
            assert gpu.searched_tile(m, n, k, bpe) == reference_searched_tile(gpu, m, n, k, bpe), (m, n, k, bpe)
