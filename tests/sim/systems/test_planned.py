"""The lock-step runs' batched paths against the per-round and per-step ones they stand for:
a request's planned rounds (``planned_rounds``) against planning round by round from the
committed prefix, ``DeviceSet.run_series`` against a ``run_alone`` per step, and autoregressive
passes priced together (``price_round``) against one ``price`` per pass."""
from __future__ import annotations

import random

import numpy as np
import pytest

from sim.cost.system import clear_caches
from sim.engine.costs import CostAdapter
from sim.engine.devices import DeviceSet, IntervalLog, Work
from sim.engine.events import EventQueue
from sim.systems.planned import planned_rounds
from sim.systems.registry import STOP_RULES
from traces.format import RequestTrace


def random_trace(rng, n: int) -> RequestTrace:
    accepted = rng.random(n) < rng.uniform(0.3, 0.95)
    p = rng.uniform(0.05, 1.0, n)
    return RequestTrace("r", "open_qa", int(rng.integers(1, 50)), p, accepted,
                        [rng.uniform(0.05, 1.0, 2) for _ in range(int((~accepted).sum()))])


def round_by_round(rule, trace: RequestTrace) -> tuple[list[int], list[int]]:
    """Each round's cap and accepted count, planned from the committed prefix one at a time."""
    caps, ks = [], []
    t, n = 0, trace.output_len
    while t < n:
        cap = rule.planned(trace, t, n - t)
        k = trace.leading_accepted(t, cap) if cap else 0
        caps.append(cap)
        ks.append(k)
        t += k + (t + k < n)
    return caps, ks


RULES = [STOP_RULES["fixed"](draft_length=d, tau_raw=0, max_draft_len=8) for d in (1, 3, 8)] + [
    STOP_RULES["oracle"](draft_length=None, tau_raw=0, max_draft_len=8),
    STOP_RULES["confidence"](draft_length=None, tau_raw=0, max_draft_len=8, param=0.5)]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_planned_rounds_equal_planning_round_by_round(rule):
    rng = np.random.default_rng(11)
    for n in list(range(1, 12)) + [int(x) for x in rng.integers(12, 300, 20)]:
        trace = random_trace(rng, n)
        assert planned_rounds(rule, trace, trace.output_len) == round_by_round(rule, trace)


def test_planned_rounds_by_hand():
    # d = 3 over 5 positions accepted [yes, yes, no, yes, yes]: round 1 at t = 0 accepts 2, the
    # TLM corrects the third (t = 3); round 2 drafts the last 2 and accepts both.
    trace = RequestTrace("h", "open_qa", 4, np.full(5, 0.9), np.array([1, 1, 0, 1, 1], dtype=bool),
                         [np.array([0.5, 0.5])])
    fixed = STOP_RULES["fixed"](draft_length=3, tau_raw=0, max_draft_len=8)
    assert planned_rounds(fixed, trace, 5) == ([3, 2], [2, 2])


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
    """``AutoregressiveRun.price_pass``: the passes until the batch changes as one ``price_round`` of
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
