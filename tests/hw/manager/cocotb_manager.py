"""cocotb adapter: seeded random transaction sequences on the exported Manager Verilog
(Verilator), every event compared with the Python model (sim/manager/manager.py).

Environment: SADDLE_MGR_CONFIG (JSON of the ManagerConfig fields the design was built with),
SADDLE_MGR_SOFTMAX (JSON of its SoftmaxParams), SADDLE_MGR_LOGITS (1: about 30 % of the drafts
come as logits; 0: none, for a full-vocabulary softmax), SADDLE_SEED, SADDLE_MGR_TXNS (random transactions per sequence), SADDLE_MGR_STALL (probability
that event.ready is low in a cycle; 5 % of those stalls last 40 cycles).
"""
import json
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge

from hw.manager import EventKind
from hw.softmax import logits_layout
from sim.manager.config import ManagerConfig
from sim.manager.random_txns import coverage, generate_with_events
from sim.manager.softmax import SoftmaxParams
from sim.manager.transactions import DraftLogits
from hw.manager_codec import config_ports, decode, logits_beats, pack, pack_logits_beat, unpack

CONFIG = ManagerConfig(**json.loads(os.environ.get("SADDLE_MGR_CONFIG", "{}")))
SOFTMAX = SoftmaxParams(**json.loads(os.environ["SADDLE_MGR_SOFTMAX"]))
LOGITS = os.environ.get("SADDLE_MGR_LOGITS", "1") != "0"
SEED = int(os.environ.get("SADDLE_SEED", "1"))
TXNS = int(os.environ.get("SADDLE_MGR_TXNS", "1000"))
STALL = float(os.environ.get("SADDLE_MGR_STALL", "0.2"))


async def reset(dut):
    for port, value in config_ports(CONFIG).items():
        getattr(dut, port).value = value
    dut.rst.value = 1
    dut.cmd__valid.value = 0
    dut.event__ready.value = 0
    dut.logits__valid.value = 0
    await RisingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.rst.value = 0


async def replay(dut, pairs, rng):
    """Inputs change and outputs are read at the falling edge (ready and every event field
    are registered or decoded from registers); the rising edge transfers."""
    mismatches, cycles, stall_left = [], 0, 0
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
            if stall_left == 0 and rng.random() < STALL:
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
        if got != expected:
            mismatches.append(f"#{i} {txn}: RTL {got} model {expected}")
            if len(mismatches) > 3:
                break
    dut.event__ready.value = 0
    return mismatches, cycles


async def feed_logits(dut, pairs):
    """The logits of every DraftLogits in order, one beat per cycle when the unit is ready."""
    layout = logits_layout(SOFTMAX)
    for txn, _ in pairs:
        if not isinstance(txn, DraftLogits):
            continue
        for beat in logits_beats(txn.logits, SOFTMAX.lanes):
            dut.logits__payload.value = pack_logits_beat(beat, layout)
            dut.logits__valid.value = 1
            while True:
                ready = int(dut.logits__ready.value)
                await FallingEdge(dut.clk)
                if ready:
                    break
    dut.logits__valid.value = 0


@cocotb.test()
async def random_sequences(dut):
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    await reset(dut)
    rng = random.Random(SEED)
    pairs, model = generate_with_events(CONFIG, SEED, TXNS, softmax=SOFTMAX if LOGITS else None)
    cocotb.start_soon(feed_logits(dut, pairs))
    mismatches, cycles = await replay(dut, pairs, rng)
    assert not mismatches, f"{len(mismatches)}+ mismatching transactions, first: " + "; ".join(mismatches)
    model.conservation(final=True)
    cov = coverage(pairs)
    for corner in ("refused_shared", "refused_eager", "reject_first", "all_accepted", "moved",
                   "tie_across_requests", "tie_same_request", "not_issued_locked", "issued_full_pass"):
        assert cov[corner] > 0, (corner, dict(cov))
    logits = sum(isinstance(txn, DraftLogits) for txn, _ in pairs)
    assert logits > 0 or not LOGITS
    dut._log.info(f"{len(pairs)} transactions ({logits} DraftLogits), {cycles} cycles, coverage {dict(cov)}")
