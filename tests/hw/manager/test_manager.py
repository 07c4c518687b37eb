"""Manager top RTL against the model (sim/manager/manager.py) on the Amaranth simulator:
seeded constrained-random transaction sequences from hw/flow/manager_random.py, every event
compared bit for bit, with random back-pressure on the event stream."""
from __future__ import annotations

import pytest

from hw.flow import manager_replay
from hw.flow.manager_random import coverage, generate_with_events
from hw.flow.manager_stimulus import (
    RANDOM_LENGTH,
    RANDOM_SEEDS,
    ROUND_BY_HAND,
    SMALL,
    SOFTMAX,
    corner_pairs,
    random_pairs,
)
from hw.manager.manager import Manager as HwManager
from sim.manager.manager import Manager as Model
from sim.manager.transactions import (
    Device,
    Drafted,
    DraftLogits,
    Mapping,
    Moved,
    Op,
    Pool,
    ProtocolError,
    Retire,
)


def replay(config, pairs, name, *, stall: float = 0.0, seed: int = 0, long_stalls: bool = False,
           selector_stage_levels: int | None = None, storage: str | None = None):
    """Every transaction on the RTL, compared with the model's events; per transaction, the
    clock edges it occupies the Manager when issued back to back (see hw/flow/manager_replay.py)."""
    result = manager_replay.replay(config, pairs, softmax=SOFTMAX, stall=stall, seed=seed,
                                   long_stalls=long_stalls, name=name, selector_stage_levels=selector_stage_levels,
                                   storage=storage)
    assert result.mismatch is None, result.mismatch
    return result.cycles


@pytest.mark.parametrize("seed", RANDOM_SEEDS)
def test_random_sequences_against_model(seed):
    pairs, model = random_pairs(seed)
    assert sum(isinstance(txn, DraftLogits) for txn, _ in pairs) > 20
    cov = coverage(pairs)
    for corner in ("refused_shared", "refused_eager", "reject_first", "all_accepted", "moved",
                   "tie_across_requests", "not_issued_locked", "discarded_eager_after_reject"):
        assert cov[corner] > 0, (corner, cov)
    replay(SMALL, pairs, f"manager_random_{seed}", stall=0.3, seed=seed, long_stalls=True)
    model.conservation(final=True)


@pytest.mark.parametrize("stage_levels", [0, 1])
def test_draft_and_issue_cycle_costs(stage_levels):
    """The same costs with the combinational selector and with one pipelined to the largest
    latency the Manager takes (16 entries, registers after every level: 3 cycles)."""
    pairs, _ = generate_with_events(SMALL, 3, 300, requests=8)
    cycles = replay(SMALL, pairs, f"manager_cycles_k{stage_levels}", selector_stage_levels=stage_levels)
    drafts = {n for kind, n, _ in cycles if kind == "DraftToken"}
    # Edges: accept, decide + pool write (DRAFTED or REFUSED out), DONE out, DONE transfer.
    assert drafts == {4}, drafts
    # Edges: accept, check, one per selected token, end of selection, ISSUED, LOCKED, MAPPING,
    # DONE out, DONE transfer: k tokens cost k + 8.
    issues = {n - k for kind, n, k in cycles if kind == "VerifyIssue" and k}
    assert issues == {8}, issues


def test_pipelined_selector_against_model():
    """Random sequences with back-pressure on a Manager whose selector has registers after every
    tree level (16 entries: latency 3, the most the Manager takes), then after level 2 (latency 1)."""
    for seed, stage_levels in ((RANDOM_SEEDS[0], 1), (RANDOM_SEEDS[1], 2)):
        pairs, _ = random_pairs(seed)
        replay(SMALL, pairs, f"manager_random_k{stage_levels}", stall=0.3, seed=seed, long_stalls=True,
               selector_stage_levels=stage_levels)


def test_sram_storage_against_model():
    """Both pools' token records in SRAM macros: random sequences with back-pressure (40-cycle
    stalls hold an ISSUED_TOKEN beat whose token is the macro's read data), the pipelined
    selector, and the directed corners."""
    for seed, stage_levels in ((RANDOM_SEEDS[0], 0), (RANDOM_SEEDS[1], 2)):
        pairs, _ = random_pairs(seed)
        replay(SMALL, pairs, f"manager_random_sram_k{stage_levels}", stall=0.3, seed=seed, long_stalls=True,
               selector_stage_levels=stage_levels, storage="sram")
    replay(SMALL, corner_pairs(), "manager_corners_sram", storage="sram")


def test_sram_storage_cycle_costs():
    """SRAM storage: a DraftToken 4 and an Issue k + 8 as with flip-flops; an Unlock or Retire
    one cycle more per request whose eager tokens it moves (the first look-up)."""
    pairs, _ = generate_with_events(SMALL, 3, 300, requests=8)
    ff = replay(SMALL, pairs, "manager_cycles_ff", storage="ff")
    sram = replay(SMALL, pairs, "manager_cycles_sram", storage="sram")
    moving = [(a, b, sum(isinstance(e, Moved) for e in expected))
              for (a, b, (_, expected)) in zip(ff, sram, pairs)]
    assert all(a[0] == b[0] for a, b, _ in moving)
    assert all(b[1] - a[1] == n for a, b, n in moving), [(a, b, n) for a, b, n in moving if b[1] - a[1] != n]
    assert sum(n for *_, n in moving) > 5


def test_selector_latency_beyond_the_issue_gap_is_refused():
    with pytest.raises(ValueError, match="latency 4 > 3"):
        HwManager.from_config(SMALL.replace(shared_entries=32), SOFTMAX, selector_stage_levels=1)


def test_directed_round_by_hand():
    """Empty, a tie within a request, Issue while locked, eager drafting, a reject at the first
    token, everything accepted, the eager move, the new round and retirement; every event
    worked out by hand (`ROUND_BY_HAND`), and the model and the RTL must both produce exactly
    these."""
    model = Model(SMALL)
    for txn, expected in ROUND_BY_HAND:
        assert model.apply(txn) == expected, txn
    replay(SMALL, ROUND_BY_HAND, "manager_directed", stall=0.5, seed=4)


def test_directed_corners():
    """The corners the random and real-trace stimulus miss (hw/README.md, coverage): H exactly
    at tau does not stop, the length alone stops, both Scheduler thresholds decide GPU at
    equality, both flip each way, a retirement during a verification leaves the Eager Pools
    alone, a full Shared Pool refuses and the retry is taken."""
    pairs = corner_pairs()
    events = [e for _, evs in pairs for e in evs]
    assert Drafted(0, 1, Pool.SHARED, SMALL.tau, False) in events
    assert Drafted(3, SMALL.max_draft_len, Pool.SHARED, 65536, True) in events
    assert Mapping(Op.DLM_FC, Device.GPU, SMALL.dlm_fc_threshold, 1, 0) in events
    assert Mapping(Op.TLM_ATTENTION, Device.GPU, 2 * SMALL.tlm_attention_threshold, 2, -1) in events
    retire = next(i for i, (txn, _) in enumerate(pairs) if isinstance(txn, Retire))
    assert not any(isinstance(e, Moved) for e in pairs[retire][1])
    cov = coverage(pairs)
    for corner in ("refused_shared", "refusal_released", "reject_later", "unlock_nothing_pooled",
                   "retire_during_pass", "flip_dlm_fc_to_gpu", "flip_dlm_fc_to_pim", "flip_tlm_attention_to_gpu",
                   "flip_tlm_attention_to_pim"):
        assert cov[corner] > 0, (corner, cov)
    replay(SMALL, pairs, "manager_corners", stall=0.3, seed=5)


@pytest.mark.parametrize("aging", (1, 3))
def test_aging_random_sequences_against_model(aging):
    """The Manager built with Shared Pool aging K (the end-of-selection cycle ages the pool, so
    an Issue still costs k + 8) against the model with the same K, on a random sequence whose
    selections aging changes: the same transactions on the greedy model diverge."""
    config = SMALL.replace(aging_passes=aging)
    pairs, model = generate_with_events(config, 10 + aging, RANDOM_LENGTH, requests=SMALL.max_requests,
                                        softmax=SOFTMAX)
    greedy = Model(SMALL, SOFTMAX)
    with pytest.raises((AssertionError, ProtocolError)):
        for txn, events in pairs:
            assert greedy.apply(txn) == events
    cycles = replay(config, pairs, f"manager_aging_{aging}")
    assert {n - k for kind, n, k in cycles if kind == "VerifyIssue" and k} == {8}
    model.conservation(final=True)


def test_calibrated_stop_rule_against_model():
    """The calibrated stop rule (an acceptance table in the Controller's multiplier, configured
    through the Manager's ports) on a random sequence: every event as the model's."""
    from tests.hw.manager.test_controller import TABLE

    config = SMALL.replace(acceptance_table=TABLE)
    pairs, model = generate_with_events(config, RANDOM_SEEDS[0], 400, requests=config.max_requests,
                                        softmax=SOFTMAX)
    plain, _ = generate_with_events(SMALL, RANDOM_SEEDS[0], 400, requests=SMALL.max_requests,
                                    softmax=SOFTMAX)
    assert [e for _, e in pairs] != [e for _, e in plain]      # the table changes the decisions
    replay(config, pairs, "manager_calibrated", stall=0.3, seed=1)
    model.conservation(final=True)


def test_illegal_transactions_flagged():
    """Illegal transactions mixed into a random sequence: the model raises ProtocolError for
    each, the RTL answers it with the DONE beat alone, counts it on `errors`, shows its kind on
    `error_kind` (checked by the replay) and changes no state (every later legal transaction still matches the model); every kind of
    check of `ILLEGAL_CHECKS` is met."""
    from hw.flow.manager_stimulus import illegal_pairs

    pairs = illegal_pairs(3)
    illegal = [txn for txn, expected in pairs if isinstance(expected, ProtocolError)]
    kinds = {type(txn).__name__ for txn in illegal}
    assert len(illegal) > 40 and kinds >= {"Admit", "DraftToken", "VerifyIssue", "VerifyResult", "Unlock",
                                           "SchedulerQuery", "EndRound", "Retire"}, kinds
    messages = " ".join(str(e) for _, e in pairs if isinstance(e, ProtocolError))
    for what in ("already admitted", "expects round position", "not drafting", "prob", "capacity",
                 "no token in the current verification", "accepted", "not locked", "no draft token"):
        assert what in messages, what
    result = manager_replay.replay(SMALL, pairs, name="manager_illegal")
    assert result.mismatch is None, result.mismatch
    assert result.illegal == len(illegal)
    # Edges: accept (checked there), DONE out, DONE transfer.
    assert {n for (_, n, _), (_, e) in zip(result.cycles, pairs) if isinstance(e, ProtocolError)} == {3}


def test_acceptance_table_through_its_register_port():
    """The table written entry by entry through `acceptance_write` after reset: a write
    reaches the next decision, and an unwritten entry stays 0 (reset)."""
    from hw.flow.amaranth_sim import run
    from hw.flow.manager_codec import encode
    from hw.manager.manager import EventKind
    from sim.manager.transactions import Admit, DraftToken

    dut = HwManager.from_config(SMALL, SOFTMAX)

    async def draft(ctx, txn):
        ctx.set(dut.cmd.valid, 1)
        ctx.set(dut.cmd.payload, encode(txn))
        await ctx.tick().until(dut.cmd.ready)
        ctx.set(dut.cmd.valid, 0)
        ctx.set(dut.event.ready, 1)
        beats = []
        while not beats or beats[-1][0] is not EventKind.DONE:
            await ctx.tick()
            if ctx.get(dut.event.valid):
                beats.append((ctx.get(dut.event.payload.kind), ctx.get(dut.event.payload.h)))
        return beats

    async def bench(ctx):
        ctx.set(dut.tau, 0)
        ctx.set(dut.max_draft_len, 8)
        ctx.set(dut.calibrated, 1)
        ctx.set(dut.acceptance_write.en, 1)
        ctx.set(dut.acceptance_write.addr, 8)
        ctx.set(dut.acceptance_write.data, 40000)
        await ctx.tick()
        ctx.set(dut.acceptance_write.en, 0)
        await draft(ctx, Admit(0, 0))
        # p = 0.5: bin 8 -> H = 40000; then p = 0.25: bin 4, never written -> H = 0.
        assert (EventKind.DRAFTED, 40000) in await draft(ctx, DraftToken(0, 0, 1, 5, 1 << 15))
        assert (EventKind.DRAFTED, 0) in await draft(ctx, DraftToken(0, 0, 2, 5, 1 << 14))
        assert ctx.get(dut.errors) == 0

    run(dut, bench, name="manager_acceptance_write")
