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

from hw.flow.manager_random import coverage, generate_with_events
from hw.flow.testbench.manager_cocotb import feed_logits, replay, reset
from sim.manager.config import ManagerConfig
from sim.manager.softmax import SoftmaxParams
from sim.manager.transactions import DraftLogits

CONFIG = ManagerConfig(**json.loads(os.environ.get("SADDLE_MGR_CONFIG", "{}")))
SOFTMAX = SoftmaxParams(**json.loads(os.environ["SADDLE_MGR_SOFTMAX"]))
LOGITS = os.environ.get("SADDLE_MGR_LOGITS", "1") != "0"
SEED = int(os.environ.get("SADDLE_SEED", "1"))
ILLEGAL = os.environ.get("SADDLE_MGR_ILLEGAL", "0") != "0"
TXNS = int(os.environ.get("SADDLE_MGR_TXNS", "1000"))
STALL = float(os.environ.get("SADDLE_MGR_STALL", "0.2"))


@cocotb.test(skip=ILLEGAL)
async def random_sequences(dut):
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    await reset(dut, CONFIG)
    rng = random.Random(SEED)
    pairs, model = generate_with_events(CONFIG, SEED, TXNS, softmax=SOFTMAX if LOGITS else None)
    cocotb.start_soon(feed_logits(dut, pairs, SOFTMAX))
    mismatches, _, cycles = await replay(dut, pairs, rng, STALL)
    assert not mismatches, f"{len(mismatches)}+ mismatching transactions, first: " + "; ".join(mismatches)
    model.conservation(final=True)
    cov = coverage(pairs)
    for corner in ("refused_shared", "refused_eager", "reject_first", "all_accepted", "moved",
                   "tie_across_requests", "tie_same_request", "not_issued_locked", "issued_full_pass"):
        assert cov[corner] > 0, (corner, dict(cov))
    logits = sum(isinstance(txn, DraftLogits) for txn, _ in pairs)
    assert logits > 0 or not LOGITS
    dut._log.info(f"{len(pairs)} transactions ({logits} DraftLogits), {cycles} cycles, coverage {dict(cov)}")


@cocotb.test(skip=not ILLEGAL)
async def illegal_transactions(dut):
    """Illegal transactions mixed into a random sequence (hw/flow/manager_stimulus.py
    ``illegal_pairs``): no event, ``errors`` counts each, later transactions still match."""
    from hw.flow.manager_stimulus import illegal_pairs

    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    await reset(dut, CONFIG)
    pairs = illegal_pairs(SEED, TXNS, config=CONFIG)
    illegal = sum(isinstance(e, Exception) for _, e in pairs)
    assert illegal > 20
    mismatches, compared, cycles = await replay(dut, pairs, random.Random(SEED), STALL)
    assert not mismatches, f"{len(mismatches)}+ mismatching transactions, first: " + "; ".join(mismatches)
    assert int(dut.errors.value) == illegal
    dut._log.info(f"{len(pairs)} transactions ({illegal} illegal), {cycles} cycles")
