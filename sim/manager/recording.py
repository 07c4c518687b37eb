"""A Manager that keeps every transaction it is sent with the events it answered
(``events``: a list of ``(transaction, [event, ...])``), for co-verification of the RTL and
replay. The unboxed calls a simulation makes (``draft``, ``issue``, ``query``, ``result``,
``unlock``) go through the boxed transaction, so they are recorded too, and answer as the
plain Manager's do."""
from __future__ import annotations

from sim.manager import transactions as tx
from sim.manager.config import ManagerConfig
from sim.manager.manager import Manager, positions_by_request
from sim.manager.softmax import SoftmaxParams
from sim.manager.transactions import Device, Mapping, Pool


class RecordingManager(Manager):
    def __init__(self, config: ManagerConfig | None = None, softmax: SoftmaxParams | None = None) -> None:
        super().__init__(config, softmax)
        self.events: list[tuple[object, list]] = []

    def apply(self, txn) -> list:
        out = super().apply(txn)
        self.events.append((txn, out))
        return out

    def draft(self, request: int, microbatch: int, position: int, token: int, prob: int
              ) -> tuple[Pool, bool | None]:
        (out,) = self.apply(tx.DraftToken(request, microbatch, position, token, prob))
        return out.pool, None if type(out) is tx.Refused else out.stop

    def issue(self, tlm_idle: bool, capacity: int) -> tuple[dict[int, list[int]], Device] | None:
        out = self.apply(tx.VerifyIssue(tlm_idle, capacity))
        if type(out[0]) is not tx.Issued:
            return None
        issued, _, mapping = out
        return positions_by_request(issued.tokens), mapping.device

    def query(self, microbatch: int) -> Mapping:
        (mapping,) = self.apply(tx.SchedulerQuery(microbatch))
        return mapping

    def result(self, request: int, accepted: int, corrected_token: int) -> int:
        out = self.apply(tx.VerifyResult(request, accepted, corrected_token))
        return sum(len(e.positions) for e in out
                   if type(e) is tx.Discarded and e.reason is tx.DiscardReason.SHARED_AFTER_REJECT)

    def unlock(self) -> tuple[list[int], list[int]]:
        out = self.apply(tx.Unlock())
        return ([len(e.positions) for e in out if type(e) is tx.Discarded],
                [e.request for e in out if type(e) is tx.Resumed])
