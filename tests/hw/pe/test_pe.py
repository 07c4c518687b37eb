"""The bank PE and its arithmetic units in Amaranth's simulator, bit for bit against
hw/pe/reference.py: the units on seeded random and special operands, the PE on the corner-case
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
from hw.pe.fixed_to_fp32 import FixedToFP32
from hw.pe.fp16_mul import FP16Mul
from hw.pe.fp16_round import FP32ToFP16
from hw.pe.reference import ACC_BITS, FRAC_BITS, Mode, fp16_product, fp32_to_fp16, round_fp32

SPECIAL16 = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF,
             0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE00]


def combinational(dut, inputs: dict[str, np.ndarray], outputs: list[str]) -> dict[str, np.ndarray]:
    """Apply each row of `inputs` to a combinational unit and read `outputs`."""
    n = len(next(iter(inputs.values())))
    got = {name: np.zeros(n, np.uint64) for name in outputs}

    async def bench(ctx):
        for i in range(n):
            for name, values in inputs.items():
                ctx.set(getattr(dut, name), int(values[i]))
            for name in outputs:
                got[name][i] = ctx.get(getattr(dut, name))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    return got


def test_multiplier_matches_model():
    rng = np.random.default_rng(21)
    pairs = np.array([(a, b) for a in SPECIAL16 for b in SPECIAL16], np.uint16)
    a = np.concatenate([pairs[:, 0], any_fp16(rng, 1500)])
    b = np.concatenate([pairs[:, 1], any_fp16(rng, 1500)])
    ports = ["mag", "shift", "sign", "nan", "inf"]
    got = combinational(FP16Mul(), {"a": a, "b": b}, ports)
    want = fp16_product(a, b)
    for port in ports:
        assert np.array_equal(got[port], getattr(want, port).astype(np.uint64)), port


def fixed_test_values(rng, n: int) -> list[int]:
    """w-bit two's complement values of every magnitude, with exact binary32 ties and values
    just off them, the extremes and zero."""
    half = 1 << (ACC_BITS - 1)
    values = [0, 1, -1, half - 1, -half, -half + 1, 1 << FRAC_BITS, -(1 << FRAC_BITS)]
    for _ in range(n):
        top = int(rng.integers(0, ACC_BITS - 1))
        v = int(rng.integers(0, 1 << 62)) << max(0, top - 61) | 1 << top
        v &= (1 << (top + 1)) - 1
        kind = int(rng.integers(0, 4))
        if kind and top > 24:   # a tie at binary32 precision, or one unit off it
            v = (v >> (top - 23)) << (top - 23) | 1 << (top - 24)
            v += (kind - 2) * (top > 25)
        values.append(-v if rng.random() < 0.5 else v)
    return values


def test_fixed_to_fp32_matches_model():
    rng = np.random.default_rng(24)
    values = fixed_test_values(rng, 1500)
    flags = [(0, 0, 0)] * len(values) + [(1, 0, 0), (0, 1, 0), (0, 0, 1), (0, 1, 1), (1, 1, 1)]
    values += [12345] * 5
    dut = FixedToFP32(ACC_BITS, FRAC_BITS)
    got = []

    async def bench(ctx):
        for i in range(len(values) + dut.LATENCY - 1):
            if i < len(values):
                ctx.set(dut.value, values[i] % (1 << ACC_BITS))
                ctx.set(dut.nan, flags[i][0])
                ctx.set(dut.pinf, flags[i][1])
                ctx.set(dut.ninf, flags[i][2])
            await ctx.tick()
            if i + 1 >= dut.LATENCY:
                got.append(ctx.get(dut.fp32))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    specials = [0x7FC00000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7FC00000]
    want = [round_fp32(v) for v in values[:-5]] + specials
    assert got == want


def test_fp16_rounding_matches_model():
    rng = np.random.default_rng(23)
    n = 3000
    x = (rng.integers(0, 2, n, dtype=np.uint32) << 31 | rng.integers(95, 146, n, dtype=np.uint32) << 23
         | rng.integers(0, 1 << 23, n, dtype=np.uint32))
    x[:500] = x[:500] & ~np.uint32(0xFFF) | np.uint32(0x1000)  # exact ties at binary16 precision
    x = np.concatenate([x, np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000,
                                     0x477FEFFF, 0x477FF000, 0x33000000, 0x33000001], np.uint32)])
    got = combinational(FP32ToFP16(), {"a": x}, ["h"])["h"]
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
