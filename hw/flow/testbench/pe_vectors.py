"""Golden command programs for the bank PE, with the expected output of every cycle.

Pure Python + numpy (no Amaranth, no cocotb): the Amaranth-simulator adapter (hw/flow/pe_replay.py,
used by tests/hw/pe/test_pe.py and `saddle hw mutate`) and the cocotb adapter
(tests/hw/pe/cocotb_pe.py) drive the same per-cycle programs and compare with the same
expectations, computed by hw/pe/reference.py and the latencies of configs/hardware/bank_pe.yaml.

A program is a list with one entry per cycle: None (no command) or a `Command`. Payloads are
packed into the flat integer of the `cmd.payload` port (hw/pe/bank_pe.py: op[0:2], mode[2], row lanes,
operand lanes), which is also the exported Verilog port `cmd__payload`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hw.pe.reference import BankPERef, Mode, Op, load_params


@dataclass(frozen=True)
class Command:
    op: Op
    mode: Mode = Mode.DOT
    row: tuple[int, ...] = ()
    operand: tuple[int, ...] = ()


def pack_command(cmd: Command, lanes: int) -> int:
    row = cmd.row or (0,) * lanes
    operand = cmd.operand or (0,) * lanes
    if len(row) != lanes or len(operand) != lanes:
        raise ValueError(f"command needs {lanes} row and operand values")
    word = int(cmd.op) | int(cmd.mode) << 2
    for i, v in enumerate(row):
        word |= int(v) << (3 + 16 * i)
    for i, v in enumerate(operand):
        word |= int(v) << (3 + 16 * lanes + 16 * i)
    return word


def unpack_result(word: int, lanes: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    fp32 = tuple((word >> (32 * i)) & 0xFFFFFFFF for i in range(lanes))
    fp16 = tuple((word >> (32 * lanes + 16 * i)) & 0xFFFF for i in range(lanes))
    return fp32, fp16


def expected_outputs(program: list[Command | None], lanes: int) -> dict[int, tuple]:
    """cycle -> (fp32 lanes, fp16 lanes) for every cycle on which ``out.valid`` must be 1."""
    latency = load_params().drain_latency_cycles
    ref = BankPERef(lanes)
    out = {}
    for cycle, cmd in enumerate(program):
        if cmd is None:
            continue
        if cmd.op == Op.START:
            ref.start(cmd.mode)
        elif cmd.op == Op.MAC:
            ref.mac(np.array(cmd.row, np.uint16), np.array(cmd.operand, np.uint16))
        else:
            fp32, fp16 = ref.drain()
            out[cycle + latency] = (tuple(int(x) for x in fp32), tuple(int(x) for x in fp16))
    return out


def program_cycles(program: list) -> int:
    """Cycles to run so that the last command's result has been observed."""
    return len(program) + load_params().pipeline_latency_cycles + 1


# --- values ---------------------------------------------------------------------------------

def finite_fp16(rng: np.random.Generator, shape, *, max_exp: int = 18) -> np.ndarray:
    """Finite binary16 bit patterns, random sign, exponent field 0..max_exp (0 = subnormal), so
    that sums cancel often and long accumulations stay finite."""
    sign = rng.integers(0, 2, shape, dtype=np.uint16) << 15
    exp = rng.integers(0, max_exp + 1, shape, dtype=np.uint16) << 10
    frac = rng.integers(0, 1 << 10, shape, dtype=np.uint16)
    return sign | exp | frac


def any_fp16(rng: np.random.Generator, shape) -> np.ndarray:
    """Any binary16 bit pattern, infinities and NaNs included."""
    return rng.integers(0, 1 << 16, shape, dtype=np.uint16)


def h(x: float) -> int:
    """binary16 bit pattern of a Python float."""
    return int(np.float16(x).view(np.uint16))


# --- programs -------------------------------------------------------------------------------

def accumulation(mode: Mode, rows: np.ndarray, operands: np.ndarray) -> list[Command]:
    """START, one MAC per row, DRAIN."""
    program = [Command(Op.START, mode)]
    for row, operand in zip(rows, operands):
        program.append(Command(Op.MAC, row=tuple(int(v) for v in row),
                               operand=tuple(int(v) for v in operand)))
    program.append(Command(Op.DRAIN))
    return program


def random_program(seed: int, lanes: int, accumulations: int, *, max_macs: int = 12,
                   idle: float = 0.2, special: float = 0.1) -> list[Command | None]:
    """Back-to-back accumulations of random length and mode, idle cycles in between and inside
    (probability `idle`), extra DRAINs mid-way, a fraction `special` of accumulations drawn from
    every bit pattern (NaN/inf) instead of finite values."""
    rng = np.random.default_rng(seed)
    program: list[Command | None] = []
    for _ in range(accumulations):
        mode = Mode(int(rng.integers(0, 2)))
        n = int(rng.integers(0, max_macs + 1))
        draw = any_fp16 if rng.random() < special else finite_fp16
        body = accumulation(mode, draw(rng, (n, lanes)), draw(rng, (n, lanes)))
        for cmd in body:
            while rng.random() < idle:
                program.append(None)
            program.append(cmd)
            if cmd.op == Op.MAC and rng.random() < 0.1:
                program.append(Command(Op.DRAIN))
    return program


def long_program(seed: int, lanes: int, macs: int, mode: Mode) -> list[Command | None]:
    """One accumulation of `macs` back-to-back MAC commands with a DRAIN every 64."""
    rng = np.random.default_rng(seed)
    rows, operands = finite_fp16(rng, (macs, lanes), max_exp=16), finite_fp16(rng, (macs, lanes), max_exp=16)
    program = accumulation(mode, rows, operands)
    for i in range(len(program) - 2, 0, -64):
        program.insert(i, Command(Op.DRAIN))
    return program


def corner_program(lanes: int) -> list[Command | None]:
    """The issue's corner cases, each as its own accumulation in both modes."""
    def fill(values):
        return tuple(values[i % len(values)] for i in range(lanes))

    big, tiny = h(60000.0), 0x0001  # 2^-24, the smallest subnormal
    cases = [
        # zeros of both signs: -0 * +0 = -0, sums of -0 stay -0, +0 + -0 = +0
        ([fill([0x8000])], [fill([0x0000])]),
        ([fill([0x8000, 0x0000])], [fill([0x8000, 0x8000])]),
        # subnormals: subnormal x normal, subnormal x subnormal (2^-48, exact in FP32)
        ([fill([tiny, 0x03FF, 0x8200])], [fill([h(1.0), tiny, h(-3.5)])]),
        ([fill([tiny])], [fill([tiny])]),
        # binary16 subnormal results after rounding, and the rounding tie 2^-25
        ([fill([h(2.0 ** -13)])], [fill([h(2.0 ** -12)])]),
        # overflow to infinity on the binary16 output, and 65504 / 65520 boundaries
        ([fill([big])], [fill([big])]),
        ([fill([h(65504.0)]), fill([h(8.0)])], [fill([h(1.0)]), fill([h(0.001953125)])]),
        # infinities and NaN: inf * 0 = NaN, inf + -inf = NaN, NaN in, inf * finite
        ([fill([0x7C00])], [fill([0x0000])]),
        ([fill([0x7C00, 0xFC00])], [fill([h(1.0)])]),
        ([fill([0x7E01])], [fill([h(2.0)])]),
        ([fill([0x7C00, h(1.0)])], [fill([h(-2.0), h(3.0)])]),
        # exact cancellation (x*y - x*y = +0) and cancellation down to the last bits
        ([fill([h(1.5), h(-1.5)])], [fill([h(3.0)])]),
        ([fill([h(2048.0), h(-2048.0), h(1.0) + 1])], [fill([h(1.0), h(1.0), h(1.0)])]),
        # alternating signs over a long run: +a, -a, +a, ...
        ([fill([h(1.0) + 7, h(-1.0) - 7]) for _ in range(9)], [fill([h(0.1)]) for _ in range(9)]),
        # the drain's rounding to binary32: 2^24 + 1 is a tie (to even: 2^24), 2^24 + 3 one that
        # rounds up, 2^24 + 1 + 2^-10 just above a tie (the sticky bit); DOT sums lanes x these
        ([fill([h(4096.0)]), fill([h(1.0)])], [fill([h(4096.0)]), fill([h(1.0)])]),
        ([fill([h(4096.0)]), fill([h(3.0)])], [fill([h(4096.0)]), fill([h(1.0)])]),
        ([fill([h(4096.0)]), fill([h(1.0)]), fill([h(2.0 ** -10)])],
         [fill([h(4096.0)]), fill([h(1.0)]), fill([h(1.0)])]),
        # a negative sum far above its smallest product (sign extension of the aligned words)
        ([fill([h(-4096.0)]), fill([tiny])], [fill([h(4096.0)]), fill([h(1.0)])]),
    ]
    program: list[Command | None] = []
    for rows, operands in cases:
        for mode in (Mode.DOT, Mode.AXPY):
            program += accumulation(mode, np.array(rows), np.array(operands))
    return program
