"""The Controller: per-request cumulative probability H and the stop rule.

H is UQ1.16 (formats.CUM_PROB). A round starts at H_0 = 65536 (1.0); its t-th draft token, of
raw probability p_t, gives H_t = (H_{t-1} * p_t) >> 16, and drafting stops after that token
(which is drafted) iff H_t < tau or t == max_draft_len. With an acceptance table (the calibrated
stop rule, sim/systems/registry.py) the multiplier takes the table's UQ1.16 entry for p_t
instead of p_t: H_t estimates the probability that every token of the round so far is accepted.
With a tau table (SADDLE+'s load-aware threshold; None in SADDLE) tau is the table's entry for
the number L of admitted requests, ``tau_table[tau_bucket(L)]``, updated at Admit and Retire.
"""
from __future__ import annotations

from enum import Enum
from typing import Final

from sim.manager.formats import PROB_ONE
from sim.manager.transactions import ProtocolError

ACCEPTANCE_BINS = 16


def acceptance_bin(p: int) -> int:
    """The acceptance table's entry for a raw UQ1.16 probability: floor(16 p), 1.0 in the last."""
    return ACCEPTANCE_BINS - 1 if p >> 16 else p >> 12


TAU_BUCKETS = 8


def tau_bucket(live: int) -> int:
    """The tau table's entry for ``live`` admitted requests: bit length of live - 1, at most 7
    (1, 2, 3-4, 5-8, ..., 65-128)."""
    return min(max(live - 1, 0).bit_length(), TAU_BUCKETS - 1)


def update_h(h: int, p: int) -> int:
    """One multiplier step: H_t = (H_{t-1} * p_t) >> 16."""
    return (h * p) >> 16


def stops(h: int, t: int, tau: int, max_draft_len: int) -> bool:
    """The comparator: stop after the t-th token of the round iff H_t < tau or t == max."""
    return h < tau or t >= max_draft_len


class RequestState(str, Enum):
    DRAFTING = "drafting"     # the DLM may send its next draft token
    STOPPED = "stopped"       # the round's drafting is over; waiting for its tokens' verification
    REJECTED = "rejected"     # a token of the round was rejected; a new round starts at Unlock


# Module constants: every draft token reads them (an enum member is a metaclass lookup; Final:
# compiled, a C variable, not a lookup in the module's dict).
DRAFTING: Final = RequestState.DRAFTING
STOPPED: Final = RequestState.STOPPED
REJECTED: Final = RequestState.REJECTED


class RequestSlot:
    """One request's registers. Every change of ``state`` keeps ``drafting``, the Controller's
    count of DRAFTING slots per micro-batch (the Scheduler reads it after every prediction step)."""
    __slots__ = ("microbatch", "h", "t", "pending", "next_token", "_state", "_drafting")

    def __init__(self, microbatch: int, drafting: dict[int, int]):
        self.microbatch = microbatch
        self.h = PROB_ONE
        self.t = 0                # draft tokens of the current round so far
        self.pending = 0          # tokens of the round in a pool or in flight
        self.next_token = 0       # TLM token of the latest VerifyResult (start of the next round)
        self._drafting = drafting
        self._state = DRAFTING
        drafting[microbatch] = drafting.get(microbatch, 0) + 1

    @property
    def state(self) -> RequestState:
        return self._state

    @state.setter
    def state(self, state: RequestState) -> None:
        was, self._state = self._state is DRAFTING, state
        self._drafting[self.microbatch] += (state is DRAFTING) - was

    def new_round(self) -> None:
        self.h = PROB_ONE
        self.t = 0
        self.state = DRAFTING


class Controller:
    """Up to ``max_requests`` request slots, each with its own H and round position."""

    def __init__(self, max_requests: int, max_draft_len: int, tau: int,
                 acceptance: tuple[int, ...] | None = None, tau_table: tuple[int, ...] | None = None):
        self.max_requests = max_requests
        self.max_draft_len = max_draft_len
        self.tau = tau
        self.acceptance = acceptance
        self.tau_table = tau_table
        self.live_tau = tau if tau_table is None else tau_table[0]   # the comparator's tau
        self.slots: dict[int, RequestSlot] = {}
        self._drafting: dict[int, int] = {}   # micro-batch -> slots in state DRAFTING (RequestSlot)

    def admit(self, request: int, microbatch: int) -> RequestSlot:
        if not 0 <= request < self.max_requests:
            raise ProtocolError(f"Admit: request {request} outside the {self.max_requests} Controller slots")
        if request in self.slots:
            raise ProtocolError(f"Admit: request {request} is already admitted")
        slot = self.slots[request] = RequestSlot(microbatch, self._drafting)
        self._load()
        return slot

    def _load(self) -> None:
        if self.tau_table is not None:
            self.live_tau = self.tau_table[tau_bucket(len(self.slots))]

    def slot(self, request: int, what: str) -> RequestSlot:
        slot = self.slots.get(request)
        if slot is None:
            raise ProtocolError(f"{what}: request {request} is not admitted")
        return slot

    def expect_draft(self, request: int, microbatch: int, position: int) -> RequestSlot:
        """The slot of a legal next draft token, else ProtocolError saying what was expected."""
        slot = self.slots.get(request)
        # Asked for every draft token: one combined test, each check on its own on failure.
        if slot is not None and slot.microbatch == microbatch and slot._state is DRAFTING \
                and position == slot.t + 1:
            return slot
        slot = self.slot(request, "DraftToken")
        if slot.microbatch != microbatch:
            raise ProtocolError(f"DraftToken: request {request} belongs to micro-batch {slot.microbatch}, "
                                f"not {microbatch}")
        if slot.state is not DRAFTING:
            raise ProtocolError(f"DraftToken: request {request} is {slot.state.value}, not drafting")
        if position != slot.t + 1:
            raise ProtocolError(f"DraftToken: request {request} expects round position {slot.t + 1}, "
                                f"found {position}")
        return slot

    def advance(self, slot: RequestSlot, p: int) -> bool:
        """Take one draft token of probability ``p``; True iff the round's drafting stops."""
        # update_h and stops, written out: asked for every draft token.
        table = self.acceptance
        h = slot.h = (slot.h * (p if table is None else table[acceptance_bin(p)])) >> 16
        t = slot.t = slot.t + 1
        slot.pending += 1
        if h < self.live_tau or t >= self.max_draft_len:
            slot.state = STOPPED
            return True
        return False

    def drafting(self, microbatch: int) -> int:
        """Requests of ``microbatch`` still drafting: the effective micro-batch size."""
        return self._drafting.get(microbatch, 0)

    def retire(self, request: int) -> None:
        slot = self.slots.pop(request)
        slot.state = STOPPED     # leaves the count of drafting slots
        self._load()
