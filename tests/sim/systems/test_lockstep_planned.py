"""The lock-step run's pass-wise paths against the per-request and per-step ones they replace:
a request's planned rounds (``planned_rounds``) against drafting and committing round by round
(``BaseRun.commit``, the trace's ``leading_accepted``), ``DeviceSet.run_series`` against a
``run_alone`` per step, and autoregressive passes priced together (``price_round``) against
one ``price`` per pass."""
from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pytest

from sim.cost.system import clear_caches
from sim.engine.costs import CostAdapter
from sim.engine.devices import DeviceSet, IntervalLog, Work
from sim.engine.events import EventQueue
from sim.metrics import TokenCounts
from sim.systems.base import REJECTED_PREFIX, BaseRun
from sim.systems.lockstep import LockstepRun, planned_rounds
from sim.systems.registry import STOP_RULES
from traces.format import RequestTrace


def random_trace(rng, n: int) -> RequestTrace:
    accepted = rng.random(n) < rng.uniform(0.3, 0.95)
    p = rng.uniform(0.05, 1.0, n)
    return RequestTrace("r", "open_qa", int(rng.integers(1, 50)), p, accepted,
                        [rng.uniform(0.05, 1.0, 2) for _ in range(int((~accepted).sum()))])


def round_by_round(rule, trace: RequestTrace):
    """The rounds and token counts of one request drafted and committed one round at a time,
    as the per-request loop did: (cap, first context, verification request, tokens
    committed), first round first."""
    run = SimpleNamespace(tokens=TokenCounts(), release=lambda live: None)
    live = SimpleNamespace(t=0, out_len=trace.output_len)
    rounds = []
    done = False
    while not done:
        t = live.t
        cap = rule.planned(trace, t, live.out_len - t) if rule is not None else 0
        accepted = trace.leading_accepted(t, cap) if cap else 0
        run.tokens.drafted += cap
        if accepted < cap - 1:
            run.tokens.discard(REJECTED_PREFIX, cap - accepted - 1)
        done = BaseRun.commit(run, live, cap, accepted)
        context = trace.prompt_len + t
        rounds.append((cap, context, (context + cap, cap + 1), live.t - t))
    return rounds, run.tokens


def as_rounds(plan) -> list[tuple]:
    return [(*r, c) for r, c in zip(plan.rounds(), plan.committed.tolist(), strict=True)]


RULES = [None] + [STOP_RULES["fixed"](draft_length=d, tau_raw=0, max_draft_len=8) for d in (1, 3, 8)] + [
    STOP_RULES["oracle"](draft_length=None, tau_raw=0, max_draft_len=8),
    STOP_RULES["confidence"](draft_length=None, tau_raw=0, max_draft_len=8, param=0.5)]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name if r else "ad")
def test_planned_rounds_equal_committing_round_by_round(rule):
    rng = np.random.default_rng(11)
    for n in list(range(1, 12)) + [int(x) for x in rng.integers(12, 300, 20)]:
        trace = random_trace(rng, n)
        plan = planned_rounds(rule, trace, trace.prompt_len, trace.output_len)
        rounds, tokens = round_by_round(rule, trace)
        assert as_rounds(plan) == rounds
        assert plan.tokens == tokens


def test_planned_rounds_by_hand():
    # d = 3 over 5 positions accepted [yes, yes, no, yes, yes], prompt 4: round 1 at t = 0
    # accepts 2, the TLM corrects the third (t = 3); round 2 drafts the last 2, accepts both,
    # no TLM token (the output is complete).
    trace = RequestTrace("h", "open_qa", 4, np.full(5, 0.9), np.array([1, 1, 0, 1, 1], dtype=bool),
                         [np.array([0.5, 0.5])])
    plan = planned_rounds(STOP_RULES["fixed"](draft_length=3, tau_raw=0, max_draft_len=8), trace, 4, 5)
    assert as_rounds(plan) == [(3, 4, (7, 4), 3), (2, 7, (9, 3), 2)]
    assert (plan.tokens.drafted, plan.tokens.accepted, plan.tokens.rejected, plan.tokens.tlm_tokens,
            plan.tokens.generated, plan.tokens.discarded) == (5, 4, 1, 1, 5, 0)


@pytest.mark.parametrize("times", [[5, 7, 3, 9], [4, 0, 6]])      # 0: an empty interval, not logged
def test_run_series_equals_run_alone_per_step(times):
    works = [Work(t, t // 2, t // 3, devices) for t, devices in zip(times, (1, 2, 1, 1))]
    starts = [10, 20, 30, 45][:len(works)]
    one, series = IntervalLog(), IntervalLog()
    by_step = DeviceSet(EventQueue(), 2, one)
    at_once = DeviceSet(EventQueue(), 2, series)
    ends = [by_step.run_alone(1, "DLM/mb1", w, s) for w, s in zip(works, starts)]
    at_once.run_series(1, "DLM/mb1", works, starts, [s + w.time_ps for s, w in zip(starts, works)])
    assert ends == [s + w.time_ps for s, w in zip(starts, works)]
    assert dict(one.intervals) == dict(series.intervals)
    assert (by_step.gpu_busy_ps, by_step.pim_busy_ps) == (at_once.gpu_busy_ps, at_once.pim_busy_ps)


@pytest.mark.parametrize("hardware, attention", [("saddle", "pim"), ("saddle", "gpu"), ("dgx-a100", "gpu")])
def test_autoregressive_passes_priced_together_equal_one_by_one(hardware, attention):
    """``LockstepRun._ad_pass``: the passes until the batch changes as one ``price_round`` of
    the TLM over every device (each request one query, its context one longer each pass)."""
    rng = random.Random(5)
    contexts = [rng.choice((rng.randint(1, 900), 16 * rng.randint(1, 50))) for _ in range(128)]
    clear_caches()
    together = CostAdapter.named(hardware, "opt-66b", "opt-1.3b")
    n = together.n_devices
    got = together.price_round("tlm", contexts, [19] * len(contexts), "gpu", attention, n)
    one = CostAdapter.named(hardware, "opt-66b", "opt-1.3b")
    assert got == [one.price("tlm", tuple((c + s, 1) for c in contexts), "gpu", attention, n)
                   for s in range(19)]


def test_drafting_rounds_in_slot_order_without_the_idle():
    slot1, slot5, slot9 = (3, 10, (13, 4)), (0, 50, (50, 1)), (2, 90, (92, 3))
    assert LockstepRun._drafting([slot1, slot5, slot9]) == ([3, 2], [10, 90])
    assert LockstepRun._drafting([slot1, slot9]) == ([3, 2], [10, 90])
    assert LockstepRun._drafting([]) == ([], [])


@pytest.mark.parametrize("system, d", [("pim-sd", 3), ("gpu-sd", 2), ("pim-sd", "search")])
def test_rounds_in_progress_are_each_requests_next_planned_round(system, d, tiny_trace, monkeypatch):
    """``current`` (the rounds' iterators taken in slot order, ``_arrange``) is every live
    request's round of this pass, read from its planned rounds by the pass number, and each
    micro-batch drafts its own requests' rounds in slot order: with a full batch and in the
    tail, where slots are freed."""
    from sim.systems import lockstep
    from sim.systems.run import simulate
    from tests.sim.systems.test_systems import params

    seen = []
    original = lockstep.LockstepRun.draft_planned

    def checked(self):
        k, slots = self.pass_no, sorted(self.live)
        want = [list(self.plans[slot].rounds())[k - self.first[slot]] for slot in slots]
        assert self.current == want
        for mb, where in enumerate(self._mb_rounds):
            mine = [self.current[i] for i in where]
            assert mine == [want[i] for i, slot in enumerate(slots) if self.live[slot].mb == mb]
        seen.append(len(slots))
        return original(self)
    monkeypatch.setattr(lockstep.LockstepRun, "draft_planned", checked)
    simulate(params(system, d, tiny_trace, batch=5))
    assert 5 in seen and min(seen) == 1 and len(seen) > 10
