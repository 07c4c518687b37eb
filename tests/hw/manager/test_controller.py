"""Controller RTL against the model's Controller (sim/manager/controller.py), bit for bit,
including the logits path through the softmax unit (sim/manager/softmax.py)."""
from __future__ import annotations

import random

import pytest

from hw.flow.amaranth_sim import run, send
from hw.flow.manager_codec import logits_beats
from hw.manager.controller import Controller, CtlOp, SlotState
from sim.manager.controller import Controller as ModelController
from sim.manager.controller import RequestState
from sim.manager.formats import PROB, PROB_ONE
from sim.manager.softmax import SoftmaxParams, softmax_greedy

REQUESTS, MICRO_BATCHES = 8, 3
SOFTMAX = SoftmaxParams(lanes=4, vocab=64, exp_frac_bits=24)
STATE = {RequestState.DRAFTING: SlotState.DRAFTING, RequestState.STOPPED: SlotState.STOPPED,
         RequestState.REJECTED: SlotState.REJECTED}


def configure(ctx, dut, tau, max_len, acceptance=None):
    ctx.set(dut.tau, tau)
    ctx.set(dut.max_draft_len, max_len)
    ctx.set(dut.calibrated, int(acceptance is not None))
    ctx.set(dut.acceptance, sum(v << (PROB.bits * i) for i, v in enumerate(acceptance or ())))


async def command(ctx, dut, op, **fields):
    """One command for one cycle; a command naming a request also names it on ``pre_req``, so
    that a DRAFT of the same request may follow in the next cycle (through the forwarding)."""
    ctx.set(dut.op, op)
    if "req" in fields:
        ctx.set(dut.pre_req, fields["req"])
    for name, value in fields.items():
        ctx.set(getattr(dut, name), value)
    await ctx.tick()
    ctx.set(dut.op, CtlOp.NOP)
    ctx.set(dut.use_logits, 0)


def check_state(ctx, dut, model):
    for r, slot in model.slots.items():
        ctx.set(dut.req, r)
        assert ctx.get(dut.rd_t) == slot.t
        assert ctx.get(dut.rd_state) == STATE[slot.state]
        assert ctx.get(dut.rd_mb) == slot.microbatch
        assert ctx.get(dut.rd_next_token) == slot.next_token
    for mb in range(MICRO_BATCHES):
        ctx.set(dut.q_mb, mb)
        mask = sum(1 << r for r, s in model.slots.items()
                   if s.microbatch == mb and s.state is RequestState.DRAFTING)
        assert ctx.get(dut.drafting) == mask
        assert bin(mask).count("1") == model.drafting(mb)


# The calibrated stop rule's acceptance table: every entry different, 1.0 (65536) in the last.
TABLE = (0, 3000, 7000, 11000, 15000, 19000, 23000, 27000, 31000, 35000, 39000, 43000, 47000,
         52000, 60000, 65536)


@pytest.mark.parametrize("acceptance", [None, TABLE], ids=["threshold", "calibrated"])
def test_random_decisions_against_model(acceptance):
    rng = random.Random(9)
    tau, max_len = 30000, 5
    model = ModelController(REQUESTS, max_len, tau, acceptance)
    dut = Controller(REQUESTS, SOFTMAX)
    stats = {"stop_tau": 0, "stop_len": 0, "continue": 0, "prefetch": 0, "back_to_back": 0}

    async def bench(ctx):
        configure(ctx, dut, tau, max_len, acceptance)
        for _ in range(600):
            r = rng.randrange(REQUESTS)
            slot = model.slots.get(r)
            if slot is None:
                mb = rng.randrange(MICRO_BATCHES)
                model.admit(r, mb)
                await command(ctx, dut, CtlOp.ADMIT, req=r, mb=mb)
            elif slot.state is RequestState.DRAFTING:
                p = rng.choice((PROB_ONE, rng.randint(50000, PROB_ONE), rng.randint(0, PROB_ONE)))
                if ctx.get(dut.pre_req) == r and rng.random() < 0.5:
                    p = ctx.get(dut.pre_prob)      # the probability given a cycle ahead
                h_before = slot.h
                stop = model.advance(slot, p)
                if ctx.get(dut.pre_req) != r or ctx.get(dut.pre_prob) != p:
                    # H and the multiplier's operand are read a cycle ahead: one idle cycle
                    ctx.set(dut.pre_req, r)
                    ctx.set(dut.pre_prob, p)
                    await ctx.tick()
                    stats["prefetch"] += 1
                else:
                    stats["back_to_back"] += 1
                ctx.set(dut.op, CtlOp.DRAFT)
                ctx.set(dut.req, r)
                ctx.set(dut.prob, p)
                assert (ctx.get(dut.h_new), ctx.get(dut.t_new), ctx.get(dut.stop)) == (slot.h, slot.t, stop)
                factor = p if acceptance is None else acceptance[min(p >> 12, 15)]
                assert ctx.get(dut.h_new) == (h_before * factor) >> 16
                stats["continue" if not stop else "stop_tau" if slot.h < tau else "stop_len"] += 1
                await command(ctx, dut, CtlOp.DRAFT)
            elif rng.random() < 0.1:
                model.retire(r)
                await command(ctx, dut, CtlOp.RETIRE, req=r)
            else:
                reject, token = rng.random() < 0.5, rng.randrange(128256)
                slot.next_token = token
                if reject:
                    slot.state = RequestState.REJECTED
                await command(ctx, dut, CtlOp.RESULT, req=r, token=token, reject=reject)
                check_state(ctx, dut, model)
                slot.new_round()
                await command(ctx, dut, CtlOp.NEW_ROUND, req=r)
            check_state(ctx, dut, model)

    run(dut, bench, name="controller_random")
    assert min(stats.values()) > 20, stats


def test_logits_path_through_softmax():
    rng = random.Random(10)
    tau, max_len = 1000, 63
    dut = Controller(REQUESTS, SOFTMAX)
    vectors = [[rng.randint(-2000, 2000) for _ in range(rng.randint(1, SOFTMAX.vocab))] for _ in range(12)]

    async def feeder(ctx):
        for v in vectors:
            for beat in logits_beats(v, SOFTMAX.lanes):
                await send(ctx, dut.logits, beat)

    async def bench(ctx):
        configure(ctx, dut, tau, max_len)
        await command(ctx, dut, CtlOp.ADMIT, req=3, mb=1)
        h = PROB_ONE
        for v in vectors:
            token, p = softmax_greedy(v, SOFTMAX)
            ctx.set(dut.op, CtlOp.DRAFT)
            ctx.set(dut.req, 3)
            ctx.set(dut.pre_req, 3)
            ctx.set(dut.use_logits, 1)
            while not ctx.get(dut.op_ready):           # the op waits for the softmax
                await ctx.tick()
            h = (h * p) >> 16
            assert (ctx.get(dut.sampled_token), ctx.get(dut.sampled_prob), ctx.get(dut.h_new)) == (token, p, h)
            await command(ctx, dut, CtlOp.DRAFT)
            if ctx.get(dut.rd_state) != SlotState.DRAFTING:
                await command(ctx, dut, CtlOp.NEW_ROUND, req=3)
                h = PROB_ONE

    run(dut, feeder, bench, name="controller_logits")
