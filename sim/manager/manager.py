"""The SADDLE Manager: Controller, Shared Pool, Eager Pools and Scheduler behind one interface.

``Manager(config).apply(txn)`` takes one input transaction (transactions.INPUTS) and returns
the list of output events it causes, in the order README.md documents. Illegal transactions
raise ProtocolError and leave the state unchanged; a full pool is legal and answered with Refused.

The five transactions a simulation sends most also have unboxed methods (``draft``, ``issue``,
``result``, ``unlock``, ``query``): fields as arguments, the answer without transaction or event
objects, from the same checks and state change ``apply`` builds their events from.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from sim.manager import controller
from sim.manager.config import ManagerConfig
from sim.manager.conservation import ACCEPTED, REJECTED, Conservation, Ledger
from sim.manager.controller import Controller
from sim.manager.eager_pool import EagerPools
from sim.manager.formats import (
    LOGIT,
    POOL_COUNT,
    POSITION,
    PROB_ONE,
    REQUEST_ID,
    TOKEN_ID,
    VERIFY_ID,
)
from sim.manager.planner import best_prefix, should_wait
from sim.manager.scheduler import Scheduler, dlm_fc_estimate, tlm_attention_estimate
from sim.manager.shared_pool import PoolEntry, SharedPool
from sim.manager.softmax import SoftmaxParams, softmax_greedy
from sim.manager.transactions import (
    Admit,
    Admitted,
    Device,
    Discarded,
    DiscardReason,
    Drafted,
    DraftLogits,
    DraftToken,
    EndRound,
    Issued,
    Locked,
    Mapping,
    Moved,
    NotIssued,
    NotIssuedReason,
    Op,
    Pool,
    ProtocolError,
    Refused,
    Resumed,
    Retire,
    Retired,
    RoundEnded,
    SchedulerQuery,
    SelectedToken,
    Unlock,
    Unlocked,
    Verified,
    VerifyIssue,
    VerifyResult,
)

# Module constants for the per-token paths: an enum member or value is a metaclass lookup or
# a property. Final: compiled, each is a C variable, not a lookup in the module's dict.
SHARED: Final = Pool.SHARED
EAGER: Final = Pool.EAGER
_REJECTED_PREFIX: Final = DiscardReason.REJECTED_PREFIX.value
_SHARED_AFTER_REJECT: Final = DiscardReason.SHARED_AFTER_REJECT.value
_EAGER_AFTER_REJECT: Final = DiscardReason.EAGER_AFTER_REJECT.value
_REQUEST_MAX: Final = REQUEST_ID.max_raw
_POSITION_MAX: Final = POSITION.max_raw
_TOKEN_MAX: Final = TOKEN_ID.max_raw


class Manager:
    """``softmax``: the Controller's softmax unit sizes, needed only for DraftLogits."""

    def __init__(self, config: ManagerConfig | None = None, softmax: SoftmaxParams | None = None):
        self.config = config if config is not None else ManagerConfig.load()
        self.softmax = softmax
        c = self.config
        self.controller = Controller(c.max_requests, c.max_draft_len, c.tau, c.acceptance_table,
                                     c.tau_table)
        self.shared_pool = SharedPool(c.shared_entries, c.aging_passes)
        self.eager_pools = EagerPools(c.micro_batches, c.eager_entries)
        self.scheduler = Scheduler(c.dynamic_mapping, c.dlm_fc_threshold, c.tlm_attention_threshold,
                                   c.static_dlm_fc, c.static_tlm_attention,
                                   c.dlm_fc_threshold_locked)
        self.planner = c.pass_costs          # SADDLE+'s pass planner (planner.py); None: off
        self._waits = 0                      # its consecutive waits while the TLM is idle
        self.ledger = Ledger()
        self._micro_batches = c.micro_batches
        self.verification = 0                 # id of the current / next verification
        self._in_pass: set[int] = set()       # requests with tokens in the current verification
        self._resulted: set[int] = set()
        self._rejected: dict[int, int] = {}   # request -> micro-batch, rejected in this pass
        # Per micro-batch, its drafting count -> the SchedulerQuery's answer (query).
        self._dlm_fc_mappings: list[dict[object, Mapping]] = [{} for _ in range(c.micro_batches)]
        self._handlers: dict[type, Callable[[Any], list]] = {
            Admit: self._admit, DraftToken: self._draft, DraftLogits: self._draft_logits,
            VerifyIssue: self._issue, VerifyResult: self._result, Unlock: self._unlock,
            SchedulerQuery: self._query, EndRound: self._end_round, Retire: self._retire,
        }

    def apply(self, txn) -> list:
        handler = self._handlers.get(type(txn))
        if handler is None:
            raise ProtocolError(f"not a Manager input transaction: {txn!r}")
        return handler(txn)

    # ------------------------------------------------------------------ inspection

    @property
    def requests_in_pass(self) -> frozenset[int]:
        """Requests with tokens in the current verification (empty when unlocked)."""
        return frozenset(self._in_pass)

    def awaiting_results(self) -> list[int]:
        """Requests of the current verification whose VerifyResult has not arrived, ascending."""
        return sorted(self._in_pass - self._resulted)

    def conservation(self, final: bool = False) -> Conservation:
        """Ledger totals, checked against the tokens the pools hold; ConservationError if off."""
        held = self.shared_pool.serials() | self.eager_pools.serials()
        return self.ledger.check(held, final=final)

    # ------------------------------------------------------------------ handlers

    def _microbatch(self, mb: int, what: str) -> None:
        _check_int(mb, 0, self._micro_batches - 1, f"{what}: microbatch")

    def _admit(self, txn: Admit) -> list:
        _field(REQUEST_ID, txn.request, "Admit.request")
        self._microbatch(txn.microbatch, "Admit")
        self.controller.admit(txn.request, txn.microbatch)
        return [Admitted(txn.request, txn.microbatch)]

    def draft(self, request: int, microbatch: int, position: int, token: int, prob: int
              ) -> tuple[Pool, bool | None]:
        """``apply(DraftToken(...))`` unboxed: ``(pool, stop)`` for Drafted (its ``h`` is
        ``controller.slots[request].h``), ``(pool, None)`` for Refused."""
        # One per draft token: one combined range test, the detailed one on failure.
        if not (type(request) is int and type(microbatch) is int and type(position) is int
                and type(token) is int and type(prob) is int and 0 <= request <= _REQUEST_MAX
                and 0 <= microbatch < self._micro_batches and 0 <= position <= _POSITION_MAX
                and 0 <= token <= _TOKEN_MAX and 0 <= prob <= PROB_ONE):
            _field(REQUEST_ID, request, "DraftToken.request")
            self._microbatch(microbatch, "DraftToken")
            _field(POSITION, position, "DraftToken.position")
            _field(TOKEN_ID, token, "DraftToken.token")
            _check_int(prob, 0, PROB_ONE, "DraftToken.prob", "raw UQ1.16")
        slot = self.controller.expect_draft(request, microbatch, position)
        shared, eager = self.shared_pool, self.eager_pools
        if not shared.locked and not eager.holds(request, microbatch):
            pool, room = SHARED, shared.free > 0
        else:
            pool, room = EAGER, eager.free(microbatch) > 0
        if not room:
            return pool, None
        h_prev = slot.h
        stop = self.controller.advance(slot, prob)
        entry = PoolEntry(request, microbatch, position, token, slot.h, self.ledger.open(), 0,
                          h_prev, stop)
        (shared if pool is SHARED else eager).insert(entry)
        return pool, stop

    def _draft(self, txn: DraftToken) -> list:
        # The Manager's own draft, not an override's: RecordingManager.draft comes through here.
        pool, stop = Manager.draft(self, txn.request, txn.microbatch, txn.position, txn.token, txn.prob)
        if stop is None:
            return [Refused(txn.request, txn.position, pool)]
        return [Drafted(txn.request, txn.position, pool, self.controller.slots[txn.request].h, stop)]

    def _draft_logits(self, txn: DraftLogits) -> list:
        if self.softmax is None:
            raise ProtocolError("DraftLogits: this Manager has no softmax unit (Manager(config, softmax=...))")
        logits = txn.logits
        if not isinstance(logits, tuple) or not 1 <= len(logits) <= self.softmax.vocab:
            raise ProtocolError(f"DraftLogits.logits: expected 1..{self.softmax.vocab} logits, "
                                f"found {len(logits) if isinstance(logits, tuple) else logits!r}")
        for i, x in enumerate(logits):
            _field(LOGIT, x, f"DraftLogits.logits[{i}]")
        token, prob = softmax_greedy(logits, self.softmax)
        return self._draft(DraftToken(txn.request, txn.microbatch, txn.position, token, prob))

    def issue(self, tlm_idle: bool, capacity: int) -> tuple[dict[int, list[int]], Device] | None:
        """``apply(VerifyIssue(...))`` unboxed: None for NotIssued, else (the Issued tokens'
        positions per request, ``positions_by_request``; the Mapping's TLM attention device)."""
        selection = self._select(tlm_idle, capacity)
        if isinstance(selection, NotIssued):
            return None
        groups: dict[int, list[int]] = {}       # positions_by_request's, on typed entries
        for e in selection[0]:
            groups.setdefault(e.request, []).append(e.position)
        return groups, selection[1].device

    def _issue(self, txn: VerifyIssue) -> list:
        selection = self._select(txn.tlm_idle, txn.capacity)
        if isinstance(selection, NotIssued):
            return [selection]
        chosen, mapping = selection
        vid = self.verification
        return [Issued(vid, tuple(SelectedToken(e.request, e.position, e.token, e.h) for e in chosen)),
                Locked(vid), mapping]

    def _select(self, tlm_idle: bool, capacity: int) -> NotIssued | tuple[list[PoolEntry], Mapping]:
        """VerifyIssue's checks and state change: NotIssued, or (the selection in greedy order,
        TLM attention's Mapping)."""
        if not isinstance(tlm_idle, bool):
            raise ProtocolError(f"VerifyIssue.tlm_idle: expected a boolean, found {tlm_idle!r}")
        _check_int(capacity, 1, POOL_COUNT.max_raw, "VerifyIssue.capacity")
        shared = self.shared_pool
        if shared.locked:
            return NotIssued(NotIssuedReason.LOCKED, shared.waiting_count)
        available = shared.count
        if available == 0:
            return NotIssued(NotIssuedReason.EMPTY, 0)
        if available < capacity and not tlm_idle:
            return NotIssued(NotIssuedReason.BELOW_CAPACITY, available)
        costs = self.planner
        if costs is None:
            chosen = shared.select(capacity)
        else:
            order = shared.ordered()
            best = best_prefix(order, shared.capacity if costs.select else capacity, costs)
            if available < capacity and costs.issue and self._waits < costs.wait_bound \
                    and should_wait(best, self._drafting(), costs):
                self._waits += 1
                return NotIssued(NotIssuedReason.BELOW_CAPACITY, available)
            self._waits = 0
            chosen = shared.select(best[0], order)
        requests = [e.request for e in chosen]
        self._in_pass = set(requests)
        num, den = tlm_attention_estimate(requests)
        return chosen, Mapping(Op.TLM_ATTENTION, self.scheduler.tlm_attention(num, den), num, den, -1)

    def _drafting(self) -> list[tuple[int, bool]]:
        """(H, has tokens in a pool) of every drafting request: the planner's wait inputs."""
        return [(slot.h, slot.pending > 0) for slot in self.controller.slots.values()
                if slot.state is controller.DRAFTING]

    def result(self, request: int, accepted: int, corrected_token: int) -> int:
        """``apply(VerifyResult(...))`` unboxed: how many waiting tokens it discarded
        (``shared_after_reject``); the caller knows the rest (Verified: rejected iff accepted
        < k; ``rejected_prefix``: the k - accepted - 1 after the rejected one)."""
        return len(self._verify(request, accepted, corrected_token)[1])

    def _result(self, txn: VerifyResult) -> list:
        request, a = txn.request, txn.accepted
        entries, waiting = self._verify(request, a, txn.corrected_token)
        rejected = a < len(entries)
        events: list = [Verified(request, entries[0].position, a, rejected)]
        if rejected:
            events += _discarded(request, entries[a + 1:], DiscardReason.REJECTED_PREFIX)
            events += _discarded(request, waiting, DiscardReason.SHARED_AFTER_REJECT)
        return events

    def _verify(self, request: int, a: int, corrected_token: int) -> tuple[list[PoolEntry], list[PoolEntry]]:
        """VerifyResult's checks and state change: (its tokens in flight, its waiting tokens
        discarded after a rejection)."""
        if not (type(request) is int and 0 <= request <= _REQUEST_MAX
                and type(corrected_token) is int and 0 <= corrected_token <= _TOKEN_MAX):
            _field(REQUEST_ID, request, "VerifyResult.request")
            _field(TOKEN_ID, corrected_token, "VerifyResult.corrected_token")
        if request not in self._in_pass:
            raise ProtocolError(f"VerifyResult: request {request} has no token in the current verification")
        if request in self._resulted:
            raise ProtocolError(f"VerifyResult: request {request} already has its result for this verification")
        k = self.shared_pool.in_flight_count(request)
        if isinstance(a, bool) or not isinstance(a, int) or not 0 <= a <= k:
            raise ProtocolError(f"VerifyResult.accepted: request {request} had {k} token(s) "
                                f"in flight, found accepted={a!r}")
        entries = self.shared_pool.release(request)
        self._resulted.add(request)
        slot = self.controller.slots[request]
        slot.next_token = corrected_token
        slot.pending -= k
        if a == k:
            self.ledger.close_all([e.serial for e in entries], ACCEPTED)
            return entries, []
        # (Empty groups closed or not, the ledger is the same: skipped.)
        if a:
            self.ledger.close_all([e.serial for e in entries[:a]], ACCEPTED)
        self.ledger.close(entries[a].serial, REJECTED)
        if a + 1 < k:
            self._close(entries[a + 1:], _REJECTED_PREFIX)
        waiting = self.shared_pool.invalidate(request)
        if waiting:
            slot.pending -= len(waiting)
            self._close(waiting, _SHARED_AFTER_REJECT)
        slot.state = controller.REJECTED
        self._rejected[request] = slot.microbatch
        return entries, waiting

    def unlock(self) -> tuple[list[int], list[int]]:
        """``apply(Unlock())`` unboxed: (the Discarded events' sizes, ascending request; the
        requests resumed, ascending)."""
        discarded, _, resumed = self._unlock_state()
        return [len(entries) for entries in discarded.values()], [r for r, _, _ in resumed]

    def _unlock(self, txn: Unlock) -> list:
        verification = self.verification
        discarded, moved, resumed = self._unlock_state()
        events: list = [Unlocked(verification)]
        for request, entries in discarded.items():
            events += _discarded(request, entries, DiscardReason.EAGER_AFTER_REJECT)
        events += _moved_events(moved)
        events += [Resumed(*r) for r in resumed]
        return events

    def _unlock_state(self) -> tuple[dict[int, list[PoolEntry]], dict[int, list[PoolEntry]],
                                     list[tuple[int, int, bool]]]:
        """Unlock's checks and state change: (eager tokens discarded, moved, per request;
        (request, start token, after_reject) per resumed request)."""
        shared = self.shared_pool
        if not shared.locked:
            raise ProtocolError("Unlock: the Shared Pool is not locked")
        if len(self._resulted) != len(self._in_pass):
            missing = sorted(self._in_pass - self._resulted)
            raise ProtocolError(f"Unlock: no VerifyResult yet for request(s) {missing}")
        shared.unlock()
        moved, discarded = self.eager_pools.on_unlock(self._rejected, shared)
        slots = self.controller.slots
        for request, entries in discarded.items():
            slots[request].pending -= len(entries)
            self._close(entries, _EAGER_AFTER_REJECT)
        resumed = []
        for request in sorted(self._in_pass):
            slot = slots[request]
            after_reject = slot.state is controller.REJECTED
            if after_reject or (slot.state is controller.STOPPED and slot.pending == 0):
                assert slot.pending == 0, f"request {request} restarts with {slot.pending} pending tokens"
                slot.new_round()
                resumed.append((request, slot.next_token, after_reject))
        self.verification = (self.verification + 1) & VERIFY_ID.max_raw
        self._in_pass, self._resulted, self._rejected = set(), set(), {}
        return discarded, moved, resumed

    def query(self, microbatch: int) -> Mapping:
        """``apply(SchedulerQuery(microbatch))``'s one event."""
        if type(microbatch) is not int or not 0 <= microbatch < self._micro_batches:
            self._microbatch(microbatch, "SchedulerQuery")
        drafting = self.controller.drafting(microbatch)
        # A pure function of the drafting count (and, pass-aware, the lock): built once.
        key = drafting if self.scheduler.dlm_fc_threshold_locked is None \
            else (drafting, self.shared_pool.locked)
        mapping = self._dlm_fc_mappings[microbatch].get(key)
        if mapping is None:
            num, den = dlm_fc_estimate(drafting)
            mapping = self._dlm_fc_mappings[microbatch][key] = Mapping(
                Op.DLM_FC, self.scheduler.dlm_fc(num, den, self.shared_pool.locked), num, den,
                microbatch)
        return mapping

    def _query(self, txn: SchedulerQuery) -> list:
        return [Manager.query(self, txn.microbatch)]    # not an override's (as _draft)

    def _end_round(self, txn: EndRound) -> list:
        _field(REQUEST_ID, txn.request, "EndRound.request")
        slot = self.controller.slot(txn.request, "EndRound")
        if slot.state is not controller.DRAFTING:
            raise ProtocolError(f"EndRound: request {txn.request} is {slot.state.value}, not drafting")
        if slot.t == 0:
            raise ProtocolError(f"EndRound: request {txn.request} has no draft token in this round")
        slot.state = controller.STOPPED
        events: list = [RoundEnded(txn.request, slot.t, slot.h)]
        if slot.pending == 0:
            # Every token of the round is already verified and accepted: the next round starts
            # from the TLM token of the latest result, as it would have at that Unlock.
            slot.new_round()
            events.append(Resumed(txn.request, slot.next_token, False))
        return events

    def _retire(self, txn: Retire) -> list:
        _field(REQUEST_ID, txn.request, "Retire.request")
        request = txn.request
        slot = self.controller.slot(request, "Retire")
        if request in self._in_pass:
            raise ProtocolError(f"Retire: request {request} is in the current verification; retire it after Unlock")
        entries = self.shared_pool.invalidate(request) + self.eager_pools.take(request, slot.microbatch)
        self._close(entries, DiscardReason.REQUEST_RETIRED.value)
        events = _discarded(request, entries, DiscardReason.REQUEST_RETIRED)
        self.controller.retire(request)
        events.append(Retired(request))
        if not self.shared_pool.locked:
            events += _moved_events(self.eager_pools.drain_into(self.shared_pool))
        return events

    def _close(self, entries: list[PoolEntry], reason: str) -> None:
        """``entries`` discarded for ``reason`` (a DiscardReason's value) in the ledger."""
        self.ledger.close_all([e.serial for e in entries], reason)


def positions_by_request(tokens) -> dict[int, list[int]]:
    """The positions of selected tokens (PoolEntry or SelectedToken, greedy order) per request,
    ascending (the prefix property), requests in the order of their first token."""
    groups: dict[int, list[int]] = {}
    for tok in tokens:
        groups.setdefault(tok.request, []).append(tok.position)
    return groups


def _check_int(value, low: int, high: int, what: str, kind: str = "an integer") -> None:
    if type(value) is not int or not low <= value <= high:
        raise ProtocolError(f"{what}: expected {kind} in [{low}, {high}], found {value!r}")


def _field(fmt, value, what: str) -> None:
    _check_int(value, fmt.min_raw, fmt.max_raw, what)


def _discarded(request: int, entries: list[PoolEntry], reason: DiscardReason) -> list:
    """The Discarded event of ``entries`` (none if empty), their ledger fate already closed."""
    if not entries:
        return []
    return [Discarded(request, tuple(e.position for e in entries), reason)]


def _moved_events(moved: dict[int, list[PoolEntry]]) -> list:
    return [Moved(request, entries[0].microbatch, tuple(e.position for e in entries))
            for request, entries in moved.items()]
