"""``Manager.draft``, ``issue``, ``result``, ``unlock`` and ``query`` (DraftToken, VerifyIssue,
VerifyResult, Unlock and SchedulerQuery with their fields as arguments and their answers
unboxed, what the simulator sends when it is not recording) are their transactions: on long
random streams they leave the same state and give the answers the events would."""
import pytest

from hw.flow.manager_random import generate
from sim.manager import Manager
from sim.manager.manager import positions_by_request
from sim.manager.transactions import (
    Discarded,
    DiscardReason,
    Drafted,
    DraftToken,
    Issued,
    Mapping,
    Op,
    ProtocolError,
    Refused,
    Resumed,
    SchedulerQuery,
    Unlock,
    VerifyIssue,
    VerifyResult,
)
from tests.sim.manager.helpers import config

SMALL = config(max_requests=12, max_draft_len=8, tau=9000, shared_entries=24, eager_entries=16,
               micro_batches=4)


def _state(m: Manager):
    slots = {r: (s.microbatch, s.h, s.t, s.state, s.pending, s.next_token) for r, s in m.controller.slots.items()}
    return slots, m.shared_pool.serials(), m.eager_pools.serials(), m.conservation().as_dict()


@pytest.mark.parametrize("seed", (1, 2))
def test_draft_is_the_draft_token_transaction(seed):
    boxed, unboxed = Manager(SMALL), Manager(SMALL)
    answers = {Drafted: 0, Refused: 0}
    for txn in generate(SMALL, seed, 4000):
        events = boxed.apply(txn)
        if type(txn) is DraftToken:
            pool, stop = unboxed.draft(txn.request, txn.microbatch, txn.position, txn.token, txn.prob)
            (event,) = events
            answers[type(event)] += 1
            if stop is None:
                assert event == Refused(txn.request, txn.position, pool)
            else:
                assert event == Drafted(txn.request, txn.position, pool, unboxed.controller.slots[txn.request].h,
                                        stop)
        else:
            assert unboxed.apply(txn) == events
        assert _state(unboxed) == _state(boxed)
    assert answers[Drafted] > 1000 and answers[Refused] > 50


def test_draft_checks_its_fields_like_the_transaction():
    m = Manager(SMALL)
    with pytest.raises(ProtocolError, match="DraftToken.prob: expected raw UQ1.16"):
        m.draft(0, 0, 1, 5, 65537)
    with pytest.raises(ProtocolError, match="DraftToken: request 0 is not admitted"):
        m.draft(0, 0, 1, 5, 100)


@pytest.mark.parametrize("seed", (3, 4))
def test_issue_result_unlock_query_are_their_transactions(seed):
    boxed, unboxed = Manager(SMALL), Manager(SMALL)
    seen = {VerifyIssue: 0, VerifyResult: 0, Unlock: 0, SchedulerQuery: 0, "issued": 0, "rejected": 0,
            "resumed": 0}
    for txn in generate(SMALL, seed, 4000):
        events = boxed.apply(txn)
        discarded = [e for e in events if type(e) is Discarded]
        if type(txn) is VerifyIssue:
            answer = unboxed.issue(txn.tlm_idle, txn.capacity)
            if type(events[0]) is Issued:
                (mapping,) = [e for e in events if type(e) is Mapping and e.op is Op.TLM_ATTENTION]
                assert answer == (positions_by_request(events[0].tokens), mapping.device)
                seen["issued"] += 1
            else:
                assert answer is None
        elif type(txn) is SchedulerQuery:
            assert [unboxed.query(txn.microbatch)] == events
        elif type(txn) is VerifyResult:
            waiting = unboxed.result(txn.request, txn.accepted, txn.corrected_token)
            assert waiting == sum(len(e.positions) for e in discarded
                                  if e.reason is DiscardReason.SHARED_AFTER_REJECT)
            seen["rejected"] += events[0].rejected
        elif type(txn) is Unlock:
            eager, resumed = unboxed.unlock()
            assert eager == [len(e.positions) for e in discarded]
            assert resumed == [e.request for e in events if type(e) is Resumed]
            seen["resumed"] += len(resumed)
        else:
            assert unboxed.apply(txn) == events
        seen[type(txn)] = seen.get(type(txn), 0) + 1
        assert _state(unboxed) == _state(boxed)
        assert unboxed.verification == boxed.verification
    assert seen[VerifyIssue] > 100 and seen["issued"] > 50 and seen[SchedulerQuery] > 100
    assert seen[VerifyResult] > 100 and seen[Unlock] > 50 and seen["rejected"] > 20 and seen["resumed"] > 50


def test_issue_result_unlock_query_check_like_their_transactions():
    m = Manager(SMALL)
    with pytest.raises(ProtocolError, match="VerifyIssue.capacity: expected an integer"):
        m.issue(True, 0)
    with pytest.raises(ProtocolError, match="SchedulerQuery: microbatch: expected an integer"):
        m.query(4)
    with pytest.raises(ProtocolError, match="VerifyResult.request: expected an integer"):
        m.result(-1, 0, 0)
    with pytest.raises(ProtocolError, match="VerifyResult: request 0 has no token in the current verification"):
        m.result(0, 0, 0)
    with pytest.raises(ProtocolError, match="Unlock: the Shared Pool is not locked"):
        m.unlock()
