"""A Manager that keeps every transaction it is sent with the events it answered
(``events``: a list of ``(transaction, [event, ...])``), for co-verification of the RTL and
replay. The unboxed calls a simulation makes (``draft``, ``issue``, ``query``, ``result``,
``unlock``) go through the boxed transaction, so they are recorded too, and answer as the
plain Manager's do."""
from __future__ import annotations

from sim.manager.manager import Manager, positions_by_request
from sim.manager.transactions import (
    Device,
    Discarded,
    DiscardReason,
    DraftToken,
    Issued,
    Mapping,
    Op,
    Pool,
    Refused,
    Resumed,
    SchedulerQuery,
    Unlock,
    VerifyIssue,
    VerifyResult,
)


class RecordingManager(Manager):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.events: list[tuple[object, list]] = []

    def apply(self, txn) -> list:
        out = super().apply(txn)
        self.events.append((txn, out))
        return out

    def draft(self, request: int, microbatch: int, position: int, token: int, prob: int
              ) -> tuple[Pool, bool | None]:
        (out,) = self.apply(DraftToken(request, microbatch, position, token, prob))
        return out.pool, None if type(out) is Refused else out.stop

    def issue(self, tlm_idle: bool, capacity: int) -> tuple[dict[int, list[int]], Device] | None:
        out = self.apply(VerifyIssue(tlm_idle, capacity))
        if type(out[0]) is not Issued:
            return None
        (mapping,) = [e for e in out if type(e) is Mapping and e.op is Op.TLM_ATTENTION]
        return positions_by_request(out[0].tokens), mapping.device

    def query(self, microbatch: int) -> Mapping:
        (mapping,) = self.apply(SchedulerQuery(microbatch))
        return mapping

    def result(self, request: int, accepted: int, corrected_token: int) -> int:
        out = self.apply(VerifyResult(request, accepted, corrected_token))
        return sum(len(e.positions) for e in out
                   if type(e) is Discarded and e.reason is DiscardReason.SHARED_AFTER_REJECT)

    def unlock(self) -> tuple[list[int], list[int]]:
        out = self.apply(Unlock())
        return ([len(e.positions) for e in out if type(e) is Discarded],
                [e.request for e in out if type(e) is Resumed])
