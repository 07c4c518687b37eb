"""Power of the Manager and the bank PE with OpenSTA, from simulated switching activity.

Debian's OpenSTA (2.0.17) reads no VCD or SAIF, so the activity is measured here and given to
OpenSTA as two figures (``set_power_activity``):

- ``input``: toggles per bit per clock cycle of the block's input ports, and
- ``global``: toggles per bit per cycle over every signal bit of the RTL (registers and named
  combinational signals), applied to every net of the mapped netlist.

Both come from a VCD of Amaranth's simulator: for the Manager, the first ``MANAGER_TXNS``
transactions of the default real-trace co-verification (``saddle hw coverify``: saddle, batch
16, the SmolLM2 trace) replayed on the Manager of configs/manager_coverify.yaml with the same
20 % event stalls; for the PE, a random accumulation program of hw/flow/testbench/pe_vectors.py
on 16 lanes (random FP16 operands, a high-activity case: the PE has no trace of its own). The
netlists are the shipped blocks' osu018 netlists of ``saddle hw synth`` with every net's fanout
bounded by buffer trees (``sta_buffered.v`` of ``saddle hw timing``): as mapped, one X1 gate
drives up to 512 loads and the library's power tables are read far outside their slew range.
The clock is the paper's 1 GHz, so dynamic power in W is also energy per cycle in nJ; the clock
net's activity is the clock's (every flip-flop is clocked in every cycle: no clock gating).

Scaling to 28 nm (``SCALING``): dynamic energy per cycle E = a C V^2 scales with the switched
capacitance, proportional to the drawn feature size (constant-field scaling, Dennard et al.,
IEEE JSSC 1974), and with V^2: osu018's typical corner is 1.8 V, 0.9 V is taken as the 28 nm
supply, so E_28 = E_180 x (28 / 180) x (0.9 / 1.8)^2 = 0.039 E_180. Leakage does not follow a
scaling rule (it grows at small nodes with the threshold voltage and the gate oxide): the osu018
figure is reported as measured and not carried to 28 nm.
"""
from __future__ import annotations

import re
from pathlib import Path

from common.paths import BUILD

MANAGER_TXNS = 1500
PE_PROGRAM = dict(seed=5, accumulations=40)
CLOCK_GHZ = 1.0
SCALING = {"node_nm": 28, "from_nm": 180, "vdd": 0.9, "from_vdd": 1.8}
SCALE = SCALING["node_nm"] / SCALING["from_nm"] * (SCALING["vdd"] / SCALING["from_vdd"]) ** 2


def vcd_activity(path: Path, inputs: set[str]) -> dict:
    """Toggles per bit per cycle from a VCD: over the top's ``inputs`` (port names) and over all
    signal bits; the clock is counted apart (cycles = its rising edges)."""
    ids: dict[str, tuple[str, int]] = {}
    last: dict[str, int] = {}
    toggles: dict[str, int] = {}
    clock_ids, cycles, depth = set(), 0, 0
    with open(path) as f:
        for line in f:
            if line.startswith("$scope"):
                depth += 1
            elif line.startswith("$upscope"):
                depth -= 1
            elif line.startswith("$var"):
                _, _, width, ident, name, *_ = line.split()
                # Aliases of a signal already counted, and the fields of a View (`\cmd__payload.op`)
                # shown beside the signal itself, are not more bits.
                if ident in ids or name.startswith("\\"):
                    continue
                # Amaranth's VCD: scope `bench`, then the design's top, whose ports are the inputs.
                ids[ident] = (name if depth == 2 else "", int(width))
                if name == "clk":
                    clock_ids.add(ident)
            elif line.startswith("$enddefinitions"):
                break
        # Changes are committed per timestamp: the simulator's delta cycles (zero-delay
        # glitches of combinational signals) are not toggles of a real net.
        pending: dict[str, int] = {}

        def commit():
            for ident, v in pending.items():
                if ident in last:
                    toggles[ident] = toggles.get(ident, 0) + bin(last[ident] ^ v).count("1")
                last[ident] = v
            pending.clear()

        for line in f:
            c = line[0]
            if c == "#":
                commit()
                continue
            if c == "$":
                continue
            if c == "b":
                value, ident = line[1:].split()
                v = int(value, 2) if re.fullmatch(r"[01]+", value) else 0
            elif c in "01xz":
                ident, v = line[1:].strip(), int(c == "1")
            else:
                continue
            if ident in clock_ids:
                cycles += v
            elif ident in ids:
                pending[ident] = v
        commit()
    counted = [i for i in ids if i not in clock_ids]
    bits = sum(ids[i][1] for i in counted)
    in_ids = [i for i in counted if ids[i][0] in inputs]
    in_bits = sum(ids[i][1] for i in in_ids)
    cycles = max(cycles, 1)
    return {"cycles": cycles, "signal_bits": bits, "input_bits": in_bits,
            "global": round(sum(toggles.get(i, 0) for i in counted) / bits / cycles, 5),
            "input": round(sum(toggles.get(i, 0) for i in in_ids) / max(in_bits, 1) / cycles, 5)}


def input_ports(component) -> set[str]:
    from amaranth.lib.wiring import In

    return {"__".join(map(str, path)) for path, member, _ in component.signature.flatten(component)
            if member.flow == In}


def manager_activity(out: Path, params) -> dict:
    """Activity of the Manager replaying the first MANAGER_TXNS transactions of the run
    ``params`` (`sim.systems.run.RunParams`)."""
    import os

    from hw.flow import manager_replay
    from hw.flow.coverify import record_run
    from hw.manager.manager import Manager

    config, pairs, _ = record_run(params)
    pairs = pairs[:MANAGER_TXNS]
    vcd = BUILD / "waves" / "power_manager.vcd"
    os.environ["SADDLE_WAVES"] = "1"
    try:
        result = manager_replay.replay(config, pairs, stall=0.2, seed=0, name="power_manager")
    finally:
        del os.environ["SADDLE_WAVES"]
    assert result.mismatch is None, result.mismatch
    ports = input_ports(Manager.from_config(config, manager_replay.IDLE_SOFTMAX))
    act = vcd_activity(vcd, ports)
    vcd.unlink()
    return {**act, "source": f"real trace, the first {len(pairs)} transactions of the default "
                             f"`saddle hw coverify` run on the Manager of configs/manager_coverify.yaml"}


def pe_activity(out: Path) -> dict:
    from amaranth.sim import Simulator

    from hw.flow.testbench.pe_vectors import pack_command, program_cycles, random_program
    from hw.pe.bank_pe import BankPE

    lanes = 16
    program = random_program(PE_PROGRAM["seed"], lanes, PE_PROGRAM["accumulations"])
    dut = BankPE(lanes)

    async def bench(ctx):
        for cycle in range(program_cycles(program)):
            cmd = program[cycle] if cycle < len(program) else None
            ctx.set(dut.cmd.valid, cmd is not None)
            ctx.set(dut.cmd.payload.as_value(), pack_command(cmd, lanes) if cmd is not None else 0)
            await ctx.tick()

    vcd = Path(out) / "power_pe.vcd"
    vcd.parent.mkdir(parents=True, exist_ok=True)
    sim = Simulator(dut)
    sim.add_clock(1e-9)
    sim.add_testbench(bench)
    with sim.write_vcd(str(vcd)):
        sim.run()
    act = vcd_activity(vcd, input_ports(dut))
    vcd.unlink()
    return {**act, "source": f"random accumulation program (pe_vectors.random_program, seed "
                             f"{PE_PROGRAM['seed']}, {PE_PROGRAM['accumulations']} accumulations, 16 lanes)"}


def sta_power(sta: Path, liberty: Path, netlist: Path, top: str, activity: dict, work: Path) -> dict:
    """OpenSTA's ``report_power`` of ``netlist`` at CLOCK_GHZ under ``activity``: W by group."""
    from hw.flow.timing import run_sta

    period = 1.0 / CLOCK_GHZ
    script = f"""read_liberty {Path(liberty).resolve()}
read_verilog {Path(netlist).resolve()}
link_design {top}
create_clock -name clk -period {period} [get_ports clk]
set_input_delay 0 -clock clk [delete_from_list [all_inputs] [get_ports clk]]
set_power_activity -global -activity {activity['global']} -duty 0.5
set_power_activity -input -activity {activity['input']} -duty 0.5
report_power -digits 6
"""
    text = run_sta(sta, script, work, "power")
    groups = {}
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] in ("Sequential", "Combinational", "Total") and len(parts) >= 5:
            groups[parts[0].lower()] = {k: float(v) for k, v in zip(("internal", "switching", "leakage", "total"),
                                                                   parts[1:5])}
    return groups
