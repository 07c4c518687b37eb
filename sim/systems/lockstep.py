"""Lock-step decoding: GPU-AD, PIM-AD, GPU-SD, PIM-SD, SpecPIM-AD/SD and SADDLE-d.

A round: every micro-batch drafts on its own device (one DLM step after another for the
requests still drafting), then one TLM pass verifies every request of the batch with its own
query count (its draft tokens + 1) and context. Drafting and verification never overlap.
Autoregressive decoding is the round with no draft tokens (one query per request).

The stopping rule plans each round's length (fixed d, oracle) or, for SADDLE-d, the Manager's
Controller (``sim.manager.controller``) decides token by token on the trace's probabilities
quantized to UQ1.16.

Without the Controller a request's rounds depend on its trace alone (the rule plans each from
the committed prefix, and the trace says how many tokens the pass accepts), so they are
computed once, when it enters the batch (``planned_rounds``), and each pass only reads them.
"""
from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from heapq import heappop, heappush
from itertools import accumulate
from operator import itemgetter
from typing import NamedTuple

import numpy as np

from sim.engine.costs import Priced
from sim.manager.controller import Controller
from sim.manager.formats import quantize_prob
from sim.metrics import TokenCounts
from sim.systems.base import REJECTED_PREFIX, BaseRun, Live
from sim.systems.registry import FixedLength

# A planned round of one request as a pass reads it (a plain tuple, one per request per pass):
# (draft tokens, context of its first draft step, its verification request (context, queries)).
CAP, CONTEXT, QUERY = range(3)
_query = itemgetter(QUERY)


class PlannedRounds(NamedTuple):
    """``planned_rounds``: per round of a request (first first, int64 arrays) its draft tokens,
    the context of its first draft step and the tokens its pass commits; and the token counts
    they add up to."""

    caps: np.ndarray
    contexts: np.ndarray
    committed: np.ndarray
    tokens: TokenCounts

    def rounds(self) -> Iterator[tuple[int, int, tuple[int, int]]]:
        """The rounds as a pass reads them, first first: (cap, context, verification request).
        An iterator: each pass takes the next round of every request, and a tuple made then
        costs less than a list of them all made when the request enters."""
        caps, contexts = self.caps, self.contexts
        return zip(caps.tolist(), contexts.tolist(), zip((contexts + caps).tolist(), (caps + 1).tolist()))


def planned_rounds(rule, trace, prompt: int, out_len: int) -> PlannedRounds:
    """Every round of a request decoded from an empty output to ``out_len`` tokens under the
    planned stopping ``rule`` (None: autoregressive, no draft tokens): round by round what
    ``LockstepRun`` drafted and ``BaseRun.commit`` committed. A round at output position t
    drafts cap = ``rule.planned(trace, t, out_len - t)`` tokens, accepts
    min(``leading_accepted(t, cap)``, cap) of them (the first mismatch is rejected, the tokens
    after it discarded) and adds the TLM's own token unless the output is complete."""
    starts, caps, accepted = _round_starts(rule, trace, out_len)
    tlm = starts + accepted < out_len              # the TLM adds its token
    tokens = TokenCounts(generated=out_len, drafted=int(caps.sum()), accepted=int(accepted.sum()),
                         rejected=int(np.count_nonzero(accepted < caps)),
                         tlm_tokens=int(np.count_nonzero(tlm)))
    discarded = int(np.maximum(caps - accepted - 1, 0).sum())
    if discarded:
        tokens.discard(REJECTED_PREFIX, discarded)
    return PlannedRounds(caps, starts + prompt, accepted + tlm, tokens)


def _round_starts(rule, trace, out_len: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The output position where each round of ``planned_rounds`` starts, its cap and its
    accepted count (int64 arrays). Autoregressive: a round at every position, nothing
    drafted. Under a fixed d a round's cap and acceptance are known at every position at once,
    so only the walk from round to round is a loop."""
    if rule is None:
        none = np.zeros(out_len, dtype=np.int64)
        return np.arange(out_len, dtype=np.int64), none, none
    accepted_from = trace.leading_accepted_all(out_len)
    if isinstance(rule, FixedLength):
        remaining = out_len - np.arange(out_len)
        cap = np.minimum(rule.draft_length, remaining)
        k = np.minimum(accepted_from, cap)
        next_start = (np.arange(out_len) + k + (k < remaining)).tolist()
        starts = []
        t = 0
        while t < out_len:
            starts.append(t)
            t = next_start[t]
        starts = np.array(starts, dtype=np.int64)
        return starts, cap[starts], k[starts]
    accepted_from = accepted_from.tolist()
    starts, caps, ks = [], [], []
    t = 0
    while t < out_len:
        cap = rule.planned(trace, t, out_len - t)
        k = min(accepted_from[t], cap) if cap else 0
        starts.append(t)
        caps.append(cap)
        ks.append(k)
        t += k + (t + k < out_len)
    return (np.array(starts, dtype=np.int64), np.array(caps, dtype=np.int64),
            np.array(ks, dtype=np.int64))


class LockstepRun(BaseRun):
    def __init__(self, setup) -> None:
        super().__init__(setup)
        rule = setup.stop
        self.controller = None
        if rule is not None and rule.planned_by_controller:
            cfg = setup.manager_config
            self.controller = Controller(cfg.max_requests, cfg.max_draft_len, rule.controller_tau,
                                         cfg.acceptance_table)
        # Without the Controller a request's rounds are known when it enters (``enter``):
        # its round j is verified by pass first[slot] + j; pass k commits generated_at[k]
        # tokens in all and finishes the requests finishing[k].
        self.pass_no = 0                                  # the pass of the round in progress
        self.plans: dict[int, PlannedRounds] = {}
        self.first: dict[int, int] = {}
        self.last: dict[int, int] = {}
        self.rounds: dict[int, Iterator[tuple]] = {}     # drafting rules only: rounds to come
        self.finishing: dict[int, list[int]] = {}
        self.generated_at = np.zeros(1024, dtype=np.int64)
        # The rounds in progress, in slot order (one per live request: each is in every pass
        # from its first to its last, so a pass takes the next round of each), and per
        # micro-batch where its requests are in that order; rebuilt (``_arrange``) when the
        # batch changes, not per pass.
        self.current: list[tuple] = []
        self._next_rounds: list[Iterator[tuple]] | None = None
        self._mb_rounds: list[list[int]] = []
        self._ad_passes: list[Priced] = []    # autoregressive: the passes priced ahead, last first

    # -- rounds --------------------------------------------------------------------------
    def start(self) -> None:
        self.enter(self.admit(self.batcher.initial()))
        self.round()

    def enter(self, lives: list[Live]) -> None:
        for live in lives:
            if self.controller is not None:
                self.controller.admit(live.slot, live.mb)
            else:
                self._plan(live)

    def _plan(self, live: Live) -> None:
        """Book the rounds of a request that enters now: its first is the next pass's."""
        slot, first = live.slot, self.pass_no
        plan = self.plans[slot] = planned_rounds(self.setup.stop, live.trace, live.prompt,
                                                 live.out_len)
        end = first + len(plan.committed)
        size = len(self.generated_at)
        if end > size:
            self.generated_at = np.concatenate((self.generated_at, np.zeros(max(end, size), np.int64)))
        self.generated_at[first:end] += plan.committed
        self.first[slot], self.last[slot] = first, end - 1
        self.finishing.setdefault(end - 1, []).append(slot)
        if self.setup.stop is not None:
            self.rounds[slot] = plan.rounds()
            self._next_rounds = None

    def round(self) -> None:
        if self.controller is None:
            if self.setup.stop is None:
                # Autoregressive: nothing to draft, the pass verifies one query per request now.
                self.queue.at(self.queue.now, self.verify_planned)
            else:
                if self._next_rounds is None:
                    self._arrange()
                self.current = list(map(next, self._next_rounds))
                self.queue.at(self.draft_planned(), self.verify_planned)
            return
        rule, max_len = self.setup.stop, self.setup.manager_config.max_draft_len
        for live in self.live.values():
            live.extra["drafted"] = 0
            plan = rule.planned(live.trace, live.t, live.remaining)
            cap = plan if plan is not None else min(max_len, live.remaining)
            live.extra["cap"] = cap
            if cap:
                live.extra["probs"], live.extra["accepted"] = live.trace.draft_prob_list(live.t, cap)
            else:
                live.extra["accepted"] = 0
            live.extra["drafting"] = cap > 0
            self.controller.slots[live.slot].new_round()
        self.draft()

    def _arrange(self) -> None:
        """After the batch changed: the live requests' round iterators in slot order, and where
        each micro-batch's requests are in it."""
        live, slots = self.live, sorted(self.live)
        self._next_rounds = [self.rounds[slot] for slot in slots]
        self._mb_rounds = [[] for _ in range(self.n_devices)]
        for i, slot in enumerate(slots):
            self._mb_rounds[live[slot].mb].append(i)

    def draft_planned(self) -> int:
        """A planned round's prediction steps; returns when the last micro-batch has finished
        drafting (the pass starts then). Nothing else runs while the micro-batches draft (no
        pass in flight, one DLM stream per device) and they never interact: each micro-batch's
        steps are priced in one call (``CostAdapter.price_round``: request r drafts in steps
        0 .. cap_r - 1, step s over context ``context(s)``) and run back to back (with the
        Controller's monitoring latency after each, on Manager hardware), booked per
        micro-batch at once. Only the energy, a float sum, is added step by step, in the order
        one event per step ran them: by start time, then by the end of the micro-batch's
        previous step, then by the order that step started (the event queue's insertion
        order)."""
        now = self.queue.now
        current, mapping = self.current, self.setup.mapping
        fc, attention = mapping["dlm_fc"], mapping["dlm_attention"]
        priced, starts, ends = [], [], []
        finish = now
        for mb, where in enumerate(self._mb_rounds):
            caps, contexts = self._drafting([current[i] for i in where])
            steps = self.costs.price_round("dlm", contexts, caps, fc, attention, 1) if caps else []
            mb_starts, mb_ends, done = self._run_steps(mb, steps, caps, now)
            finish = max(finish, done)
            priced.append(steps)
            starts.append(mb_starts)
            ends.append(mb_ends)
        self._book_energy(now, priced, starts, ends)
        return finish

    @staticmethod
    def _drafting(rounds: list[tuple]) -> tuple[list[int], list[int]]:
        """The caps and first contexts of the ``rounds`` (a micro-batch's rounds in progress,
        in slot order) that draft (cap > 0)."""
        if not rounds:
            return [], []
        caps, contexts, _ = zip(*rounds)
        if 0 in caps:
            rounds = [r for r in rounds if r[CAP]]
            return [r[CAP] for r in rounds], [r[CONTEXT] for r in rounds]
        return list(caps), list(contexts)

    def _run_steps(self, mb: int, steps: list[Priced], caps: list[int], now: int
                   ) -> tuple[list[int], list[int], int]:
        """Run micro-batch ``mb``'s ``steps`` back to back from ``now``, each followed by the
        Controller's monitoring latency (logged by ``monitoring``; ``caps``: the drafting
        requests' caps, step s drafting for those with cap > s), and book all but their
        energy. Returns their start and end times and the time the micro-batch is done."""
        if not steps:
            return [], [], now
        works, _, _, _, _, flops, pim_flops = zip(*steps)     # the steps' fields, transposed
        if self.monitored:
            caps = sorted(caps)
            starts, ends = [], []
            t = now
            for s, work in enumerate(works):
                starts.append(t)
                t += work.time_ps
                ends.append(t)
                t += self.monitoring(mb, len(caps) - bisect_right(caps, s), at=t)
        else:
            times = list(accumulate([work.time_ps for work in works], initial=now))
            starts, ends, t = times[:-1], times[1:], times[-1]
        self.devices.run_series(mb, self.dlm_lanes[mb], works, starts, ends)
        self.flops += sum(flops)
        self.pim_flops += sum(pim_flops)
        return starts, ends, t

    def _book_energy(self, now: int, priced: list[list], starts: list[list[int]],
                     ends: list[list[int]]) -> None:
        """Add the steps' energies in the order one event per step would have run them (see
        ``draft_planned``): the event queue's heap of (start, end of the previous step, start
        order of the previous step, micro-batch), the first steps in micro-batch order."""
        energy = self.energy_fj
        heap = [(now, -1, mb, mb) for mb in range(len(priced)) if priced[mb]]
        taken = [0] * len(priced)
        order = 0
        while heap:
            mb = heappop(heap)[3]
            steps, s = priced[mb], taken[mb]
            energy += steps[s].energy_fj
            s = taken[mb] = s + 1
            if s < len(steps):
                heappush(heap, (starts[mb][s], ends[mb][s - 1], order, mb))
            order += 1
        self.energy_fj = energy

    def draft(self) -> None:
        """A Controller-decided round's prediction steps, then its verification. Nothing else
        runs while the micro-batches draft (see ``draft_planned``), so the steps are simulated
        here without an event each: a step takes its priced time, then the Controller's
        monitoring latency, then the micro-batch's next step starts. The steps are booked
        (their energy summed) in exactly the order one event per step ran them (the heap
        below). The pass starts when the last micro-batch has no request left drafting."""
        now = self.queue.now
        n = self.n_devices
        # (start, end of the previous step, start order of the previous step, micro-batch);
        # the first steps start in micro-batch order.
        heap = [(now, -1, mb, mb) for mb in range(n)]
        members = [self.members(mb) for mb in range(n)]   # fixed until the pass
        end = now
        order = 0
        while heap:
            start, _, _, mb = heappop(heap)
            lives = [l for l in members[mb] if l.extra["drafting"]]
            if not lives:
                end = max(end, start)
                continue
            priced = self.price_dlm(tuple([l.context(l.extra["drafted"]) for l in lives]))
            self.after_draft(lives)
            drafting = len(lives)
            done = self.devices.run_alone(mb, self.dlm_lanes[mb], priced.work, start)
            heappush(heap, (done + self.monitoring(mb, drafting, at=done), done, order, mb))
            order += 1
        self.queue.at(end, self.verify)

    def after_draft(self, drafting: list[Live]) -> None:
        """One Controller-decided step: each request's token goes to the Controller."""
        for live in drafting:
            k = live.extra["drafted"]
            live.extra["drafted"] = k + 1
            self.tokens.drafted += 1
            p = quantize_prob(live.extra["probs"][k])
            slot = self.controller.expect_draft(live.slot, live.mb, k + 1)
            stop = self.controller.advance(slot, p) or k + 1 >= live.extra["cap"]
            live.extra["drafting"] = not stop

    # -- verification --------------------------------------------------------------------
    def verify_planned(self) -> None:
        if self.setup.stop is None:
            priced = self.book_tlm(self._ad_pass(sorted(self.live)))     # slot order
        else:
            requests = tuple(map(_query, self.current))     # slot order
            priced = self.price_tlm(requests)
        self.devices.start_foreground("TLM", priced.work, self.after_planned)

    def _ad_pass(self, slots: list[int]) -> Priced:
        """The price of this autoregressive pass over the requests ``slots``. Until the first
        of them finishes the batch does not change and each pass is the previous one with
        every context one longer: the passes up to then are priced together, as the steps of
        a draft round (``CostAdapter.price_round``: step s holds every request, each at its
        context + s with one query, the same ``Priced`` as ``price`` of that pass)."""
        if not self._ad_passes:
            k, plans, first, last, m = self.pass_no, self.plans, self.first, self.last, self.setup.mapping
            left = 1 + min(last[slot] for slot in slots) - k      # passes to the first finish
            self._ad_passes = self.costs.price_round(
                "tlm", [int(plans[slot].contexts[k - first[slot]]) for slot in slots],
                [left] * len(slots), m["tlm_fc"], m["tlm_attention"], self.n_devices)
            self._ad_passes.reverse()
        return self._ad_passes.pop()

    def after_planned(self) -> None:
        """The pass of a planned round is done: it commits the tokens its requests' rounds
        commit (``planned_rounds``); a request whose last round it was books its token counts
        and leaves."""
        k = self.pass_no
        self.tokens.generated += int(self.generated_at[k])
        entering = []
        for slot in sorted(self.finishing.pop(k, ())):
            live = self.live[slot]
            live.t = live.out_len
            self.add_tokens(self.plans.pop(slot).tokens)
            del self.first[slot], self.last[slot]
            self.rounds.pop(slot, None)
            self._next_rounds = None
            self.release(live)
            entering += self.refill()
        self.pass_no = k + 1
        self.next_round(entering)

    def verify(self) -> None:
        live = self.live
        batch = [live[slot] for slot in sorted(live)]     # slot order (ints sort faster than items)
        priced = self.price_tlm([(l.context(d := l.extra["drafted"]), d + 1) for l in batch])
        self.devices.start_foreground("TLM", priced.work, lambda: self.after_verify(batch))

    def after_verify(self, batch: list[Live]) -> None:
        entering = []
        for live in batch:
            drafted = live.extra["drafted"]
            accepted = min(live.extra["accepted"], drafted)
            if accepted < drafted - 1:
                # Counted as the Manager counts them: the first mismatch is rejected, the
                # verified tokens after it are discarded.
                self.tokens.discard(REJECTED_PREFIX, drafted - accepted - 1)
            if self.commit(live, drafted, accepted):
                self.controller.retire(live.slot)
                entering += self.refill()
        self.next_round(entering)

    def next_round(self, entering: list) -> None:
        """After a pass's commits: the window may close, the requests that entered join."""
        self.settle_window()
        self.enter(self.admit(entering))
        if self.live:
            self.round()
