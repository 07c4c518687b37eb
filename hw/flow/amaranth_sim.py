"""Driving Components on Amaranth's simulator: the run with optional waves, stream handshakes
(used by the RTL tests and by `hw.flow.manager_replay`)."""
from __future__ import annotations

import os

from amaranth.sim import Simulator

from common.paths import BUILD


def run(dut, *testbenches, name: str, clock: bool = True, background=()) -> None:
    """Simulate `dut` with a 1 GHz clock (none for a combinational `dut`) and the given async
    testbenches; the run ends when they have returned. The ``background`` testbenches (stimulus
    sources) run beside them but do not keep the run going.

    With SADDLE_WAVES=1 the run writes ``build/waves/<name>.vcd``.
    """
    sim = Simulator(dut)
    if clock:
        sim.add_clock(1e-9)
    for tb in testbenches:
        sim.add_testbench(tb)
    for tb in background:
        sim.add_testbench(tb, background=True)
    if os.environ.get("SADDLE_WAVES", "") not in ("", "0"):
        out = BUILD / "waves"
        out.mkdir(parents=True, exist_ok=True)
        with sim.write_vcd(str(out / f"{name}.vcd")):
            sim.run()
        print(f"waveform: {out / f'{name}.vcd'}")
    else:
        sim.run()


async def send(ctx, port, payload) -> int:
    """Hold ``port.valid`` and ``payload`` until the transfer; returns the cycles waited."""
    ctx.set(port.valid, 1)
    ctx.set(port.payload, payload)
    waited = 0
    while True:
        *_, ready = await ctx.tick().sample(port.ready)
        if ready:
            break
        waited += 1
    ctx.set(port.valid, 0)
    return waited


async def receive(ctx, port):
    """Raise ``port.ready`` until a transfer; returns the payload (a data.Const view)."""
    ctx.set(port.ready, 1)
    payload, = await ctx.tick().sample(port.payload).until(port.valid)
    ctx.set(port.ready, 0)
    return payload
