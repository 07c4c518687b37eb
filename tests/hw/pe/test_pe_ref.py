"""The PE's bit-exact numpy model (sim/pe_ref.py): known answers, rounding independent of the
model's own code path, order of additions, and its error against exact arithmetic."""
import math

import numpy as np
import pytest

from common.errors import ConfigError
from hw.flow.testbench.pe_vectors import any_fp16, finite_fp16, h
from sim.pe_ref import (
    BankPERef,
    Mode,
    accumulate,
    adder_tree,
    error_bound,
    fp16_mul,
    fp32_add,
    fp32_to_fp16,
    load_params,
)


def f32(x):
    return np.float32(x).view(np.uint32)


def value32(bits):
    return np.asarray(bits, np.uint32).view(np.float32)


def test_products_are_exact():
    rng = np.random.default_rng(5)
    a, b = finite_fp16(rng, 50_000, max_exp=30), finite_fp16(rng, 50_000, max_exp=30)
    exact = a.view(np.float16).astype(np.float64) * b.view(np.float16).astype(np.float64)
    assert np.array_equal(value32(fp16_mul(a, b)).astype(np.float64), exact)
    # the extremes: 2^-24 * 2^-24 = 2^-48 and 65504^2
    assert value32(fp16_mul(np.uint16(1), np.uint16(1))) == np.float32(2.0 ** -48)
    assert value32(fp16_mul(np.uint16(h(65504.0)), np.uint16(h(65504.0)))) == np.float32(65504.0 ** 2)


def test_product_special_values():
    inf, ninf, nan, zero, nzero, one = 0x7C00, 0xFC00, 0x7E01, 0x0000, 0x8000, h(1.0)
    a = np.array([inf, inf, ninf, nan, nzero, nzero], np.uint16)
    b = np.array([zero, one, one, one, one, nzero], np.uint16)
    assert [hex(x) for x in fp16_mul(a, b)] == ["0x7fc00000", "0x7f800000", "0xff800000",
                                               "0x7fc00000", "0x80000000", "0x0"]


def test_fp32_add_rounds_to_nearest_even_like_exact_arithmetic():
    """Reference: the float64 sum rounded once to float32, which is correctly rounded (double
    rounding is innocuous for + when 53 >= 2*24 + 2)."""
    rng = np.random.default_rng(6)
    n = 100_000
    sign = rng.integers(0, 2, n, dtype=np.uint32) << 31
    a = sign | rng.integers(100, 160, n, dtype=np.uint32) << 23 | rng.integers(0, 1 << 23, n, dtype=np.uint32)
    b = a ^ rng.integers(0, 2, n, dtype=np.uint32) << 31 ^ rng.integers(0, 1 << 12, n, dtype=np.uint32)
    b[::2] = rng.permutation(a)[::2]
    want = (value32(a).astype(np.float64) + value32(b).astype(np.float64)).astype(np.float32)
    assert np.array_equal(fp32_add(a, b), want.view(np.uint32))
    # ties: 2^24 + 1 rounds to 2^24 (even), 2^24 + 3 to 2^24 + 4
    assert value32(fp32_add(f32(2.0 ** 24), f32(1.0))) == 2.0 ** 24
    assert value32(fp32_add(f32(2.0 ** 24), f32(3.0))) == 2.0 ** 24 + 4


def test_fp32_add_zeros_infinities_nan():
    pz, nz, inf, ninf = f32(0.0), f32(-0.0), f32(np.inf), f32(-np.inf)
    assert fp32_add(nz, nz) == nz and fp32_add(pz, nz) == pz
    assert fp32_add(f32(1.5), f32(-1.5)) == pz
    assert fp32_add(inf, ninf) == 0x7FC00000 and fp32_add(inf, f32(1.0)) == inf
    assert fp32_add(np.uint32(0x7F800001), f32(1.0)) == 0x7FC00000
    assert fp32_add(f32(3.0e38), f32(3.0e38)) == inf
    with pytest.raises(ArithmeticError, match="subnormal"):
        fp32_add(f32(2.0 ** -126), f32(-1.5 * 2.0 ** -126))


def test_adder_tree_is_pairwise_in_lane_order():
    # Sequentially 2^24 + 1 + 1 + 1 = 2^24 (each +1 is a tie to even); pairwise it is
    # (2^24 + 1) + (1 + 1) = 2^24 + 2.
    products = np.array([f32(2.0 ** 24), f32(1.0), f32(1.0), f32(1.0)])
    assert value32(adder_tree(products)) == 2.0 ** 24 + 2
    # Pairs of neighbours, not (p0+p2) + (p1+p3): (2^24+1) + (3+1) = 2^24 + 4, whereas
    # (2^24+3) + (1+1) = (2^24+4) + 2 = 2^24 + 6.
    products = np.array([f32(2.0 ** 24), f32(1.0), f32(3.0), f32(1.0)])
    assert value32(adder_tree(products)) == 2.0 ** 24 + 4


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


def test_fp16_output_rounding():
    x = np.array([65504.0, 65519.0, 65520.0, -1e6, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -25,
                  2.0 ** -14 - 2.0 ** -25], np.float32).view(np.uint32)
    got = fp32_to_fp16(x)
    assert [hex(v) for v in got] == ["0x7bff", "0x7bff", "0x7c00", "0xfc00", "0x1", "0x0", "0x2", "0x400"]
    assert fp32_to_fp16(np.uint32(0xFFC12345)) == 0x7E00


@pytest.mark.parametrize("mode", [Mode.DOT, Mode.AXPY])
def test_error_against_exact_arithmetic_within_bound(mode):
    """Against exact sums (math.fsum of the exact float64 products): the binary32 result is
    within the a priori bound of error_bound, and the binary16 output within that plus half
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
    bound = error_bound(mode, rows, ops)
    err32 = np.abs(got32 - exact)
    assert np.all(err32 <= bound)
    # Measured (hw/README.md): at most ~10 u sum|p| for 256 commands, against the a priori
    # (log2(lanes) + commands) u sum|p| = 260 u sum|p|; 16 u sum|p| is the stated envelope.
    magnitude = np.abs(products).sum(axis=(1, 2) if mode == Mode.DOT else 1)
    assert np.all(err32 <= 16 * 2.0 ** -24 * magnitude)
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
