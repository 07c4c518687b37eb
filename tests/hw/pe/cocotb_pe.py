"""cocotb adapter: the `vectors` programs on the exported bank PE Verilog (Verilator).

Environment: SADDLE_PE_LANES (lanes of the built PE), SADDLE_SEED, SADDLE_PE_RANDOM (number of
random accumulations), SADDLE_PE_LONG (MACs of each long accumulation).
"""
import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge

from hw.flow.testbench.pe_vectors import (
    corner_program,
    expected_outputs,
    long_program,
    pack_command,
    program_cycles,
    random_program,
    unpack_result,
)
from hw.pe.reference import Mode

LANES = int(os.environ.get("SADDLE_PE_LANES", "16"))
SEED = int(os.environ.get("SADDLE_SEED", "1"))


async def run(dut, program):
    """Drive one command per cycle; compare ``out`` with the golden expectation every cycle.
    Inputs change and outputs are sampled at the falling edge: the outputs depend on registers
    only, so they are stable there, and the rising edge takes the inputs."""
    want = expected_outputs(program, LANES)
    dut.rst.value = 1
    dut.cmd__valid.value = 0
    dut.cmd__payload.value = 0
    await RisingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.rst.value = 0
    mismatches = []
    for cycle in range(program_cycles(program)):
        await FallingEdge(dut.clk)
        valid = int(dut.out__valid.value)
        if valid != (cycle in want):
            mismatches.append(f"cycle {cycle}: out.valid {valid}, expected {int(cycle in want)}")
        elif valid:
            got = unpack_result(int(dut.out__payload.value), LANES)
            if got != want[cycle]:
                mismatches.append(f"cycle {cycle}: got fp32 {[hex(v) for v in got[0]]} fp16 "
                                  f"{[hex(v) for v in got[1]]}, expected fp32 "
                                  f"{[hex(v) for v in want[cycle][0]]} fp16 {[hex(v) for v in want[cycle][1]]}")
        cmd = program[cycle] if cycle < len(program) else None
        dut.cmd__valid.value = int(cmd is not None)
        dut.cmd__payload.value = pack_command(cmd, LANES) if cmd is not None else 0
    assert not mismatches, f"{len(mismatches)} mismatching cycles, first: " + "; ".join(mismatches[:3])
    return len(want)


@cocotb.test()
async def corner_cases(dut):
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    assert await run(dut, corner_program(LANES)) > 0


@cocotb.test()
async def random_accumulations(dut):
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    count = int(os.environ.get("SADDLE_PE_RANDOM", "200"))
    assert await run(dut, random_program(SEED, LANES, count)) >= count


@cocotb.test()
async def long_accumulations(dut):
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    macs = int(os.environ.get("SADDLE_PE_LONG", "2000"))
    for mode in (Mode.DOT, Mode.AXPY):
        assert await run(dut, long_program(SEED + int(mode), LANES, macs, mode)) > macs // 64
