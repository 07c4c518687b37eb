"""Amaranth-simulator adapter: drive a `vectors` program into a BankPE cycle by cycle and
return what ``out`` showed, {cycle: (fp32 lanes, fp16 lanes)}."""
from amaranth.sim import Simulator

from hw.pe.bank_pe import BankPE
from tests.hw.pe.vectors import pack_command, program_cycles, unpack_result


def run_program(program, lanes: int):
    dut = BankPE(lanes)
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
