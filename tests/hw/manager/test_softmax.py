"""Softmax unit: the bit-exact model against float64, and the RTL against the model."""
from __future__ import annotations

import math
import random
from collections.abc import Sequence

import pytest

from hw.flow.amaranth_sim import receive, run, send
from hw.flow.manager_codec import logits_beats
from hw.manager.softmax import Softmax
from sim.manager.formats import LOGIT, PROB
from sim.manager.softmax import SoftmaxModel, SoftmaxParams, softmax_greedy

FULL = SoftmaxParams(lanes=8, vocab=128256, exp_frac_bits=24)
SMALL = SoftmaxParams(lanes=4, vocab=512, exp_frac_bits=24)

# |p - p_float64| <= ABS + REL * p_float64. REL: the floor of the base-2 logit (1/256 of an
# octave, 0.27 %) plus log2(e) in 15 bits (0.13 % for a logit 256 units from the maximum);
# ABS: two UQ1.16 steps (the final quotient's floor and the terms' floors).
ABS_BOUND = 2 * 2.0 ** -PROB.frac
REL_BOUND = 0.005


def reference_float(logits: Sequence[int]) -> tuple[int, float]:
    """float64 softmax of the dequantized logits: (argmax, its probability); for error bounds."""
    xs = [LOGIT.to_float(x) for x in logits]
    top = max(xs)
    best = xs.index(top)
    return best, 1.0 / math.fsum(math.exp(x - top) for x in xs)


def clip(x: float) -> int:
    return LOGIT.from_float(x)


def vectors(rng: random.Random, count: int, max_len: int) -> list[list[int]]:
    out = []
    for _ in range(count):
        n = rng.randint(1, max_len)
        scale = rng.choice([0.01, 0.3, 1.0, 3.0, 10.0, 100.0])
        out.append([clip(rng.gauss(0.0, scale)) for _ in range(n)])
    return out


def extreme_vectors(rng: random.Random, n: int) -> list[list[int]]:
    lo, hi = LOGIT.min_raw, LOGIT.max_raw
    return [
        [lo] * n,                                   # all equal at the bottom of the range
        [hi] * n,                                   # all equal at the top
        [lo] * (n - 1) + [hi],                      # the whole range, maximum last
        [hi] + [lo] * (n - 1),                      # maximum first
        [0] + [clip(-11.0 + 0.5 * rng.random()) for _ in range(n - 1)],  # many tiny terms
        [clip(-20.0 + 0.01 * rng.random()) for _ in range(n)],           # nearly flat
        [clip(rng.uniform(-128, 127.99)) for _ in range(n)],            # uniform over the range
    ]


def assert_within_bound(vecs, params):
    worst = 0.0
    for v in vecs:
        token, raw = softmax_greedy(v, params)
        ref_token, ref_p = reference_float(v)
        assert token == ref_token
        err = abs(PROB.to_float(raw) - ref_p)
        assert err <= ABS_BOUND + REL_BOUND * ref_p, (len(v), raw, ref_p)
        worst = max(worst, err)
    return worst


def test_known_answers():
    assert softmax_greedy([123], SMALL) == (0, 65536)
    assert softmax_greedy([77] * 4, SMALL) == (0, 16384)          # a tie: first index, p = 1/4
    assert softmax_greedy([-5 * 256] + [9 * 256] * 7, SMALL) == (1, 9362)  # 1/7 (floor)
    # A logit 1 nat above three zeros (float64: e / (e + 3) = 0.47537, 31154 in UQ1.16).
    # By hand: y = 256 * 47274 >> 15 = 369, reference ceil(369 / 256) = 2, so the maximum's term
    # is table[512 - 369] = round(2**24 * 2**(-143/256)) = 11391120 and each zero's is
    # 2**24 >> 2; p = (11391120 << 16) // (11391120 + 3 * 2**22) = 31139.
    assert softmax_greedy([0, 0, 256, 0], SMALL) == (2, 31139)


def test_model_against_float64_random_and_extreme():
    rng = random.Random(11)
    worst = assert_within_bound(vectors(rng, 300, 3000) + extreme_vectors(rng, 4096), FULL)
    print(f"softmax worst |p - p_float64| = {worst:.3g}")


def test_model_against_float64_full_vocabulary():
    rng = random.Random(12)
    full = [[clip(rng.gauss(0.0, s)) for _ in range(FULL.vocab)] for s in (1.0, 8.0)]
    full += extreme_vectors(rng, FULL.vocab)[4:6]
    assert_within_bound(full, FULL)


def test_model_rejects_bad_input():
    with pytest.raises(ValueError, match="logit"):
        softmax_greedy([LOGIT.max_raw + 1], SMALL)
    with pytest.raises(ValueError, match="vocab"):
        softmax_greedy([0] * (SMALL.vocab + 1), SMALL)
    with pytest.raises(ValueError, match="empty"):
        SoftmaxModel(SMALL).result()


def test_rtl_matches_model_bit_for_bit():
    rng = random.Random(5)
    vecs = vectors(rng, 40, 60) + extreme_vectors(rng, 13) + [[1], [LOGIT.min_raw] * 4]
    expected = [softmax_greedy(v, SMALL) for v in vecs]
    dut = Softmax(SMALL)
    got, latencies = [], []

    async def bench(ctx):
        for v in vecs:
            for beat in logits_beats(v, SMALL.lanes):
                await send(ctx, dut.logits, beat)
            cycles = 0
            while not ctx.get(dut.result.valid):
                await ctx.tick()
                cycles += 1
            latencies.append(cycles)
            for _ in range(rng.randint(0, 3)):     # back-pressure: the result must hold
                await ctx.tick()
                assert ctx.get(dut.result.valid) and not ctx.get(dut.logits.ready)
            result = await receive(ctx, dut.result)
            got.append((result.token, result.prob))

    run(dut, bench, name="softmax_random")
    assert got == expected
    # Cycles from the transfer of the last beat to result.valid: the five stage registers before
    # the running sum, then the divider's PROB.bits steps.
    assert set(latencies) == {Softmax.LATENCY} == {5 + PROB.bits}
