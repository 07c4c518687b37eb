"""SADDLE-p, SADDLE-s, SADDLE and the oracle: every decision taken by the Manager model,
through its transactions in the order sim/manager/README.md describes (the five sent per
token, step or pass through its unboxed methods: ``draft``, ``query``, ``issue``, ``result``,
``unlock``; a recorded run's through a ``RecordingManager``).

A round starts at output position ``base`` (the committed prefix); its j-th draft token is the
DLM's token at output position base + j - 1 along its own path
(``RequestTrace.draft_prob_list``); the Manager carries ``position mod 2**17`` as its token id.
A pass verifies request r's k selected tokens from round position f over its context up to
the chunk's last token, with k + 1 queries when f = 1 (the last committed token too) and k for
a later chunk (the one before was all accepted and is in the TLM's KV cache); it accepts those
inside the trace's leading accepted run. The TLM's own token (correction, or bonus after an
all-accepted round) is committed when the Manager resumes the request with a new round.

With an Eager Pool (SADDLE-s, SADDLE, oracle) each micro-batch's DLM keeps stepping while a
pass runs (fluid device sharing, ``sim.engine.devices``). A pass is asked for (``VerifyIssue``)
after every prediction step and at every Unlock; the Manager issues one when the Shared Pool
holds N tokens or when its ``tlm_idle`` input is true, which the ``issue_rule`` drives (the
paper's "or when the GPU is idle"; sim/README.md compares them): ``gpu-idle``, no pass and no
DLM step using a GPU in flight; ``tlm-idle``, no pass in flight; ``drained``, no pass in
flight and no request able to draft; ``cost`` (SADDLE+), no pass in flight, and the Manager's
pass planner (sim/manager/planner.py) decides whether to wait. Without an Eager Pool (SADDLE-p)
the micro-batches' steps are synchronised and alternate with passes: after each step a pass is
issued if the Shared Pool holds N tokens or no request can draft (``drained``).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Final

from mypy_extensions import mypyc_attr

from sim.manager.formats import PROB_ONE, TOKEN_ID, quantize_prob
from sim.manager.manager import Manager
from sim.manager.recording import RecordingManager
from sim.manager.transactions import (
    Admit,
    Device,
    Discarded,
    DiscardReason,
    EndRound,
    Resumed,
    Retire,
)
from sim.systems.base import BaseRun, Live
from sim.systems.spec import IssueRule
from traces.path import PathLists, values_along_path

# Enum.value is a Python-level property, and a mapping is read after every prediction step.
_DEVICE_NAME: Final = {device: device.value for device in Device}
_TOKEN_MASK: Final = TOKEN_ID.max_raw
SHARED_AFTER_REJECT: Final = DiscardReason.SHARED_AFTER_REJECT
EAGER_AFTER_REJECT: Final = DiscardReason.EAGER_AFTER_REJECT
STALE_CONTEXT: Final = DiscardReason.STALE_CONTEXT


class Round:
    """One speculation round of a request as the engine drafts it. A round that was replaced,
    or whose request retired, is ``stale``: a prediction step that outlived it sees so."""
    __slots__ = ("live", "slot", "base", "start", "pos", "cap", "p", "run", "stopped", "blocked",
                 "stale")

    def __init__(self, live: PooledLive, cap: int, p: list[float], run: int) -> None:
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


@dataclass(slots=True)
class PooledLive(Live):
    round: Round | None = None
    path: PathLists | None = None      # the trace's drafting_lists(), asked every round


@mypyc_attr(allow_interpreted_subclasses=True)
class PooledRun(BaseRun):
    live_type = PooledLive
    live: dict[int, PooledLive]    # type: ignore[assignment]

    def __init__(self, setup) -> None:
        super().__init__(setup)
        self.manager = (RecordingManager if setup.record else Manager)(setup.manager_config)
        self.capacity = setup.capacity
        self.overlap = setup.spec.eager
        self.issue_rule = setup.issue_rule if self.overlap else IssueRule.DRAINED
        # The rule as booleans: an enum member read per step is a lookup in its class.
        self.idle_issues = self.issue_rule in (IssueRule.TLM_IDLE, IssueRule.COST)
        self.gpu_idle_issues = self.issue_rule is IssueRule.GPU_IDLE
        self.gpu_steps: set[int] = set()   # micro-batches whose DLM step in flight uses a GPU
        self.dlm_fc = {mb: setup.mapping["dlm_fc"] for mb in range(self.n_devices)}
        self.dlm_attention_gpu = setup.mapping["dlm_attention"] == "gpu"
        self.in_pass = False
        self.refused = 0
        self.max_draft_len = setup.manager_config.max_draft_len
        assert setup.stop is not None
        self.planned = setup.stop.planned
        self.mb_wait = [False] * self.n_devices   # a micro-batch's step or monitoring in flight
        # Per micro-batch: slot -> round of the requests that can draft (what a step takes),
        # and the rounds of its step in flight.
        self.ready: list[dict[int, Round]] = [{} for _ in range(self.n_devices)]
        self.stepping: list[list[Round]] = [[] for _ in range(self.n_devices)]
        self.blocked: list[Round] = []   # rounds refused since the last Unlock (to unblock)
        self.after_drafts = [partial(self.after_draft, mb) for mb in range(self.n_devices)]
        self.after_monitors = [partial(self.after_monitor, mb) for mb in range(self.n_devices)]
        self.manager_totals: dict = {}

    @property
    def events(self) -> list:
        """Every Manager transaction with its events, when recording (else empty)."""
        return self.manager.events if isinstance(self.manager, RecordingManager) else []

    def apply(self, txn) -> list:
        out = self.manager.apply(txn)
        for event in out:
            if type(event) is Discarded:
                self.tokens.discard(event.reason, len(event.positions))
        return out

    # -- requests ------------------------------------------------------------------------
    def enter(self, lives) -> None:
        for live in lives:
            self.apply(Admit(live.slot, live.mb))
            live.path = live.trace.drafting_lists()
            self.new_round(live)

    def new_round(self, live: PooledLive) -> None:
        remaining = live.remaining
        cap = min(self.max_draft_len, remaining)
        plan = self.planned(live.trace, live.t, remaining)
        assert live.path is not None    # draft_prob_list(t, cap): its checks hold for a live request
        run, onpath, offpath, rank = live.path
        probs, accepted = values_along_path(run, onpath, offpath, rank, live.t, cap)
        if live.round is not None:
            live.round.stale = True
        rnd = live.round = Round(live, cap if plan is None else min(plan, cap), probs, accepted)
        self.update_ready(rnd)

    def update_ready(self, rnd: Round) -> None:
        """Keep ``ready`` in step with the round's state."""
        if not (rnd.stopped or rnd.blocked):
            self.ready[rnd.live.mb][rnd.slot] = rnd
        else:
            self.ready[rnd.live.mb].pop(rnd.slot, None)

    # -- prediction ----------------------------------------------------------------------
    def proceed(self) -> None:
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
        rounds = self.stepping[mb] = [ready[slot] for slot in sorted(ready)]     # slot order
        fc = self.dlm_fc[mb]
        work = self.price_dlm(tuple([rnd.start + rnd.pos for rnd in rounds]), fc=fc)
        if fc == "gpu" or self.dlm_attention_gpu:
            self.gpu_steps.add(mb)
        self.mb_wait[mb] = True
        self.devices.start_background(mb, self.dlm_lanes[mb], work, self.after_drafts[mb])

    def after_draft(self, mb: int) -> None:
        self.gpu_steps.discard(mb)
        drafting = taken = 0
        ready = self.ready[mb]
        tokens = self.tokens
        manager = self.manager     # a local, but no bound method: that would be a Python call
        for rnd in self.stepping[mb]:
            if rnd.stale:     # rejected or finished while the step ran: the token is lost
                tokens.drafted += 1
                tokens.discard(STALE_CONTEXT)
                continue
            drafting += 1
            pos = rnd.pos
            # The token id (position mod 2**17) and quantize_prob's common case written out.
            p = rnd.p[pos]
            _, stop = manager.draft(rnd.slot, mb, pos + 1, (rnd.base + pos) & _TOKEN_MASK,
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
                    # Output end or a planned length: the Controller must know (the Scheduler
                    # counts drafting requests); the token just taken is pending: no Resumed.
                    events = self.apply(EndRound(rnd.slot))
                    assert not any(type(e) is Resumed for e in events)
        tokens.drafted += taken
        mapping = self.manager.query(mb)
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
            self.proceed()

    # -- verification --------------------------------------------------------------------
    def below_capacity_ok(self) -> bool:
        """The ``tlm_idle`` input of VerifyIssue: may a pass start with fewer than N tokens
        (the issue rule, module doc)?"""
        if self.in_pass:
            return False
        if self.idle_issues:
            return True     # COST: the Manager's pass planner decides whether to wait
        if self.gpu_idle_issues:
            return not self.gpu_steps
        return not any(self.ready)

    def try_issue(self) -> bool:
        if self.in_pass:
            return False
        answer = self.manager.issue(self.below_capacity_ok(), self.capacity)
        if answer is None:
            return False
        groups, attention = answer
        self.in_pass = True
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
            # k + 1 queries for a round's first chunk, k for a later one (module doc).
            requests.append((request.context(k), k + (positions[0] == 1)))
        work = self.price_tlm(requests, attention=attention)
        self.devices.start_foreground("TLM", work, partial(self.after_pass, groups, slots))

    def after_pass(self, groups: dict[int, list[int]], slots: list[int]) -> None:
        """The pass over ``groups`` (``slots``: its requests ascending) is done: a VerifyResult
        per request in slot order, the Unlock, then each request's commit in slot order."""
        manager = self.manager
        verified = []           # (live, accepted tokens) per request, slot order
        for slot in slots:
            live = self.live[slot]
            positions = groups[slot]
            first, k = positions[0], len(positions)
            rnd = live.round
            assert rnd is not None
            a = max(0, min(k, rnd.run - (first - 1)))
            waiting = manager.result(slot, a, (rnd.base + first - 1 + a) & _TOKEN_MASK)
            if a < k:
                self.reject(1, k - a - 1)
                if waiting:
                    self.tokens.discard(SHARED_AFTER_REJECT, waiting)
            verified.append((live, a))
        discarded, resumed_list = self.manager.unlock()
        for n in discarded:
            self.tokens.discard(EAGER_AFTER_REJECT, n)
        resumed = set(resumed_list)
        self.in_pass = False
        entering = []
        for live, a in verified:
            if self.commit(live, a, live.slot in resumed):
                entering += self.refill()
            elif live.slot in resumed:
                self.new_round(live)
        self.settle_window()
        # Every refused round may draft again; stale ones stay out of ``ready``.
        blocked, self.blocked = self.blocked, []
        for rnd in blocked:
            rnd.blocked = False
            if not rnd.stale:
                self.update_ready(rnd)
        if entering:
            self.join(entering)
        if not self.live:
            return
        if self.overlap:
            # The resumed requests' DLM steps start now, before the issue rule looks at the GPUs.
            self.proceed()
            self.try_issue()
        elif not self.try_issue():
            self.proceed()

    def on_finish(self, live) -> None:
        self.apply(Retire(live.slot))
        live.round.stale = True
        self.ready[live.mb].pop(live.slot, None)

    def finish_checks(self) -> None:
        self.manager_totals = self.manager.conservation(final=True).as_dict()
