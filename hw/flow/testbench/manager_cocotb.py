"""cocotb coroutines that drive the exported Manager Verilog with model transactions and compare
its events with the model's (used by tests/hw/manager/cocotb_manager.py and by
`hw/flow/testbench/manager_txlog.py`).

Inputs change and outputs are read at the falling edge (``ready`` and every event field are
registered or decoded from registers); the rising edge transfers.
"""
from __future__ import annotations

from cocotb.triggers import FallingEdge, RisingEdge

from hw.flow.manager_codec import (
    acceptance_writes,
    config_ports,
    decode,
    logits_beats,
    pack,
    pack_logits_beat,
    unpack,
)
from hw.manager.manager import EventKind
from hw.manager.softmax import logits_layout
from sim.manager.transactions import DraftLogits


async def reset(dut, config) -> None:
    """Configuration ports from ``config`` (a ``ManagerConfig``), one reset cycle, then the
    acceptance table through its register port, one entry per cycle."""
    for port, value in config_ports(config).items():
        getattr(dut, port).value = value
    dut.rst.value = 1
    dut.cmd__valid.value = 0
    dut.event__ready.value = 0
    dut.logits__valid.value = 0
    dut.acceptance_write__en.value = 0
    await RisingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.rst.value = 0
    for entry, value in acceptance_writes(config):
        dut.acceptance_write__en.value = 1
        dut.acceptance_write__addr.value = entry
        dut.acceptance_write__data.value = value
        await FallingEdge(dut.clk)
    dut.acceptance_write__en.value = 0


async def replay(dut, pairs, rng, stall: float, max_mismatches: int = 4):
    """Every (transaction, expected events or the model's ProtocolError) of ``pairs``; an illegal
    transaction must give no event and count on ``errors``; ``event.ready`` is low in a cycle with
    probability ``stall`` (5 % of those stalls last 40 cycles). Returns (mismatch descriptions,
    transactions compared, cycles)."""
    mismatches, cycles, stall_left, compared, errors_expected = [], 0, 0, 0, 0
    for i, (txn, expected) in enumerate(pairs):
        dut.cmd__payload.value = pack(txn)
        dut.cmd__valid.value = 1
        while True:
            ready = int(dut.cmd__ready.value)
            await FallingEdge(dut.clk)
            cycles += 1
            if ready:
                break
        dut.cmd__valid.value = 0
        beats = []
        while True:
            if stall_left == 0 and rng.random() < stall:
                stall_left = 40 if rng.random() < 0.05 else 1
            hold = stall_left > 0
            stall_left = max(0, stall_left - 1)
            dut.event__ready.value = int(not hold)
            beat = unpack(int(dut.event__payload.value)) if int(dut.event__valid.value) and not hold else None
            await FallingEdge(dut.clk)
            cycles += 1
            if beat is not None:
                beats.append(beat)
                if beat["kind"] is EventKind.DONE:
                    break
        got = decode(beats)
        # An illegal transaction (the model's ProtocolError): no event, one more error.
        illegal = isinstance(expected, Exception)
        errors_expected = min(255, errors_expected + illegal)
        if illegal:
            expected = []
        if got != list(expected) or int(dut.errors.value) != errors_expected:
            mismatches.append(f"#{i} {txn}: RTL {got}, {int(dut.errors.value)} errors; model {list(expected)}, "
                              f"{errors_expected} errors")
            if len(mismatches) >= max_mismatches:
                break
        else:
            compared += 1
    dut.event__ready.value = 0
    return mismatches, compared, cycles


async def feed_logits(dut, pairs, softmax) -> None:
    """The logits of every DraftLogits in order, one beat per cycle when the unit is ready."""
    layout = logits_layout(softmax)
    for txn, _ in pairs:
        if not isinstance(txn, DraftLogits):
            continue
        for beat in logits_beats(txn.logits, softmax.lanes):
            dut.logits__payload.value = pack_logits_beat(beat, layout)
            dut.logits__valid.value = 1
            while True:
                ready = int(dut.logits__ready.value)
                await FallingEdge(dut.clk)
                if ready:
                    break
    dut.logits__valid.value = 0
