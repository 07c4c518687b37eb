"""The exported Manager Verilog on Verilator (cocotb) against the Python model: more than
10,000 seeded random transactions, random and long back-pressure on the event stream.

CI builds a reduced Manager, the sizes of configs/manager_coverify.yaml (its Verilator build at
-O0 takes ~20 s; tests/hw/flow/test_coverify.py replays a real-trace aging run on the aging
build, and co-verifies the shipped size on its own build); the random sequences at the shipped
size run with SADDLE_MGR_FULL=1 (see hw/README.md, Manager section), without DraftLogits there: its
softmax has the full 128256-word vocabulary. The full run lowers tau, a configuration input of
the RTL, to FULL_TAU: with the shipped tau (0.3) rounds stop after a few tokens and 128 requests
never fill a 512-entry pool, so the full-pool corners would go unexercised; with 0.015 both
seeds fill both pools within FULL_TXNS transactions.
"""
import dataclasses
import json
import os
from pathlib import Path

import pytest

from common.paths import CONFIGS
from hw.flow.coverify import design_name
from hw.flow.manager_replay import IDLE_SOFTMAX
from hw.manager.manager import Manager
from sim.manager.config import ManagerConfig

BENCH = Path(__file__).with_name("cocotb_manager.py")
REDUCED = ManagerConfig.load(CONFIGS / "manager_coverify.yaml").replace(tau=26000)
SOFTMAX = IDLE_SOFTMAX
FULL_TAU = 1000            # raw UQ1.16, about 0.015
FULL_TXNS = 8000           # per seed


def _sizes(config: ManagerConfig) -> dict:
    """The integer and boolean fields (the static devices keep their defaults)."""
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)
            if isinstance(getattr(config, f.name), (int, bool))}


@pytest.mark.slow
def test_manager_on_verilator_matches_model(verilator_design):
    full = os.environ.get("SADDLE_MGR_FULL", "") not in ("", "0")
    if full:
        from hw.manager.sizes import softmax_params
        config, softmax = dataclasses.replace(ManagerConfig.load(), tau=FULL_TAU), softmax_params()
    else:
        config, softmax = REDUCED, SOFTMAX
    txns = os.environ.get("SADDLE_MGR_TXNS", str(FULL_TXNS if full else 5500))
    for seed in (21, 22):
        # 128256-logit vectors would dominate a full-size run.
        _bench(verilator_design, config, softmax, seed, txns, logits=not full)


@pytest.mark.slow
def test_pipelined_selector_on_verilator(verilator_design):
    """The reduced Manager with its Shared Pool selector pipelined every 2 tree levels (32
    entries: registers after levels 2 and 4, latency 2 cycles), one seed."""
    _bench(verilator_design, REDUCED, SOFTMAX, 23, "2000", logits=True, selector_stage_levels=2)


@pytest.mark.slow
def test_aging_manager_on_verilator_matches_model(verilator_design):
    """The Manager built with Shared Pool aging K = 1 (the build the aging co-verification of
    tests/hw/flow/test_coverify.py also uses) on a random sequence whose selections aging
    changes: the greedy model diverges from its events."""
    from hw.flow.manager_random import generate_with_events
    from sim.manager.manager import Manager as Model
    from sim.manager.transactions import ProtocolError
    config, seed, txns = REDUCED.replace(aging_passes=1), 23, 5500
    pairs, _ = generate_with_events(config, seed, txns, softmax=SOFTMAX)      # as the bench does
    greedy = Model(REDUCED, SOFTMAX)
    with pytest.raises((AssertionError, ProtocolError)):
        for txn, events in pairs:
            assert greedy.apply(txn) == events
    _bench(verilator_design, config, SOFTMAX, seed, str(txns), logits=True)


@pytest.mark.slow
def test_sram_storage_on_verilator(verilator_design):
    """The reduced Manager with both pools' token records in SRAM macros (the exported
    ``Memory`` on Verilator), one seed with DraftLogits and back-pressure."""
    _bench(verilator_design, REDUCED, SOFTMAX, 25, "2000", logits=True, storage="sram")


@pytest.mark.slow
def test_illegal_transactions_on_verilator(verilator_design):
    """Illegal transactions among 600 legal ones on the reduced Manager's Verilog (the build of
    the random test): the error count and the events as the model's ProtocolError says."""
    _bench(verilator_design, REDUCED, SOFTMAX, 24, "600", logits=False, illegal=True)


def _bench(verilator_design, config: ManagerConfig, softmax, seed: int, txns: str, *, logits: bool,
           selector_stage_levels: int = 0, illegal: bool = False, storage: str = "ff"):
    """cocotb_manager.py's random sequence ``seed`` on the Verilator build of ``config`` (its
    Shared Pool selector pipelined every ``selector_stage_levels`` levels, 0: combinational; the
    pools' ``storage``)."""
    design = verilator_design(design_name(config, softmax, selector_stage_levels, storage),
                              lambda: Manager.from_config(config, softmax, storage=storage,
                                                          selector_stage_levels=selector_stage_levels))
    design.run(BENCH, env={"SADDLE_MGR_CONFIG": json.dumps(_sizes(config)), "SADDLE_SEED": str(seed),
                           "SADDLE_MGR_SOFTMAX": json.dumps(dataclasses.asdict(softmax)),
                           "SADDLE_MGR_LOGITS": "1" if logits else "0",
                           "SADDLE_MGR_TXNS": txns,
                           "SADDLE_MGR_STALL": "0.2", "SADDLE_MGR_ILLEGAL": "1" if illegal else "0"})
