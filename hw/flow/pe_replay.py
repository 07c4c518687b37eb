"""Amaranth-simulator adapter of the bank PE: drive a `hw/flow/testbench/pe_vectors.py` program
into a BankPE cycle by cycle, return what ``out`` showed, and compare it with the model's
expectation (used by tests/hw/pe and by `saddle hw mutate`)."""
from amaranth.sim import Simulator

from hw.flow.testbench.pe_vectors import (
    expected_outputs,
    pack_command,
    program_cycles,
    unpack_result,
)
from hw.pe.bank_pe import BankPE


def run_program(program, lanes: int, fault: str | None = None):
    """{cycle: (fp32 lanes, fp16 lanes)} of every cycle ``out.valid`` was high, on a BankPE of
    ``lanes`` lanes carrying ``fault`` (None: the shipped design)."""
    dut = BankPE(lanes, fault=fault)
    seen = {}

    async def bench(ctx):
        for cycle in range(program_cycles(program)):
            cmd = program[cycle] if cycle < len(program) else None
            ctx.set(dut.cmd.valid, cmd is not None)
            ctx.set(dut.cmd.payload.as_value(), pack_command(cmd, lanes) if cmd is not None else 0)
            if ctx.get(dut.out.valid):
                seen[cycle] = unpack_result(ctx.get(dut.out.payload.as_value()), lanes)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return seen


def first_mismatch(program, lanes: int, fault: str | None = None) -> int | None:
    """The first cycle at which ``out`` differs from the model (valid on a wrong cycle, or a
    wrong payload), or None if every cycle matches."""
    got, want = run_program(program, lanes, fault), expected_outputs(program, lanes)
    wrong = [c for c in set(got) | set(want) if got.get(c) != want.get(c)]
    return min(wrong) if wrong else None
