"""Shared Pool RTL against the model's SharedPool (sim/manager/shared_pool.py), bit for bit."""
from __future__ import annotations

import random

import pytest

from hw.flow.amaranth_sim import run
from hw.manager.shared_pool import PoolOp, SharedPool, tree_stages
from sim.manager.formats import PROB_ONE
from sim.manager.shared_pool import PoolEntry
from sim.manager.shared_pool import SharedPool as ModelPool

ENTRIES, REQUESTS = 16, 6


def entry_of(ctx, dut) -> tuple:
    return (ctx.get(dut.best_req), ctx.get(dut.best_pos), ctx.get(dut.best_token),
            ctx.get(dut.best_h), ctx.get(dut.best_mb))


def key_of(ctx, dut) -> tuple:
    """The winner's fields the selector's key carries (the SRAM storage has no ``best_token``)."""
    return ctx.get(dut.best_req), ctx.get(dut.best_pos), ctx.get(dut.best_h)


async def command(ctx, dut, op, **fields):
    ctx.set(dut.op, op)
    for name, value in fields.items():
        ctx.set(getattr(dut, name), value)
    await ctx.tick()
    ctx.set(dut.op, PoolOp.NOP)


async def check_counts(ctx, dut, model):
    assert ctx.get(dut.count) == model.count
    assert ctx.get(dut.fly_count) == model.count - model.waiting_count
    for r in range(REQUESTS):
        ctx.set(dut.q_req, r)
        assert ctx.get(dut.q_wait) == len(model.lookup(r)), r
        assert ctx.get(dut.q_fly) == len(model.in_flight(r)), r


def random_session(seed: int, rounds: int, ties: bool, entries: int = ENTRIES):
    """Inserts (positions ascending, H non-increasing per request), one selection of up to n,
    then a release of every request with or without its waiting entries; repeated."""
    rng = random.Random(seed)
    script = []
    state = {r: (0, PROB_ONE) for r in range(REQUESTS)}   # last position, last H
    for _ in range(rounds):
        for _ in range(rng.randint(0, entries + 4)):      # may overfill: replay skips when full
            r = rng.randrange(REQUESTS)
            pos, h = state[r]
            if pos == 63:
                continue
            h = h if ties and rng.random() < 0.5 else (h * rng.choice((PROB_ONE, 60000, 40000, 1))) >> 16
            state[r] = (pos + 1, h)
            script.append(("insert", PoolEntry(r, r % 3, pos + 1, rng.randrange(128256), h, 0)))
        script.append(("select", rng.randint(1, entries)))
        for r in range(REQUESTS):
            drop_wait = rng.random() < 0.3
            script.append(("release", r, drop_wait))
            if drop_wait:
                state[r] = (0, PROB_ONE)
        script.append(("unlock",))
    return script


def replay(script, name, aging: int | None = None, stage_levels: int = 0, entries: int = ENTRIES,
           fault: str | None = None, storage: str = "ff"):
    """The script on the RTL and the model; a selection starts ``dut.latency`` cycles after the
    last insert or clear (the pipelined selector's latency), then selects one entry per cycle.
    With SRAM storage the selected entry's token and micro-batch are checked on ``sel_*`` in the
    cycle after its SELECT, and again one cycle later (held)."""
    dut = SharedPool(entries, REQUESTS, aging, stage_levels=stage_levels, fault=fault, storage=storage)
    model = ModelPool(entries, aging)
    stats = {"selected": 0, "orders": []}

    async def bench(ctx):
        for step in script:
            if step[0] == "insert":
                e = step[1]
                if model.count == entries:
                    continue
                model.insert(e)
                await command(ctx, dut, PoolOp.INSERT, req=e.request, mb=e.microbatch, pos=e.position,
                              token=e.token, h=e.h)
            elif step[0] == "select":
                chosen = model.select(step[1])
                if dut.latency:
                    await ctx.tick().repeat(dut.latency)
                for e in chosen:
                    assert ctx.get(dut.best_valid)
                    if storage == "ff":
                        assert entry_of(ctx, dut) == (e.request, e.position, e.token, e.h, e.microbatch)
                        await command(ctx, dut, PoolOp.SELECT)
                    else:
                        assert key_of(ctx, dut) == (e.request, e.position, e.h)
                        await command(ctx, dut, PoolOp.SELECT)
                        assert (ctx.get(dut.sel_token), ctx.get(dut.sel_mb)) == (e.token, e.microbatch)
                if chosen and storage == "sram":
                    await ctx.tick()        # held while no SELECT follows
                    assert (ctx.get(dut.sel_token), ctx.get(dut.sel_mb)) == (chosen[-1].token, chosen[-1].microbatch)
                if aging is not None:       # the Manager's end-of-selection cycle
                    await command(ctx, dut, PoolOp.NOP, pass_end=1)
                    ctx.set(dut.pass_end, 0)
                else:                       # the same cycle: the last SELECT's counts
                    await command(ctx, dut, PoolOp.NOP)
                stats["selected"] += len(chosen)
                stats["orders"].append([(e.request, e.position) for e in chosen])
                if len(chosen) < step[1]:
                    assert not ctx.get(dut.best_valid)
            elif step[0] == "release":
                _, r, drop_wait = step
                model.release(r)
                if drop_wait:
                    model.invalidate(r)
                await command(ctx, dut, PoolOp.CLEAR, req=r, clear_fly=1, clear_wait=int(drop_wait))
            else:
                model.unlock()
            await check_counts(ctx, dut, model)

    run(dut, bench, name=name)
    return stats


@pytest.mark.parametrize("storage", ["ff", "sram"])
def test_random_against_model(storage):
    stats = replay(random_session(1, 25, ties=False), f"shared_pool_random_{storage}", storage=storage)
    assert stats["selected"] > 50


def test_sram_storage_with_aging_and_pipelined_selector():
    stats = replay(random_session(4, 20, ties=True), "shared_pool_sram_k1", aging=2, stage_levels=1,
                   storage="sram")
    assert stats["selected"] > 50


def test_ties_across_and_within_requests():
    stats = replay(random_session(2, 25, ties=True), "shared_pool_ties")
    assert stats["selected"] > 50


@pytest.mark.parametrize("entries, stage_levels, latency", [(16, 1, 3), (16, 2, 1), (13, 1, 3), (13, 3, 1)])
def test_pipelined_selector_against_model(entries, stage_levels, latency):
    """Registers after every level (16 entries: lists of 4, 3 and 2 kept) and after two; 13
    entries: odd nodes moving up past registers. Ties make equal H common."""
    assert len(tree_stages(entries, stage_levels)) == latency
    stats = replay(random_session(3, 20, ties=True, entries=entries), f"shared_pool_k{stage_levels}_{entries}",
                   stage_levels=stage_levels, entries=entries)
    assert stats["selected"] > 50


def test_pipelined_selector_with_aging():
    """Aging changes keys at pass_end, which the registers see like an insert: the same order
    as the model with aging K = 3, registers after every level."""
    assert replay(random_session(4, 25, ties=False), "shared_pool_aging_k3_pipelined", aging=3,
                  stage_levels=1)["selected"] > 50


@pytest.mark.parametrize("stage_levels", [1, 2])
def test_pipelined_latency(stage_levels):
    """An insert reaches best_* exactly ``latency`` cycles later (a better entry into a pool
    whose best is known), and a CLEAR likewise."""
    dut = SharedPool(ENTRIES, REQUESTS, stage_levels=stage_levels)
    low, high = (1, 5, 40000), (2, 9, 50000)   # (request, token, H)

    async def bench(ctx):
        await command(ctx, dut, PoolOp.INSERT, req=low[0], pos=1, token=low[1], h=low[2])
        await ctx.tick().repeat(dut.latency)
        assert ctx.get(dut.best_token) == low[1]
        await command(ctx, dut, PoolOp.INSERT, req=high[0], pos=1, token=high[1], h=high[2])
        for _ in range(dut.latency):
            assert ctx.get(dut.best_token) == low[1]
            await ctx.tick()
        assert ctx.get(dut.best_token) == high[1]
        await command(ctx, dut, PoolOp.CLEAR, req=high[0], clear_fly=1, clear_wait=1)
        for _ in range(dut.latency):
            assert ctx.get(dut.best_token) == high[1]
            await ctx.tick()
        assert ctx.get(dut.best_token) == low[1]

    run(dut, bench, name=f"shared_pool_latency_k{stage_levels}")


def test_full_empty_and_order_by_hand():
    # A tie at H = 50000 within request 1 and across requests 1 and 2, then request 0.
    script = [("insert", PoolEntry(2, 0, 1, 7, 50000, 0)), ("insert", PoolEntry(0, 1, 1, 8, 40000, 0)),
              ("insert", PoolEntry(1, 1, 1, 9, 50000, 0)), ("insert", PoolEntry(1, 1, 2, 10, 50000, 0))]
    script += [("insert", PoolEntry(3, 0, p, p, 100, 0)) for p in range(1, ENTRIES - 3)]
    script += [("insert", PoolEntry(4, 0, 1, 1, 65536, 0))]        # pool full: skipped by replay
    script += [("select", 3), ("release", 1, False), ("release", 2, False), ("unlock",),
               ("select", ENTRIES), ("release", 0, True), ("release", 3, True), ("unlock",),
               ("select", 1), ("unlock",)]                           # empty pool: nothing selected
    replay(script, "shared_pool_directed")


def test_aging_random_against_model():
    """Aged orders differ from the greedy ones on this stimulus, and the RTL follows the model."""
    script = random_session(3, 25, ties=True)
    aged = replay(script, "shared_pool_aging_k1", aging=1)
    assert aged["selected"] > 50
    assert aged["orders"] != replay(script, "shared_pool_greedy_k1")["orders"]
    assert replay(random_session(4, 25, ties=False), "shared_pool_aging_k3", aging=3)["selected"] > 50


def test_aging_directed_by_hand():
    """tests/sim/manager/test_aging.py's starving request on the RTL: request 0's confident
    tokens, request 1's unlikely one; with K = 2 request 1 goes in the third pass, a token of
    a request served in a pass restarts its count, and K = 1 alternates."""
    def script(n):
        steps = [("insert", PoolEntry(0, 0, p, p, h, 0)) for p, h in
                 enumerate((60000, 50000, 40000, 30000), 1)]
        steps.append(("insert", PoolEntry(1, 1, 1, 9, 20000, 0)))
        for _ in range(n):
            steps += [("select", 1)] + [("release", r, False) for r in range(REQUESTS)] + [("unlock",)]
        return steps

    assert replay(script(5), "shared_pool_aging_k2_hand", aging=2)["orders"] == \
        [[(0, 1)], [(0, 2)], [(1, 1)], [(0, 3)], [(0, 4)]]
    assert replay(script(5), "shared_pool_aging_k1_hand", aging=1)["orders"] == \
        [[(0, 1)], [(1, 1)], [(0, 2)], [(0, 3)], [(0, 4)]]
    assert replay(script(5), "shared_pool_greedy_hand")["orders"] == \
        [[(0, 1)], [(0, 2)], [(0, 3)], [(0, 4)], [(1, 1)]]


@pytest.mark.parametrize("fault", ["aging_served_not_reset", "aging_write_keeps_age"])
def test_aging_faults_are_caught(fault):
    """The aging mutants of `saddle hw mutate` fail this file's own aging stimulus: a served
    request's tokens that keep ageing reach K early and jump the queue (the starving request by
    hand, K = 2); a new token that inherits the previous occupant's age does so on the random
    session with K = 1, where every entry is reused."""
    hand = [("insert", PoolEntry(0, 0, p, p, h, 0)) for p, h in enumerate((60000, 50000, 40000, 30000), 1)]
    hand.append(("insert", PoolEntry(1, 1, 1, 9, 20000, 0)))
    for _ in range(5):
        hand += [("select", 1)] + [("release", r, False) for r in range(REQUESTS)] + [("unlock",)]
    script, aging = (hand, 2) if fault == "aging_served_not_reset" else (random_session(3, 25, ties=True), 1)
    assert replay(script, f"shared_pool_{fault}_clean", aging=aging)["selected"]
    with pytest.raises(AssertionError):
        replay(script, f"shared_pool_{fault}", aging=aging, fault=fault)


@pytest.mark.parametrize("follow", ["clear_wait", "clear_fly", "clear_both", "insert"])
def test_command_right_after_a_select_of_the_same_request(follow):
    """A SELECT's counts are applied a cycle late; a CLEAR or an INSERT of the same request in
    the very next cycle must still leave the model's counts (the CLEAR drops the pending token
    from the in-flight side)."""
    dut = SharedPool(ENTRIES, REQUESTS)
    model = ModelPool(ENTRIES, None)
    entries = [PoolEntry(0, 0, p, p, 60000 - p, 0) for p in range(1, 4)] + [PoolEntry(1, 0, 1, 9, 100, 0)]

    async def bench(ctx):
        for e in entries:
            model.insert(e)
            await command(ctx, dut, PoolOp.INSERT, req=e.request, mb=e.microbatch, pos=e.position,
                          token=e.token, h=e.h)
        model.select(2)                     # two SELECTs of request 0 back to back
        for _ in range(2):
            await command(ctx, dut, PoolOp.SELECT)
        if follow == "insert":      # (the model refuses an insert while tokens are in flight)
            await command(ctx, dut, PoolOp.INSERT, req=0, mb=0, pos=4, token=4, h=100)
            ctx.set(dut.q_req, 0)
            assert (ctx.get(dut.count), ctx.get(dut.fly_count), ctx.get(dut.q_wait), ctx.get(dut.q_fly)) == \
                (5, 2, 2, 2)
            return
        else:
            if follow != "clear_wait":
                model.release(0)
            if follow != "clear_fly":
                model.invalidate(0)
            await command(ctx, dut, PoolOp.CLEAR, req=0, clear_fly=int(follow != "clear_wait"),
                          clear_wait=int(follow != "clear_fly"))
        await check_counts(ctx, dut, model)

    run(dut, bench, name=f"shared_pool_after_select_{follow}")
