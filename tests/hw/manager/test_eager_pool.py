"""Eager Pools RTL against the model's EagerPools (sim/manager/eager_pool.py), bit for bit."""
from __future__ import annotations

import random

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


def replay(steps, name, stats):
    dut = EagerPools(POOLS, ENTRIES, REQUESTS)
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
                    for e in entries:
                        ctx.set(dut.req, r)
                        ctx.set(dut.pos, e.position)
                        assert ctx.get(dut.look_hit)
                        assert (ctx.get(dut.look_token), ctx.get(dut.look_h)) == (e.token, e.h)
                        await command(ctx, dut, EagerOp.TAKE, mb=mb_of(r), req=r, pos=e.position)
                        stats["moved"] += 1
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


def test_random_against_model():
    stats = {"full": 0, "dropped": 0, "moved": 0}
    replay(script(3, 400), "eager_pool_random", stats)
    assert min(stats.values()) > 10, stats
