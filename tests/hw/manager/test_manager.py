"""Manager top RTL against the model (sim/manager/manager.py) on the Amaranth simulator:
seeded constrained-random transaction sequences from sim/manager/random_txns.py, every event
compared bit for bit, with random back-pressure on the event stream."""
from __future__ import annotations

import random

import pytest

from hw.manager import Manager
from sim.manager.config import ManagerConfig
from sim.manager.random_txns import coverage, generate_with_events
from sim.manager.softmax import SoftmaxParams
from tests.hw.manager.amaranth_sim import run
from tests.hw.manager.txn_codec import config_ports, decode, encode, from_view

SMALL = ManagerConfig(max_requests=8, max_draft_len=8, tau=30000, shared_entries=16, eager_entries=12,
                      micro_batches=3, dlm_fc_threshold=2, tlm_attention_threshold=2)
SOFTMAX = SoftmaxParams(lanes=2, vocab=16, exp_frac_bits=12)


def small_manager(config: ManagerConfig) -> Manager:
    return Manager.from_config(config, SOFTMAX)


def replay(config, pairs, name, *, stall: float = 0.0, seed: int = 0, long_stalls: bool = False):
    """Drive every transaction, collect its beats up to DONE, compare with the model's events.
    Returns, per transaction, the clock edges from its cmd transfer to its DONE transfer, both
    included: the cycles it occupies the Manager when issued back to back."""
    dut = small_manager(config)
    rng = random.Random(seed)
    cycles = []

    async def bench(ctx):
        for port, value in config_ports(config).items():
            ctx.set(getattr(dut, port), value)
        for i, (txn, expected) in enumerate(pairs):
            ctx.set(dut.cmd.valid, 1)
            ctx.set(dut.cmd.payload, encode(txn))
            await ctx.tick().until(dut.cmd.ready)
            ctx.set(dut.cmd.valid, 0)
            beats, n = [], 1
            while True:
                hold = rng.random() < stall
                if hold and long_stalls and rng.random() < 0.05:
                    for _ in range(40):                      # back-pressure held for many cycles
                        ctx.set(dut.event.ready, 0)
                        await ctx.tick()
                        n += 1
                ctx.set(dut.event.ready, 0 if hold else 1)
                valid = ctx.get(dut.event.valid)
                payload = from_view(ctx.get(dut.event.payload)) if valid else None
                await ctx.tick()
                n += 1
                if valid and not hold:
                    beats.append(payload)
                    if payload["kind"].name == "DONE":
                        break
            got = decode(beats)
            assert got == expected, f"transaction #{i} {txn}:\n RTL   {got}\n model {expected}"
            cycles.append((type(txn).__name__, n, sum(len(getattr(e, "tokens", ())) for e in expected)))

    run(dut, bench, name=name)
    return cycles


@pytest.mark.parametrize("seed", [1, 2])
def test_random_sequences_against_model(seed):
    pairs, model = generate_with_events(SMALL, seed, 700, requests=8)
    cov = coverage(pairs)
    for corner in ("refused_shared", "refused_eager", "reject_first", "all_accepted", "moved",
                   "tie_across_requests", "not_issued_locked", "discarded_eager_after_reject"):
        assert cov[corner] > 0, (corner, cov)
    replay(SMALL, pairs, f"manager_random_{seed}", stall=0.3, seed=seed, long_stalls=True)
    model.conservation(final=True)


def test_draft_and_issue_cycle_costs():
    pairs, _ = generate_with_events(SMALL, 3, 300, requests=8)
    cycles = replay(SMALL, pairs, "manager_cycles")
    drafts = {n for kind, n, _ in cycles if kind == "DraftToken"}
    # Edges: accept, decide + pool write (DRAFTED or REFUSED out), DONE out, DONE transfer.
    assert drafts == {4}, drafts
    # Edges: accept, check, one per selected token, end of selection, ISSUED, LOCKED, MAPPING,
    # DONE out, DONE transfer: k tokens cost k + 8.
    issues = {n - k for kind, n, k in cycles if kind == "VerifyIssue" and k}
    assert issues == {8}, issues
