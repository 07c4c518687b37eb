"""Speculative decoding whose stopping rule plans each round's length (GPU-SD, PIM-SD,
SpecPIM-SD with a fixed d; the planned rules of ``registry.py`` on a lock-step system).
Without the Controller a request's rounds depend on its trace alone, so they are planned when
it enters the batch (``planned_rounds``); a micro-batch's steps of a round are priced in one
call (``CostAdapter.price_round``).
"""
from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate

import numpy as np
from mypy_extensions import mypyc_attr

from sim.systems.lockstep import LockstepLive, LockstepRun
from sim.systems.registry import FixedLength, StopRule
from traces.format import RequestTrace


def planned_rounds(rule: StopRule, trace: RequestTrace, out_len: int) -> tuple[list[int], list[int]]:
    """Every round of a request decoded from an empty output to ``out_len`` tokens: its draft
    tokens (cap) and how many of them the pass accepts. A round at output position t drafts
    cap = ``rule.planned(trace, t, out_len - t)`` tokens and accepts
    min(``leading_accepted(t, cap)``, cap); it commits those and the TLM's own token unless the
    output is complete. Under a fixed d both are known at every position at once, so only the
    walk from round to round is a loop."""
    accepted_from = trace.leading_accepted_all(out_len)
    if isinstance(rule, FixedLength):
        assert rule.draft_length is not None
        remaining = out_len - np.arange(out_len)
        cap_at = np.minimum(rule.draft_length, remaining)
        k_at = np.minimum(accepted_from, cap_at)
        next_at = (np.arange(out_len) + k_at + (k_at < remaining)).tolist()
        starts = []
        t = 0
        while t < out_len:
            starts.append(t)
            t = next_at[t]
        return cap_at[starts].tolist(), k_at[starts].tolist()
    run = accepted_from.tolist()
    caps, ks = [], []
    t = 0
    while t < out_len:
        cap = rule.planned(trace, t, out_len - t) or 0
        k = min(run[t], cap)
        caps.append(cap)
        ks.append(k)
        t += k + (t + k < out_len)
    return caps, ks


@dataclass(slots=True)
class PlannedLive(LockstepLive):
    rounds: Iterator[tuple[int, int]] = iter(())    # (draft tokens, accepted) of those to come


@mypyc_attr(allow_interpreted_subclasses=True)
class PlannedRun(LockstepRun):
    live_type = PlannedLive
    live: dict[int, PlannedLive]    # type: ignore[assignment]

    def enter(self, lives) -> None:
        assert self.setup.stop is not None
        for live in lives:
            caps, ks = planned_rounds(self.setup.stop, live.trace, live.out_len)
            live.rounds = zip(caps, ks)
            self.tokens.drafted += sum(caps)

    def new_round(self, batch: list[LockstepLive]) -> None:
        for live in batch:
            assert isinstance(live, PlannedLive)        # typed: compiled, its fields read natively
            live.drafted, live.accepted = next(live.rounds)

    def draft(self, mb: int, lives: list[LockstepLive], start: int) -> int:
        """Request r drafts in steps 0 .. cap_r - 1, step s at context ``context(s)``."""
        drafting = [live for live in lives if live.drafted]
        if not drafting:
            return start
        m = self.mapping
        caps = [live.drafted for live in drafting]
        steps = self.costs.price_round("dlm", [live.context(0) for live in drafting], caps,
                                       m["dlm_fc"], m["dlm_attention"], 1)
        if self.timing is not None:
            ordered = sorted(caps)
            starts, ends = [], []
            t = start
            for s, step in enumerate(steps):
                starts.append(t)
                t += step.work.time_ps
                ends.append(t)
                t += self.monitoring(mb, len(ordered) - bisect_right(ordered, s), at=t)
        else:
            times = list(accumulate([step.work.time_ps for step in steps], initial=start))
            starts, ends, t = times[:-1], times[1:], times[-1]
        self.devices.run_series(mb, self.dlm_lanes[mb], [self.book(step) for step in steps],
                                starts, ends)
        return t
