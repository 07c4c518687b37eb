"""Lock-step decoding: GPU-AD, PIM-AD, GPU-SD, PIM-SD, SpecPIM-AD/SD and SADDLE-d.

A round: every micro-batch drafts on its own device (one DLM step after another for the
requests still drafting), then one TLM pass verifies every request of the batch with its own
query count (its draft tokens + 1) and context. Drafting and verification never overlap.
Autoregressive decoding is the round with no draft tokens (one query per request).

The stopping rule plans each round's length (fixed d, oracle) or, for SADDLE-d, the Manager's
Controller (``sim.manager.controller``) decides token by token on the trace's probabilities
quantized to UQ1.16.
"""
from __future__ import annotations

from bisect import bisect_right
from heapq import heappop, heappush

from sim.manager.controller import Controller
from sim.manager.formats import quantize_prob
from sim.systems.base import REJECTED_PREFIX, BaseRun, Live

class LockstepRun(BaseRun):
    def __init__(self, setup) -> None:
        super().__init__(setup)
        rule = setup.stop
        self.controller = None
        if rule is not None and rule.planned_by_controller:
            cfg = setup.manager_config
            self.controller = Controller(cfg.max_requests, cfg.max_draft_len, rule.controller_tau,
                                         cfg.acceptance_table)

    # -- rounds --------------------------------------------------------------------------
    def start(self) -> None:
        self.enter(self.admit(self.batcher.initial()))
        self.round()

    def enter(self, lives: list[Live]) -> None:
        for live in lives:
            if self.controller is not None:
                self.controller.admit(live.slot, live.mb)
            elif self.setup.stop is not None:
                # A planned round at output position t accepts leading_accepted(t, cap) =
                # min(accepted_from[t], cap) tokens (cap >= 1): one list per request, not a
                # trace lookup per request per round.
                live.extra["accepted_from"] = live.trace.leading_accepted_all(live.out_len).tolist()

    def round(self) -> None:
        rule = self.setup.stop
        if rule is None:
            # Autoregressive: nothing to draft, the pass verifies one query per request now.
            for live in self.live.values():
                live.extra["drafted"] = live.extra["accepted"] = 0
            self.queue.at(self.queue.now, self.verify)
            return
        max_len = self.setup.manager_config.max_draft_len if self.controller else None
        for live in self.live.values():
            live.extra["drafted"] = 0
            plan = rule.planned(live.trace, live.t, live.remaining)
            cap = plan if plan is not None else min(max_len, live.remaining)
            live.extra["cap"] = cap
            # Only the Controller reads the draft tokens' probabilities; a planned round needs
            # just its accepted count.
            if self.controller is not None and cap:
                live.extra["probs"], live.extra["accepted"] = live.trace.draft_prob_list(live.t, cap)
            else:
                live.extra["accepted"] = min(live.extra["accepted_from"][live.t], cap) if cap else 0
            live.extra["drafting"] = cap > 0
            if self.controller is not None:
                self.controller.slots[live.slot].new_round()
        self.draft()

    def draft(self) -> None:
        """The round's prediction steps, then its verification. Nothing else runs while the
        micro-batches draft (no pass in flight, one DLM stream per device) and they never
        interact, so the steps are simulated here without an event each: a step takes its
        priced time, then the Controller's monitoring latency, then the micro-batch's next step
        starts. The steps are booked (their energy summed) in exactly the order one event per
        step ran them: by start time, then by the end of the micro-batch's previous step, then
        by the order that previous step started (the event queue's insertion order), so every
        float sum is added in the same order. The pass starts when the last micro-batch has no
        request left drafting.

        A planned round (no Controller) knows every step before it starts: request r drafts
        in steps 0 .. cap_r - 1, step s over context ``context(s)``. Its steps are priced up
        front, one call per micro-batch (``CostAdapter.price_round``), and booked in that
        order."""
        now = self.queue.now
        n = self.n_devices
        # (start, end of the previous step, start order of the previous step, micro-batch);
        # the first steps start in micro-batch order.
        heap = [(now, -1, mb, mb) for mb in range(n)]
        members = [self.members(mb) for mb in range(n)]   # fixed until the pass
        planned = self.controller is None
        if planned:
            fc, attention = self.setup.mapping["dlm_fc"], self.setup.mapping["dlm_attention"]
            priced_steps, counts = [], []
            for group in members:
                contexts, caps = self._planned_round(group)
                priced_steps.append(self.costs.price_round("dlm", contexts, caps, fc, attention, 1))
                ordered = sorted(caps)      # step s drafts for the requests with cap > s
                counts.append([len(caps) - bisect_right(ordered, s) for s in range(len(priced_steps[-1]))])
            taken = [0] * n
        end = now
        order = 0
        while heap:
            start, _, _, mb = heappop(heap)
            if planned:
                s = taken[mb]
                if s == len(priced_steps[mb]):
                    end = max(end, start)
                    continue
                taken[mb] = s + 1
                priced = priced_steps[mb][s]
                self.book(priced)
                drafting = counts[mb][s]
                self.tokens.drafted += drafting
            else:
                lives = [l for l in members[mb] if l.extra["drafting"]]
                if not lives:
                    end = max(end, start)
                    continue
                priced = self.price_dlm([(l.context(l.extra["drafted"]), 1) for l in lives])
                self.after_draft(lives)
                drafting = len(lives)
            done = self.devices.run_alone(mb, self.dlm_lanes[mb], priced.work, start)
            heappush(heap, (done + self.monitoring(mb, drafting, at=done), done, order, mb))
            order += 1
        if planned:
            for group in members:
                for live in group:
                    live.extra["drafted"] = live.extra["cap"]     # 0 for a request not drafting
        self.queue.at(end, self.verify)

    @staticmethod
    def _planned_round(group: list[Live]) -> tuple[list[int], list[int]]:
        """The contexts at step 0 and the caps of the requests of the micro-batch ``group``
        (slot order) that draft in this planned round: request r drafts in steps 0 .. cap_r - 1,
        over context ``context(s)`` at step s."""
        drafting = [live for live in group if live.extra["drafting"]]
        return [live.context(0) for live in drafting], [live.extra["cap"] for live in drafting]

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
                if self.controller is not None:
                    self.controller.retire(live.slot)
                entering += self.refill()
        self.settle_window()
        self.enter(self.admit(entering))
        if self.live:
            self.round()
