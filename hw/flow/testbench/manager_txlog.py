"""cocotb test module: replay a Manager transaction log on the exported Manager Verilog.

Environment: SADDLE_MGR_TXLOG (the log, `sim/manager/txlog.py`; its outputs, or the model's when
it has inputs only, are the expected events), SADDLE_MGR_STALL (probability that event.ready is
low in a cycle), SADDLE_SEED (the stall pattern), SADDLE_MGR_REPORT (a JSON file the test writes:
transactions, compared, cycles, mismatches). The design must be built with the log's
configuration (`hw/flow/coverify.py` does both). SADDLE_MGR_CORRUPT (a transaction index; a
self-test only): the expected events of the first transaction with events from there on are
made wrong in one bit (`hw.flow.coverify.corrupt_expected`), so the replay must report a
mismatch there.
"""
import json
import os
import random

import cocotb
from cocotb.clock import Clock

from hw.flow.coverify import corrupt_expected, log_pairs
from hw.flow.testbench.manager_cocotb import feed_logits, replay, reset


@cocotb.test()
async def replay_txlog(dut):
    config, softmax, pairs = log_pairs(os.environ["SADDLE_MGR_TXLOG"])
    if os.environ.get("SADDLE_MGR_CORRUPT"):
        pairs, _ = corrupt_expected(pairs, int(os.environ["SADDLE_MGR_CORRUPT"]))
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    await reset(dut, config)
    if softmax is not None:
        cocotb.start_soon(feed_logits(dut, pairs, softmax))
    rng = random.Random(int(os.environ.get("SADDLE_SEED", "0")))
    mismatches, compared, cycles = await replay(dut, pairs, rng, float(os.environ.get("SADDLE_MGR_STALL", "0.2")),
                                                max_mismatches=1)
    report = {"transactions": len(pairs), "compared": compared, "cycles": cycles, "mismatches": mismatches}
    with open(os.environ["SADDLE_MGR_REPORT"], "w") as f:
        json.dump(report, f)
    assert not mismatches, mismatches[0]
