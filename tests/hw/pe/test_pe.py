"""The bank PE and its arithmetic units in Amaranth's simulator, bit for bit against
sim/pe_ref.py: the units on seeded random and special operands, the PE on the corner-case
program, random back-to-back accumulations and long accumulations."""
import numpy as np
import pytest
from amaranth.sim import Simulator

from hw.flow.pe_replay import first_mismatch
from hw.flow.testbench.pe_vectors import (
    any_fp16,
    corner_program,
    expected_outputs,
    long_program,
    random_program,
)
from hw.pe.fp16_mul import FP16Mul
from hw.pe.fp16_round import FP32ToFP16
from hw.pe.fp32_add import FP32Add
from sim.pe_ref import Mode, fp16_mul, fp32_add, fp32_to_fp16

SPECIAL16 = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF,
             0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE00]


def combinational(dut, inputs: dict[str, np.ndarray], output: str) -> np.ndarray:
    """Apply each row of `inputs` to a combinational unit and read `output`."""
    n = len(next(iter(inputs.values())))
    got = np.zeros(n, np.uint64)

    async def bench(ctx):
        for i in range(n):
            for name, values in inputs.items():
                ctx.set(getattr(dut, name), int(values[i]))
            got[i] = ctx.get(getattr(dut, output))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    return got


def test_multiplier_matches_model():
    rng = np.random.default_rng(21)
    pairs = np.array([(a, b) for a in SPECIAL16 for b in SPECIAL16], np.uint16)
    a = np.concatenate([pairs[:, 0], any_fp16(rng, 1500)])
    b = np.concatenate([pairs[:, 1], any_fp16(rng, 1500)])
    got = combinational(FP16Mul(), {"a": a, "b": b}, "p")
    assert np.array_equal(got, fp16_mul(a, b))


def test_adder_matches_model():
    rng = np.random.default_rng(22)
    n = 1500
    sign = rng.integers(0, 2, n, dtype=np.uint32) << 31
    a = sign | rng.integers(80, 200, n, dtype=np.uint32) << 23 | rng.integers(0, 1 << 23, n, dtype=np.uint32)
    b = rng.permutation(a)
    close = slice(0, n // 2)  # same exponent or opposite sign: cancellation, ties
    b[close] = a[close] ^ rng.integers(0, 2, n // 2, dtype=np.uint32) << 31 ^ rng.integers(0, 64, n // 2, dtype=np.uint32)
    special = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001,
                        0x3F800000, 0xBF800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x00000001], np.uint32)
    sa, sb = np.meshgrid(special, special)
    a, b = np.concatenate([sa.ravel(), a]), np.concatenate([sb.ravel(), b])
    got = combinational(FP32Add(), {"a": a, "b": b}, "s")
    assert np.array_equal(got, fp32_add(a, b))


def test_fp16_rounding_matches_model():
    rng = np.random.default_rng(23)
    n = 3000
    x = (rng.integers(0, 2, n, dtype=np.uint32) << 31 | rng.integers(95, 146, n, dtype=np.uint32) << 23
         | rng.integers(0, 1 << 23, n, dtype=np.uint32))
    x[:500] = x[:500] & ~np.uint32(0xFFF) | np.uint32(0x1000)  # exact ties at binary16 precision
    x = np.concatenate([x, np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000,
                                     0x477FEFFF, 0x477FF000, 0x33000000, 0x33000001], np.uint32)])
    got = combinational(FP32ToFP16(), {"a": x}, "h")
    assert np.array_equal(got, fp32_to_fp16(x))


def check(program, lanes):
    assert expected_outputs(program, lanes), "program without a DRAIN checks nothing"
    cycle = first_mismatch(program, lanes)
    assert cycle is None, f"out differs from the model from cycle {cycle} on"


@pytest.mark.parametrize("lanes", [4, 16])
def test_corner_cases(lanes):
    check(corner_program(lanes), lanes)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_back_to_back_accumulations(seed):
    check(random_program(seed, 4, 25), 4)


@pytest.mark.parametrize("mode", [Mode.DOT, Mode.AXPY])
def test_long_accumulation(mode):
    check(long_program(30 + int(mode), 4, 300, mode), 4)
