"""Scheduler RTL against the model's Scheduler (sim/manager/scheduler.py), bit for bit."""
from __future__ import annotations

import random

from hw.flow.amaranth_sim import run
from hw.manager.scheduler import Scheduler
from sim.manager.scheduler import Scheduler as ModelScheduler
from sim.manager.scheduler import dlm_fc_estimate
from sim.manager.transactions import Device

REQUESTS, QUERIES = 128, 512


def test_random_and_boundaries_against_model():
    rng = random.Random(4)
    dut = Scheduler(REQUESTS, QUERIES)
    cases = []
    for _ in range(300):
        cases.append((rng.random() < 0.8, rng.randint(0, 140), rng.randint(0, 70), rng.random() < 0.5,
                      rng.random() < 0.5, rng.getrandbits(REQUESTS), rng.randint(0, QUERIES),
                      rng.randint(1, REQUESTS)))
    # Exactly at each threshold (GPU) and one below (PIM); the all-drafting and none cases.
    cases += [(True, 64, 10, False, False, (1 << 64) - 1, 40, 4), (True, 65, 11, False, False, (1 << 64) - 1, 43, 4),
              (True, 128, 0, True, True, (1 << 128) - 1, 0, 1), (True, 0, 65535, False, True, 0, 512, 128)]

    async def bench(ctx):
        for dynamic, fc_thr, att_thr, fc_gpu, att_gpu, mask, queries, reqs in cases:
            model = ModelScheduler(dynamic, fc_thr, att_thr, Device.GPU if fc_gpu else Device.PIM,
                                   Device.GPU if att_gpu else Device.PIM)
            for name, value in (("dynamic", dynamic), ("dlm_fc_threshold", fc_thr),
                                ("tlm_attention_threshold", att_thr), ("static_dlm_fc_gpu", fc_gpu),
                                ("static_tlm_attention_gpu", att_gpu), ("drafting", mask),
                                ("queries", queries), ("query_requests", reqs)):
                ctx.set(getattr(dut, name), value)
            b = bin(mask).count("1")
            assert ctx.get(dut.drafting_count) == b
            assert ctx.get(dut.dlm_fc_gpu) == (model.dlm_fc(*dlm_fc_estimate(b)) is Device.GPU)
            assert ctx.get(dut.tlm_attention_gpu) == (model.tlm_attention(queries, reqs) is Device.GPU)
            await ctx.delay(1e-9)

    run(dut, bench, name="scheduler_random", clock=False)
