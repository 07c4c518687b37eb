"""The PE's bit-exact numpy model (hw/pe/reference.py): exact products, the one rounding of the
exact sum checked against independent arithmetic, known answers, specials, the wrap beyond the
accumulators' range, and the error against exact arithmetic."""
import math
from fractions import Fraction

import numpy as np
import pytest

from common.errors import ConfigError
from hw.flow.testbench.pe_vectors import any_fp16, finite_fp16, h
from hw.pe.reference import (
    ACC_BITS,
    FRAC_BITS,
    UNIT_ROUNDOFF_FP32,
    Accumulators,
    BankPERef,
    Mode,
    accumulate,
    fp16_product,
    fp32_to_fp16,
    load_params,
    product_values,
    round_fp32,
)


def value32(bits):
    return np.asarray(bits, np.uint32).view(np.float32)


def test_products_are_exact():
    rng = np.random.default_rng(5)
    a, b = finite_fp16(rng, 50_000, max_exp=30), finite_fp16(rng, 50_000, max_exp=30)
    exact = a.view(np.float16).astype(np.float64) * b.view(np.float16).astype(np.float64)
    # float64 holds every product exactly (22 significand bits), so scaling by 2^48 is exact too.
    assert [int(v) for v in product_values(a, b)] == [int(x) for x in exact * 2.0 ** FRAC_BITS]
    p = fp16_product(a, b)
    assert p.mag.max() < 1 << 22 and p.shift.max() <= 58
    # the extremes: 2^-24 * 2^-24 = 2^-48 (one unit) and 65504^2
    assert product_values(np.uint16(1), np.uint16(1)) == 1
    assert product_values(np.uint16(h(65504.0)), np.uint16(h(65504.0))) == 65504 ** 2 << FRAC_BITS


def test_product_special_values():
    inf, ninf, nan, zero, nzero, one = 0x7C00, 0xFC00, 0x7E01, 0x0000, 0x8000, h(1.0)
    a = np.array([inf, inf, ninf, nan, nzero, nzero], np.uint16)
    b = np.array([zero, one, one, one, one, nzero], np.uint16)
    p = fp16_product(a, b)
    assert list(p.nan) == [True, False, False, True, False, False]
    assert list(p.inf) == [False, True, True, False, False, False]
    assert list(p.sign) == [False, False, True, False, True, False]
    assert list(p.mag) == [0] * 6


def test_round_fp32_is_correct_rounding():
    """Against exact rational arithmetic: the nearest binary32, ties to the even significand."""
    rng = np.random.default_rng(6)
    values = [int(rng.integers(-(1 << 62), 1 << 62)) >> int(rng.integers(0, 62)) for _ in range(3000)]
    values += [(1 << 71) + 1, (1 << 72) - 1, -(1 << (ACC_BITS - 1)), (3 << 70) + (1 << 47)]

    def nearest(v):
        x = Fraction(v, 1 << FRAC_BITS)
        if x == 0:
            return 0.0
        e = math.floor(math.log2(abs(x)))
        while abs(x) >= Fraction(2) ** (e + 1):
            e += 1
        while abs(x) < Fraction(2) ** e:
            e -= 1
        ulp = Fraction(2) ** (e - 23)
        q, r = divmod(x / ulp, 1)
        if r > Fraction(1, 2) or (r == Fraction(1, 2) and q % 2):
            q += 1
        return float(q * ulp)

    for v in values:
        assert float(value32(np.uint32(round_fp32(v)))) == nearest(v), v
    # ties: 2^24 + 1 -> 2^24 (even), 2^24 + 3 -> 2^24 + 4
    assert value32(np.uint32(round_fp32(((1 << 24) + 1) << FRAC_BITS))) == 2.0 ** 24
    assert value32(np.uint32(round_fp32(((1 << 24) + 3) << FRAC_BITS))) == 2.0 ** 24 + 4
    assert round_fp32(0) == 0


def test_sum_is_exact_whatever_the_order():
    """2^24 + 1 + 1 + 1 is 2^24 + 3 -> 2^24 + 4 in any order and any grouping (a binary32
    adder chain would give 2^24 sequentially, 2^24 + 2 pairwise)."""
    ones = [h(1.0)] * 3
    for row in ([h(4096.0), *ones], [*ones, h(4096.0)], [h(1.0), h(4096.0), h(1.0), h(1.0)]):
        operand = [h(4096.0) if x == h(4096.0) else h(1.0) for x in row]
        got = accumulate(Mode.DOT, np.array([row], np.uint16), np.array([operand], np.uint16))
        assert value32(got[0]) == 2.0 ** 24 + 4


def test_known_dot_and_axpy_answers():
    pe = BankPERef(4)
    pe.start(Mode.DOT)
    pe.mac(np.array([h(1), h(2), h(3), h(4)], np.uint16), np.array([h(0.5)] * 4, np.uint16))
    pe.mac(np.array([h(-1), h(10), h(0), h(0.25)], np.uint16), np.array([h(2)] * 4, np.uint16))
    fp32, fp16 = pe.drain()
    assert list(value32(fp32)) == [5.0 + 18.5, 0, 0, 0]
    assert list(fp16.view(np.float16)) == [23.5, 0, 0, 0]
    pe.start(Mode.AXPY)
    pe.mac(np.array([h(1), h(2), h(3), h(4)], np.uint16), np.array([h(0.5)] * 4, np.uint16))
    pe.mac(np.array([h(-1), h(10), h(0), h(0.25)], np.uint16), np.array([h(2)] * 4, np.uint16))
    assert list(value32(pe.drain()[0])) == [-1.5, 21.0, 1.5, 2.5]


def test_specials_and_zeros():
    nan_row = np.array([0x7C00, h(1.0), h(2.0), h(3.0)], np.uint16)
    pe = BankPERef(4)
    for mode in Mode:
        pe.start(mode)
        pe.mac(nan_row, np.array([0x0000, h(1.0), h(1.0), h(1.0)], np.uint16))   # inf x 0
        assert pe.drain()[0][0] == 0x7FC00000
        pe.start(mode)
        pe.mac(np.array([0x7C00, 0xFC00, 0, 0], np.uint16), np.array([h(1.0)] * 4, np.uint16))
        assert pe.drain()[0][0] == (0x7FC00000 if mode == Mode.DOT else 0x7F800000)
        pe.start(mode)
        pe.mac(np.array([0x8000, h(-1.5), h(1.5), 0x8000], np.uint16), np.array([0, h(2.0), h(2.0), 0], np.uint16))
        assert pe.drain()[0][0] == 0    # exact zero (also -0 x +0): +0


def test_wraps_beyond_the_accumulator():
    acc = Accumulators.zeros(1)
    acc.hi[0] = (1 << (ACC_BITS - 40 - 1)) - 1      # just below 2^99 units
    acc.lo[0] = (1 << 40) - 1
    assert acc.values()[0] == (1 << (ACC_BITS - 1)) - 1
    acc.lo[0] += 1
    assert acc.values()[0] == -(1 << (ACC_BITS - 1))


def test_fp16_output_rounding():
    x = np.array([65504.0, 65519.0, 65520.0, -1e6, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -25,
                  2.0 ** -14 - 2.0 ** -25], np.float32).view(np.uint32)
    got = fp32_to_fp16(x)
    assert [hex(v) for v in got] == ["0x7bff", "0x7bff", "0x7c00", "0xfc00", "0x1", "0x0", "0x2", "0x400"]
    assert fp32_to_fp16(np.uint32(0xFFC12345)) == 0x7E00


@pytest.mark.parametrize("mode", [Mode.DOT, Mode.AXPY])
def test_error_against_exact_arithmetic_within_bound(mode):
    """Against exact sums (math.fsum of the exact float64 products, itself within 2^-53 of the
    exact sum): the binary32 result is the exact sum correctly rounded, so within u |exact|
    (u = 2^-24) whatever the number of commands, and the binary16 output within that plus half
    an ulp of binary16 (relative 2^-11, absolute 2^-25 in the subnormal range)."""
    rng = np.random.default_rng(7 + int(mode))
    pes, commands, lanes = 200, 256, 16
    rows, ops = finite_fp16(rng, (pes, commands, lanes)), finite_fp16(rng, (pes, commands, lanes))
    acc = accumulate(mode, rows, ops)
    products = rows.view(np.float16).astype(np.float64) * ops.view(np.float16).astype(np.float64)
    if mode == Mode.DOT:
        exact = np.array([math.fsum(p.ravel()) for p in products])
        got32, got16 = value32(acc[:, 0]).astype(np.float64), fp32_to_fp16(acc[:, 0])
    else:
        exact = np.array([[math.fsum(p[:, lane]) for lane in range(lanes)] for p in products])
        got32, got16 = value32(acc).astype(np.float64), fp32_to_fp16(acc)
    bound = UNIT_ROUNDOFF_FP32 * np.abs(exact) * (1 + 2.0 ** -50)
    assert np.all(np.abs(got32 - exact) <= bound)
    got16 = got16.view(np.float16).astype(np.float64)
    assert np.all(np.abs(got16 - exact) <= bound + np.abs(exact) * 2.0 ** -11 + 2.0 ** -25)


def test_any_bit_pattern_is_handled():
    rng = np.random.default_rng(8)
    rows, ops = any_fp16(rng, (500, 8, 16)), any_fp16(rng, (500, 8, 16))
    for mode in Mode:
        acc = accumulate(mode, rows, ops)
        nan = np.isnan(acc.view(np.float32))
        assert np.all(acc[nan] == 0x7FC00000)


def test_params_are_checked(tmp_path):
    p = load_params()
    assert (p.lanes, p.column_bytes, p.macs_per_column) == (16, 32, 16)
    bad = tmp_path / "pe.yaml"
    bad.write_text("lanes: 12\ncolumn_bytes: 24\npipeline_latency_cycles: 3\n"
                   "drain_latency_cycles: 2\ncommand_interval_cycles: 1\n")
    with pytest.raises(ConfigError, match=r"pe.yaml: lanes: expected a power of two"):
        load_params(bad)
    bad.write_text("lanes: 16\ncolumn_bytes: 24\npipeline_latency_cycles: 3\n"
                   "drain_latency_cycles: 2\ncommand_interval_cycles: 1\n")
    with pytest.raises(ConfigError, match=r"column_bytes: expected 2 \* lanes = 32"):
        load_params(bad)
    bad.write_text("lanes: 16\ncolumn_bytes: 32\n")
    with pytest.raises(ConfigError, match=r"missing key 'pipeline_latency_cycles'"):
        load_params(bad)
