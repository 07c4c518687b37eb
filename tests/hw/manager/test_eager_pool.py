"""Eager Pools RTL against the model's EagerPools (sim/manager/eager_pool.py), bit for bit, with
flip-flop and SRAM storage (a look of the next position in the cycle of each TAKE, as the
Manager's drain does)."""
from __future__ import annotations

import random

import pytest

from hw.flow.amaranth_sim import run
from hw.manager.eager_pool import EagerOp, EagerPools
from sim.manager.eager_pool import EagerPools as ModelPools
from sim.manager.shared_pool import PoolEntry
from sim.manager.shared_pool import SharedPool as ModelShared

POOLS, ENTRIES, REQUESTS = 3, 12, 7


async def command(ctx, dut, op, **fields):
    ctx.set(dut.op, op)
    for name, value in fields.items():
        ctx.set(getattr(dut, name), value)
    await ctx.tick()
    ctx.set(dut.op, EagerOp.NOP)


def script(seed: int, steps: int):
    rng = random.Random(seed)
    out = []
    for _ in range(steps):
        roll = rng.random()
        if roll < 0.7:
            r = rng.randrange(REQUESTS)
            out.append(("insert", r, rng.randrange(128256), rng.randrange(65537)))
        elif roll < 0.85:
            out.append(("drop", rng.randrange(REQUESTS)))
        else:
            out.append(("drain", rng.randint(0, ENTRIES)))
    return out


def replay(steps, name, stats, storage="ff"):
    dut = EagerPools(POOLS, ENTRIES, REQUESTS, storage=storage)
    model = ModelPools(POOLS, ENTRIES)
    next_pos = {r: 1 for r in range(REQUESTS)}

    def mb_of(r):
        return r % POOLS

    async def bench(ctx):
        for step in steps:
            if step[0] == "insert":
                _, r, token, h = step
                ctx.set(dut.mb, mb_of(r))
                ctx.set(dut.room_mb, mb_of(r))
                assert ctx.get(dut.room) == (model.free(mb_of(r)) > 0)
                if model.free(mb_of(r)) == 0:
                    stats["full"] += 1
                    continue
                model.insert(PoolEntry(r, mb_of(r), next_pos[r], token, h, 0))
                await command(ctx, dut, EagerOp.INSERT, mb=mb_of(r), req=r, pos=next_pos[r], token=token, h=h)
                next_pos[r] += 1
            elif step[0] == "drop":
                r = step[1]
                stats["dropped"] += len(model.take(r, mb_of(r)))
                await command(ctx, dut, EagerOp.DROP, mb=mb_of(r), req=r)
            else:
                shared = ModelShared(max(1, step[1]))
                if step[1] == 0:
                    shared.insert(PoolEntry(99, 0, 1, 0, 0, 0))       # a full Shared Pool: nothing moves
                for r, entries in model.drain_into(shared).items():
                    ctx.set(dut.req, r)
                    if storage == "sram":           # the first look: one cycle ahead
                        ctx.set(dut.pos, entries[0].position)
                        ctx.set(dut.look, 1)
                        await ctx.tick()
                    for e in entries:
                        if storage == "sram":       # TAKE the looked-up entry, look up the next
                            assert (ctx.get(dut.look_token), ctx.get(dut.look_h)) == (e.token, e.h)
                            ctx.set(dut.pos, e.position + 1)
                            await command(ctx, dut, EagerOp.TAKE, mb=mb_of(r))
                        else:
                            ctx.set(dut.pos, e.position)
                            assert ctx.get(dut.look_hit)
                            assert (ctx.get(dut.look_token), ctx.get(dut.look_h)) == (e.token, e.h)
                            await command(ctx, dut, EagerOp.TAKE, mb=mb_of(r), req=r, pos=e.position)
                        stats["moved"] += 1
                    if storage == "sram":
                        ctx.set(dut.look, 0)
            holding = ctx.get(dut.holding)
            for r in range(REQUESTS):
                ctx.set(dut.q_req, r)
                assert ctx.get(dut.q_n) == len(model.lookup(r, mb_of(r)))
                assert (holding >> r) & 1 == model.holds(r, mb_of(r))
            for k in range(POOLS):
                ctx.set(dut.mb, k)
                ctx.set(dut.room_mb, k)
                assert ctx.get(dut.room) == (model.free(k) > 0)

    run(dut, bench, name=name)


@pytest.mark.parametrize("storage", ["ff", "sram"])
def test_random_against_model(storage):
    stats = {"full": 0, "dropped": 0, "moved": 0}
    replay(script(3, 400), f"eager_pool_random_{storage}", stats, storage)
    assert min(stats.values()) > 10, stats
