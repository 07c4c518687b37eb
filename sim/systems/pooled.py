"""SADDLE-p, SADDLE-s, SADDLE and the oracle: every decision taken by the Manager model.

The engine talks to ``sim.manager.manager.Manager`` only through its transactions:
``Admit`` when a request enters, ``DraftToken`` for every token the DLM produces (the answer
says which pool took it and whether the round goes on, or ``Refused`` under back-pressure),
``SchedulerQuery`` after each prediction step (where the micro-batch's next DLM FC runs),
``VerifyIssue`` whenever a verification could start (the answer lists the tokens, in greedy
order, and where TLM attention runs), ``VerifyResult`` per request and ``Unlock`` when the pass
ends (eager tokens moved or discarded, new rounds resumed), ``Retire`` when an output is done.
The five sent per draft token, per prediction step and per pass (DraftToken, SchedulerQuery,
VerifyIssue, VerifyResult, Unlock) go through ``Manager.draft`` / ``query`` / ``issue`` /
``result`` / ``unlock`` (the same transactions without the transaction and event objects)
unless the run records its transactions (``record``): then the ``*_recorded`` methods send the
boxed transaction, log it with its events and answer as the unboxed call does.

Trace positions. A round starts at output position ``base`` (the committed prefix when it
starts); its j-th draft token (Manager position j) is the DLM's token at output position
base + j - 1 along the DLM's own path, read from ``RequestTrace.draft_prob_list(base, n)``. The
trace has no token ids: the Manager carries ``position mod 2**17`` in their place.

Verification pass: request r with k selected tokens starting at round position f is priced
over its own context up to the chunk's last token, with k + 1 queries (its draft tokens and
the last committed token) when f = 1, and k queries for a later chunk of the round (f > 1: the
chunk before it was all accepted and its tokens are already in the TLM's KV cache).
Its accepted count is how many of them lie inside the trace's leading accepted run. The TLM's
own token (correction after a rejection, bonus when the round ended and everything was
accepted) is committed exactly when the Manager resumes the request with a new round.

Overlap. With an Eager Pool (SADDLE-s, SADDLE, oracle) each micro-batch's DLM keeps stepping
while a pass is in flight (fluid device sharing, ``sim.engine.devices``). A verification is
asked for (``VerifyIssue``) after every prediction step and at every Unlock; the Manager
issues it when the Shared Pool holds one pass worth of tokens (N) or when its ``tlm_idle``
input is true. What drives that input is the system's ``issue_rule`` (the paper's fig11: "or
when the GPU is idle"; readings compared in sim/README.md):

- ``gpu-idle``: no TLM pass and no DLM step with an operator on a GPU in flight (the GPUs of
  all devices, since a pass spans them all);
- ``tlm-idle``: no TLM pass in flight (so at Unlock a pass starts at once with the eager
  tokens of the requests that had everything accepted);
- ``drained``: no TLM pass in flight and no live request can draft any more (the pool cannot
  grow before the next pass).

Without an Eager Pool (SADDLE-p), the micro-batches' prediction steps are synchronised and
alternate with passes: after each step, a pass is issued if the Shared Pool holds one pass
worth of tokens, or if no request can draft any more (``drained``).
"""
from __future__ import annotations

from functools import partial
from operator import attrgetter

from sim.manager.formats import PROB_ONE, TOKEN_ID, quantize_prob
from sim.manager.manager import Manager, positions_by_request
from sim.manager.transactions import (Admit, Device, Discarded, DiscardReason, DraftToken, EndRound,
                                      Issued, Mapping, Op, Pool, Refused, Resumed, Retire,
                                      SchedulerQuery, Unlock, VerifyIssue, VerifyResult)
from sim.systems.base import (EAGER_AFTER_REJECT, REJECTED_PREFIX, SHARED_AFTER_REJECT, BaseRun,
                              Live)


# Enum.value is a Python-level property: the mapping's name is looked up after every prediction step.
_DEVICE_NAME = {device: device.value for device in Device}


_TOKEN_MASK = TOKEN_ID.max_raw
_SLOT = attrgetter("slot")


def _token_id(position: int) -> int:
    return position & _TOKEN_MASK


class _Round:
    """One speculation round of a request as the engine drafts it (``live.extra["round"]``).

    Attributes, not dict keys: mb_step and after_draft read them for every draft token. A new
    round is a new object, and the one it replaces, or the last one of a retired request, is
    marked ``stale``: a prediction step that outlived its round (rejected or retired while it
    ran) reads one flag per token to see it."""
    __slots__ = ("live", "slot", "base", "start", "pos", "cap", "p", "run", "stopped", "blocked", "stale")

    def __init__(self, live: Live, cap: int, p: list[float], run: int) -> None:
        self.live = live
        self.slot = live.slot
        self.base = live.t                  # output position of the round's first draft token
        self.start = live.prompt + live.t   # its context: the committed prefix
        self.pos = 0                        # draft tokens of the round taken by a pool so far
        self.cap = cap
        self.p = p                          # the DLM's probabilities along its own path
        self.run = run                      # how many of them lie in the trace's accepted run
        self.stopped = cap == 0
        self.blocked = False                # refused by a full pool until the next Unlock
        self.stale = False                  # replaced by a new round, or its request retired


class PooledRun(BaseRun):
    def __init__(self, setup, capacity: int, issue_rule: str | None = None) -> None:
        super().__init__(setup)
        self.manager = Manager(setup.manager_config)
        self.capacity = capacity
        self.overlap = setup.spec.eager
        self.issue_rule = issue_rule if self.overlap else "drained"
        self.gpu_steps: set[int] = set()   # micro-batches whose DLM step in flight uses a GPU
        self.dlm_fc = {mb: setup.mapping["dlm_fc"] for mb in range(self.n_devices)}
        self.dlm_attention_gpu = setup.mapping["dlm_attention"] == "gpu"
        self.in_pass = False
        self.tlm_busy = False
        self.refused = 0
        # Read at every round's start.
        self.max_draft_len = setup.manager_config.max_draft_len
        self.planned = setup.stop.planned
        self.mb_wait = [False] * self.n_devices   # a micro-batch's step or monitoring in flight
        # Per micro-batch, slot -> current round of the requests that can draft (can_draft):
        # a prediction step takes only those, and at large batch most requests of a
        # micro-batch wait for their verification, so scanning them all cost more than the step.
        self.ready: list[dict[int, _Round]] = [{} for _ in range(self.n_devices)]
        self.blocked: list[_Round] = []   # rounds refused since the last Unlock (to unblock)
        # Per micro-batch, the rounds of its prediction step in flight (after_draft's input),
        # and the events after its step and after its monitoring: built once, not per step.
        self.stepping: list[list[_Round]] = [[] for _ in range(self.n_devices)]
        self.after_drafts = [partial(self.after_draft, mb) for mb in range(self.n_devices)]
        self.after_monitors = [partial(self.after_monitor, mb) for mb in range(self.n_devices)]
        self.events: list = []       # every Manager output, when recording (tests, replay)
        self.record = False

    # -- Manager -------------------------------------------------------------------------
    def draft_recorded(self, request: int, mb: int, position: int, token: int, prob: int
                       ) -> tuple[Pool, bool | None]:
        """``Manager.draft`` (the DraftToken transaction, unboxed: one per draft token) through
        the boxed transaction and event, so that a recording run logs them."""
        (out,) = self.record_apply(DraftToken(request, mb, position, token, prob))
        return out.pool, None if type(out) is Refused else out.stop

    def issue_recorded(self, tlm_idle: bool, capacity: int) -> tuple[dict[int, list[int]], Device] | None:
        """``Manager.issue`` (VerifyIssue, answer unboxed) through the boxed transaction."""
        out = self.record_apply(VerifyIssue(tlm_idle, capacity))
        if type(out[0]) is not Issued:
            return None
        (mapping,) = [e for e in out if type(e) is Mapping and e.op is Op.TLM_ATTENTION]
        return positions_by_request(out[0].tokens), mapping.device

    def query_recorded(self, mb: int) -> Mapping:
        """``Manager.query`` (SchedulerQuery, answer unboxed) through the boxed transaction."""
        (mapping,) = self.record_apply(SchedulerQuery(mb))
        return mapping

    def result_recorded(self, request: int, accepted: int, corrected_token: int) -> int:
        """``Manager.result`` (VerifyResult unboxed) through the boxed transaction: the waiting
        tokens it discarded. Its Discarded events are booked by ``after_pass``, as unboxed."""
        out = self.record_apply(VerifyResult(request, accepted, corrected_token))
        return sum(len(e.positions) for e in out
                   if type(e) is Discarded and e.reason is DiscardReason.SHARED_AFTER_REJECT)

    def unlock_recorded(self) -> tuple[list[int], list[int]]:
        """``Manager.unlock`` through the boxed transaction: (eager tokens discarded per
        rejected request, resumed requests), booked by ``after_pass`` as unboxed."""
        out = self.record_apply(Unlock())
        return ([len(e.positions) for e in out if type(e) is Discarded],
                [e.request for e in out if type(e) is Resumed])

    def record_apply(self, txn) -> list:
        """The boxed transaction, logged; its Discarded events are the caller's to book."""
        out = self.manager.apply(txn)
        self.events.append((txn, out))
        return out

    def apply(self, txn) -> list:
        out = self.manager.apply(txn)
        if self.record:
            self.events.append((txn, out))
        for event in out:
            if type(event) is Discarded:
                self.tokens.discard(event.reason.value, len(event.positions))
        return out

    # -- requests ------------------------------------------------------------------------
    def enter(self, lives: list[Live]) -> None:
        for live in lives:
            self.apply(Admit(live.slot, live.mb))
            self.new_round(live)

    def new_round(self, live: Live) -> None:
        remaining = live.remaining
        cap = min(self.max_draft_len, remaining)
        plan = self.planned(live.trace, live.t, remaining)
        probs, accepted = live.trace.draft_prob_list(live.t, cap)
        old = live.extra.get("round")
        if old is not None:
            old.stale = True
        live.extra["round"] = _Round(live, cap if plan is None else min(plan, cap), probs, accepted)
        self.update_ready(live)

    def can_draft(self, live: Live) -> bool:
        rnd = live.extra["round"]
        return not (rnd.stopped or rnd.blocked)

    def update_ready(self, live: Live) -> None:
        """Keep ``ready`` in step with can_draft after the live's round changed state."""
        if self.can_draft(live):
            self.ready[live.mb][live.slot] = live.extra["round"]
        else:
            self.ready[live.mb].pop(live.slot, None)

    # -- prediction ----------------------------------------------------------------------
    def start(self) -> None:
        self.enter(self.admit(self.batcher.initial()))
        self.kick()

    def kick(self) -> None:
        """Start a prediction step on every idle micro-batch that has work."""
        if not self.overlap and self.in_pass:
            return
        for mb in range(self.n_devices):
            if not self.devices.busy_background(mb) and not self.mb_wait[mb]:
                self.mb_step(mb)

    def mb_step(self, mb: int) -> None:
        ready = self.ready[mb]
        if not ready:
            return
        # In slot order (slots are unique in a micro-batch): one C sort by key, not a sort of
        # the slots and a lookup of each.
        rounds = self.stepping[mb] = sorted(ready.values(), key=_SLOT)
        fc = self.dlm_fc[mb]
        priced = self.price_dlm(tuple([rnd.start + rnd.pos for rnd in rounds]), fc=fc)
        if fc == "gpu" or self.dlm_attention_gpu:
            self.gpu_steps.add(mb)
        self.mb_wait[mb] = True
        self.devices.start_background(mb, self.dlm_lanes[mb], priced.work, self.after_drafts[mb])

    def after_draft(self, mb: int) -> None:
        self.gpu_steps.discard(mb)
        drafting = taken = 0
        ready = self.ready[mb]
        tokens = self.tokens
        draft = self.draft_recorded if self.record else self.manager.draft
        for rnd in self.stepping[mb]:
            if rnd.stale:
                # Rejected or finished while the step ran: its token was drafted on a context
                # that no longer holds. The DLM's work is spent; the token never reaches a pool.
                tokens.drafted += 1
                tokens.discard("stale_context")
                continue
            drafting += 1
            pos = rnd.pos
            # The token id is _token_id(base + pos), and the probability quantize_prob's common
            # case, written out: two calls less per draft token (test_pooled_fast.py).
            p = rnd.p[pos]
            _, stop = draft(rnd.slot, mb, pos + 1, (rnd.base + pos) & _TOKEN_MASK,
                            int(p * PROB_ONE + 0.5) if 0.0 < p < 1.0 else quantize_prob(p))
            if stop is None:
                self.refused += 1
                rnd.blocked = True
                self.blocked.append(rnd)
                ready.pop(rnd.slot, None)      # can_draft is now false
                continue
            taken += 1
            rnd.pos = pos = pos + 1
            if stop or pos >= rnd.cap:
                rnd.stopped = True
                ready.pop(rnd.slot, None)
                if not stop:
                    # Output end or the oracle's plan: tell the Controller, so the Scheduler's
                    # count of drafting requests and the next round's start are right.
                    for event in self.apply(EndRound(rnd.slot)):
                        if isinstance(event, Resumed):
                            self.resume_now(rnd.live)
        tokens.drafted += taken
        mapping = self.query_recorded(mb) if self.record else self.manager.query(mb)
        self.dlm_fc[mb] = _DEVICE_NAME[mapping.device]
        delay = self.monitoring(mb, drafting)
        self.queue.after(delay, self.after_monitors[mb])

    def after_monitor(self, mb: int) -> None:
        self.mb_wait[mb] = False
        if self.overlap:
            if not self.in_pass:
                self.try_issue()
            self.mb_step(mb)
            return
        # SADDLE-p: wait for every micro-batch's step, then verify or step again.
        if any(self.mb_wait) or self.in_pass:
            return
        if not self.try_issue():
            self.kick()

    # -- verification --------------------------------------------------------------------
    def below_capacity_ok(self) -> bool:
        """The ``tlm_idle`` input of VerifyIssue: may a pass start with fewer than N tokens
        (the issue rule, module doc)?"""
        if self.tlm_busy:
            return False
        if self.issue_rule == "tlm-idle":
            return True
        if self.issue_rule == "gpu-idle":
            return not self.gpu_steps
        return not any(self.ready)

    def try_issue(self) -> bool:
        if self.in_pass:
            return False
        issue = self.issue_recorded if self.record else self.manager.issue
        answer = issue(self.below_capacity_ok(), self.capacity)
        if answer is None:
            return False
        groups, attention = answer
        self.in_pass = True
        self.tlm_busy = True
        delay = self.decision(sum(map(len, groups.values())))
        self.queue.after(delay, partial(self.start_pass, groups, attention.value))
        return True

    def start_pass(self, groups: dict[int, list[int]], attention: str) -> None:
        requests = []
        live = self.live
        slots = sorted(groups)
        for slot in slots:
            request = live[slot]
            positions = groups[slot]
            k = len(positions)
            # A round's first chunk also feeds the last committed token (k + 1 queries); a later
            # chunk follows an all-accepted one whose tokens the TLM has already processed, so it
            # feeds its own k tokens. Either way the last query attends up to the chunk's end:
            # the committed prefix (live.t = base + first - 1 here) plus k.
            requests.append((request.context(k), k + (positions[0] == 1)))
        priced = self.price_tlm(requests, attention=attention)
        self.devices.start_foreground("TLM", priced.work, partial(self.after_pass, groups, slots))

    def after_pass(self, groups: dict[int, list[int]], slots: list[int]) -> None:
        """The pass over ``groups`` (positions per request; ``slots``: its requests ascending)
        is done: a VerifyResult per request in slot order, the Unlock, then each request's
        commit in slot order (module doc)."""
        tokens = self.tokens
        live_of = self.live
        result, unlock = ((self.result_recorded, self.unlock_recorded) if self.record
                          else (self.manager.result, self.manager.unlock))
        verified = []           # (live, accepted tokens) per request, slot order
        accepted_all = 0
        for slot in slots:
            live = live_of[slot]
            positions = groups[slot]
            first, k = positions[0], len(positions)
            rnd = live.extra["round"]
            a = max(0, min(k, rnd.run - (first - 1)))
            waiting = result(slot, a, _token_id(rnd.base + first - 1 + a))
            accepted_all += a
            if a < k:
                # The Verified event's rejection, then its two Discarded events (in that order:
                # the reasons' order in the record follows the first discard of each).
                tokens.rejected += 1
                if k - a - 1:
                    tokens.discard(REJECTED_PREFIX, k - a - 1)
                if waiting:
                    tokens.discard(SHARED_AFTER_REJECT, waiting)
            verified.append((live, a))
        tokens.accepted += accepted_all
        discarded, resumed_list = unlock()
        for n in discarded:
            tokens.discard(EAGER_AFTER_REJECT, n)
        resumed = set(resumed_list)
        self.in_pass = False
        self.tlm_busy = False
        entering = []
        for live, a in verified:
            if self.commit_pool(live, a, live.slot in resumed):
                entering += self.refill()
        self.settle_window()
        # Every refused round may draft again; those no longer current (retired or replaced)
        # stay out of ``ready``.
        blocked, self.blocked = self.blocked, []
        for rnd in blocked:
            rnd.blocked = False
            if not rnd.stale:
                self.update_ready(rnd.live)
        if entering:
            self.enter(self.admit(entering))
        if not self.live:
            return
        if self.overlap:
            # The resumed requests' DLM steps start now, before the issue rule looks at the GPUs.
            self.kick()
            self.try_issue()
        elif not self.try_issue():
            self.kick()

    def resume_now(self, live: Live) -> None:
        """The Manager started a new round at once (every token of the old one already
        verified and accepted): the TLM token of the latest result is committed."""
        if live.t < live.out_len:
            live.t += 1
            self.tokens.generated += 1
            self.tokens.tlm_tokens += 1
        self.new_round(live)

    def commit_pool(self, live: Live, accepted: int, resumed: bool) -> bool:
        """Commit a verified request's ``accepted`` tokens, and the TLM's own token if the
        Manager ``resumed`` it (its new round starts); True when the request finished (then
        retired and released)."""
        tokens = self.tokens
        t = live.t + accepted
        if resumed and t < live.out_len:
            t += 1
            tokens.generated += accepted + 1
            tokens.tlm_tokens += 1
        else:
            tokens.generated += accepted
        live.t = t
        if t >= live.out_len:
            self.apply(Retire(live.slot))
            self.release(live)
            live.extra["round"].stale = True
            self.ready[live.mb].pop(live.slot, None)
            return True
        if resumed:
            self.new_round(live)
        return False

    def finish_checks(self) -> None:
        totals = self.manager.conservation(final=True)
        self.manager_totals = totals.as_dict()
