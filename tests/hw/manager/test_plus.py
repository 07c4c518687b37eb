"""SADDLE+ in the Manager RTL (the ``plus`` option): the Planner block by hand (best prefix by
cross-multiplication, the FC cost bucket, wait or not, the wait bound), the Manager on
sequences worked out by hand (the planner's wait and short pass, the tau table switching at
Admit and Retire, the locked DLM FC threshold), seeded random SADDLE+ configurations, and a
saddle-plus run of the real trace; every event equal to the model's (sim/manager/planner.py)."""
from __future__ import annotations

import pytest

from hw.flow import manager_replay
from hw.flow.amaranth_sim import run
from hw.flow.manager_random import coverage
from hw.flow.manager_stimulus import (
    PLAN_BY_HAND,
    PLAN_SMALL,
    PLUS_SEEDS,
    SMALL,
    SOFTMAX,
    TAU_BY_HAND,
    TAU_SMALL,
    plus_pairs,
    plus_run,
)
from hw.manager.manager import uses_plus
from hw.manager.planner import LATENCY, Planner
from sim.manager.manager import Manager as Model

ENTRIES, REQUESTS = 32, 8
FC, PER_REQUEST = (0, 100, 300), 50        # fc[ceil(k / 16)] + r x 50


def planner_bench(dut, entries, *, select=1, wait_bound=0, drafting=0, holding=0, gain=0, after=None):
    """Walk ``entries`` [(request, h, h_prev, last)] one per cycle after ``start``; then, LATENCY
    cycles after the last, ``after(ctx)``."""
    async def bench(ctx):
        ctx.set(dut.fc, sum(c << (22 * i) for i, c in enumerate(FC)))
        for name, value in (("per_request", PER_REQUEST), ("select", select), ("wait_bound", wait_bound),
                            ("drafting", drafting), ("holding", holding), ("gain", gain)):
            ctx.set(getattr(dut, name), value)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        for req, h, h_prev, last in entries:
            for name, value in (("valid", 1), ("req", req), ("h", h), ("h_prev", h_prev), ("last", last)):
                ctx.set(getattr(dut, name), value)
            await ctx.tick()
        ctx.set(dut.valid, 0)
        await ctx.tick().repeat(LATENCY - 1)
        await after(ctx)
    return bench


# Values (h_prev >> 8) + (last ? h >> 8 : 0) and costs: 256 (T 150), +234 + 195 = 685 (150,
# better), +256 + 78 = 1019 (200: 1019 x 150 > 685 x 200, better), +39 = 1058 (250: 1058 x 200
# < 1019 x 250, not). Best: 3 tokens of requests 0 and 1, E 1019, T 200.
WALK = [(0, 60000, 65536, 0), (0, 50000, 60000, 1), (1, 20000, 65536, 1), (2, 5000, 10000, 0)]


@pytest.mark.parametrize("select, best", [(1, 3), (0, 4)])
def test_planner_best_prefix_by_hand(select, best):
    dut = Planner(ENTRIES, REQUESTS)

    async def after(ctx):
        assert ctx.get(dut.best_k) == best

    run(dut, planner_bench(dut, WALK, select=select, after=after), name=f"planner_best_{select}")


def test_planner_cost_bucket_by_hand():
    """17 tokens of value 256 of one request: 16 cost fc[1] + 50 = 150, the 17th fc[2] + 50 = 350
    (4352 x 150 < 4096 x 350): the best prefix ends at the bucket's edge."""
    dut = Planner(ENTRIES, REQUESTS)

    async def after(ctx):
        assert ctx.get(dut.best_k) == 16

    run(dut, planner_bench(dut, [(5, 65536, 65536, 0)] * 17, after=after), name="planner_bucket")


# After WALK (best E 1019, T 200, 2 requests): requests 3 and 4 drafting, 4 holding no token
# (new = 1): T' = fc[ceil((3 + 2) / 16)] + (2 + 1) x 50 = 250. G = 300: 1019 x 250 = 254 750 <
# 1319 x 200 = 263 800, wait; G = 200: 243 800, not; nobody drafting: not.
@pytest.mark.parametrize("drafting, gain, wait", [(0b11000, 300, 1), (0b11000, 200, 0), (0, 300, 0)])
def test_planner_wait_by_hand(drafting, gain, wait):
    dut = Planner(ENTRIES, REQUESTS)

    async def after(ctx):
        assert ctx.get(dut.wait) == wait

    run(dut, planner_bench(dut, WALK, wait_bound=1, drafting=drafting, holding=0b01111, gain=gain, after=after),
        name=f"planner_wait_{gain}_{drafting}")


def test_planner_wait_bound_by_hand():
    """wait_bound 2: after two waits no more until a pass is issued; wait_bound 0: never."""
    dut = Planner(ENTRIES, REQUESTS)

    async def after(ctx):
        for waited in (1, 1):
            assert ctx.get(dut.wait) == 1
            ctx.set(dut.waited, waited)
            await ctx.tick()
            ctx.set(dut.waited, 0)
            await ctx.tick()
        assert ctx.get(dut.wait) == 0
        ctx.set(dut.issued, 1)
        await ctx.tick()
        ctx.set(dut.issued, 0)
        await ctx.tick()
        assert ctx.get(dut.wait) == 1
        ctx.set(dut.wait_bound, 0)
        await ctx.tick()
        assert ctx.get(dut.wait) == 0

    run(dut, planner_bench(dut, WALK, wait_bound=2, drafting=0b11000, holding=0b01111, gain=300, after=after),
        name="planner_wait_bound")


@pytest.mark.parametrize("config, pairs, name", [(PLAN_SMALL, PLAN_BY_HAND, "plan"), (TAU_SMALL, TAU_BY_HAND, "tau")])
def test_manager_by_hand(config, pairs, name):
    """The planner's wait (twice up to the bound of 1, the count restarting at the pass), its best
    prefix with all tokens and a short one, no wait because a drafting request with nothing
    pooled makes the next step's pass dearer; tau switching with the admitted requests at Admit and
    Retire; the locked threshold while a pass runs: the model and the RTL give the events worked
    out by hand."""
    model = Model(config)
    for txn, expected in pairs:
        assert model.apply(txn) == expected, txn
    result = manager_replay.replay(config, pairs, stall=0.3, seed=2, name=f"manager_plus_{name}")
    assert result.mismatch is None, result.mismatch


def test_planned_issue_cycle_costs():
    """An Issue through the planner: k + 8 edges as SADDLE's, plus one per waiting entry walked,
    plus 5 (the walk's end and the planner's LATENCY, its answer in the last); a wait w + 9."""
    result = manager_replay.replay(PLAN_SMALL, PLAN_BY_HAND, name="manager_plus_cycles")
    issues = [(n, k) for kind, n, k in result.cycles if kind == "VerifyIssue"]
    # (edges, tokens): 3 waiting -> wait, issue 3; 3 waiting -> wait, issue 2 of 3; locked;
    # 2 of 2; 3 of 3.
    assert issues == [(3 + 9, 0), (3 + 8 + 3 + 5, 3), (3 + 9, 0), (2 + 8 + 3 + 5, 2), (4, 0),
                      (2 + 8 + 2 + 5, 2), (3 + 8 + 3 + 5, 3)], issues


def test_plus_off_is_saddle():
    """With ``plus`` and a configuration that uses none of SADDLE+ (tau in every entry of the
    tau table, one DLM FC threshold, no planner) the RTL is SADDLE's: the directed round."""
    from hw.flow.manager_stimulus import ROUND_BY_HAND

    result = manager_replay.replay(SMALL, ROUND_BY_HAND, name="manager_plus_off", plus=True)
    assert result.mismatch is None, result.mismatch
    assert not uses_plus(SMALL) and uses_plus(PLAN_SMALL) and uses_plus(TAU_SMALL)


@pytest.mark.parametrize("seed, storage", list(zip(PLUS_SEEDS, ("ff", "sram"))))
def test_random_plus_sequences_against_model(seed, storage):
    """Seeded random SADDLE+ configurations (manager_random.plus_config) and sequences, with
    back-pressure: the planner waits and cuts passes short, tau uses several table entries,
    queries come while locked; every event as the model's."""
    config, pairs = plus_pairs(seed)
    cov = coverage(pairs)
    for corner in ("planner_wait", "planner_short_pass", "query_while_locked"):
        assert cov[corner] > 0, (corner, dict(cov))
    assert cov["tau_buckets"] >= 4
    result = manager_replay.replay(config, pairs, softmax=SOFTMAX, stall=0.3, seed=seed, long_stalls=True,
                                   name=f"manager_plus_random_{seed}", storage=storage)
    assert result.mismatch is None, result.mismatch


def test_saddle_plus_run_matches_the_rtl():
    """saddle-plus on the real trace (4 requests, the Manager of configs/manager_coverify.yaml):
    the run's pass costs, tau table and locked threshold in the RTL's configuration, every event
    equal to the model's."""
    from hw.flow.coverify import coverify

    config, pairs = plus_run()
    assert config.pass_costs is not None and config.tau_table is not None
    assert config.dlm_fc_threshold_locked is not None
    cov = coverage(pairs)
    assert cov["planner_wait"] > 0 and cov["query_while_locked"] > 0, dict(cov)
    report = coverify(config, pairs, source="test", stall=0.2, seed=3)
    assert report.ok, report.mismatch
    assert report.transactions == len(pairs) > 500
