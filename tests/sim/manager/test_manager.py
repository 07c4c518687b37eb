"""Hand-made cases of the Manager top: issue rule, lock, results, unlock, back-pressure."""
import pytest

from sim.manager.transactions import (
    Admit,
    Discarded,
    DiscardReason,
    Drafted,
    DraftToken,
    EndRound,
    Issued,
    Locked,
    Moved,
    NotIssued,
    NotIssuedReason,
    Pool,
    ProtocolError,
    Refused,
    Resumed,
    Retire,
    Retired,
    RoundEnded,
    Unlock,
    Unlocked,
    Verified,
    VerifyIssue,
    VerifyResult,
)
from tests.sim.manager.helpers import admit, draft, manager, of

P1 = 65536


def issued_positions(events):
    (issued,) = of(events, Issued)
    return [(t.request, t.position) for t in issued.tokens]


def test_draft_token_goes_to_shared_pool_with_h_and_decision():
    m = manager(tau=32768)
    admit(m, (0, 0))
    assert draft(m, 0, 60000, 30000) == [Drafted(0, 1, Pool.SHARED, 60000, False),
                                          Drafted(0, 2, Pool.SHARED, 27465, True)]
    with pytest.raises(ProtocolError, match="stopped, not drafting"):
        draft(m, 0, P1)


def test_issue_rule_capacity_or_idle():
    m = manager()
    assert m.apply(VerifyIssue(True, 4)) == [NotIssued(NotIssuedReason.EMPTY, 0)]
    admit(m, (0, 0), (1, 1))
    draft(m, 0, 60000, 50000)
    draft(m, 1, 55000)
    assert m.apply(VerifyIssue(False, 4)) == [NotIssued(NotIssuedReason.BELOW_CAPACITY, 3)]
    events = m.apply(VerifyIssue(False, 3))                    # pool holds one pass: issue
    assert issued_positions(events) == [(0, 1), (1, 1), (0, 2)]
    assert of(events, Locked) == [Locked(0)]
    assert m.apply(VerifyIssue(True, 1)) == [NotIssued(NotIssuedReason.LOCKED, 0)]


def test_idle_tlm_takes_what_the_pool_holds():
    m = manager()
    admit(m, (0, 0))
    draft(m, 0, 40000)
    events = m.apply(VerifyIssue(True, 64))
    (issued,) = of(events, Issued)
    assert [(t.request, t.position, t.token, t.h) for t in issued.tokens] == [(0, 1, 7, 40000)]


def test_ties_across_and_within_requests():
    m = manager()
    admit(m, (2, 0), (1, 1), (0, 2))
    draft(m, 2, 32768, P1)            # H 32768, 32768: same H within a request
    draft(m, 1, 32768)                # H 32768: ties request 2
    draft(m, 0, 16384)
    events = m.apply(VerifyIssue(True, 3))
    assert issued_positions(events) == [(1, 1), (2, 1), (2, 2)]


def test_while_locked_tokens_go_to_the_eager_pool_then_move():
    m = manager()
    admit(m, (0, 0), (1, 0))
    draft(m, 0, 60000)
    draft(m, 1, 60000)
    m.apply(VerifyIssue(True, 8))
    assert draft(m, 0, 60000) == [Drafted(0, 2, Pool.EAGER, 54931, False)]
    assert m.eager_pools.count(0) == 1
    assert m.apply(VerifyResult(0, 1, 11)) == [Verified(0, 1, 1, False)]
    assert m.apply(VerifyResult(1, 1, 12)) == [Verified(1, 1, 1, False)]
    assert m.apply(Unlock()) == [Unlocked(0), Moved(0, 0, (2,))]
    assert m.shared_pool.lookup(0)[0].position == 2 and m.eager_pools.count(0) == 0
    assert draft(m, 0, P1)[0].pool is Pool.SHARED


def test_reject_at_first_token_discards_everything_after_it():
    m = manager(max_draft_len=4)
    admit(m, (3, 1))
    draft(m, 3, P1, 60000, 60000)
    m.apply(VerifyIssue(True, 2))                 # positions 1, 2 in flight; 3 waits
    draft(m, 3, 60000)                            # position 4: eager, reaches max length
    events = m.apply(VerifyResult(3, 0, 4242))
    assert events == [Verified(3, 1, 0, True),
                      Discarded(3, (2,), DiscardReason.REJECTED_PREFIX),
                      Discarded(3, (3,), DiscardReason.SHARED_AFTER_REJECT)]
    with pytest.raises(ProtocolError, match="rejected, not drafting"):
        draft(m, 3, P1)
    assert m.apply(Unlock()) == [Unlocked(0), Discarded(3, (4,), DiscardReason.EAGER_AFTER_REJECT),
                                 Resumed(3, 4242, True)]
    slot = m.controller.slots[3]
    assert (slot.h, slot.t, slot.pending) == (P1, 0, 0)
    assert draft(m, 3, 30000) == [Drafted(3, 1, Pool.SHARED, 30000, False)]
    totals = m.conservation()
    assert (totals.drafted, totals.rejected, totals.pending) == (5, 1, 1)
    assert totals.discarded == {"rejected_prefix": 1, "shared_after_reject": 1,
                                "eager_after_reject": 1, "request_retired": 0}


def test_reject_in_the_middle():
    m = manager()
    admit(m, (0, 0))
    draft(m, 0, P1, P1, P1, P1)
    m.apply(VerifyIssue(True, 4))
    assert m.apply(VerifyResult(0, 2, 9)) == [Verified(0, 1, 2, True),
                                              Discarded(0, (4,), DiscardReason.REJECTED_PREFIX)]
    assert m.conservation().accepted == 2


def test_all_accepted_stopped_request_starts_a_new_round_with_the_bonus_token():
    m = manager(tau=40000)
    admit(m, (0, 0), (1, 1))
    draft(m, 0, 30000)                            # stops at once
    draft(m, 1, 60000)                            # keeps drafting
    m.apply(VerifyIssue(True, 8))
    m.apply(VerifyResult(0, 1, 77))
    m.apply(VerifyResult(1, 1, 78))
    assert m.apply(Unlock()) == [Unlocked(0), Resumed(0, 77, False)]
    assert draft(m, 0, P1)[0].position == 1       # new round
    assert draft(m, 1, P1) == [Drafted(1, 2, Pool.SHARED, 60000, False)]   # same round goes on


def test_partially_selected_stopped_request_waits_for_its_remaining_tokens():
    m = manager(tau=40000)
    admit(m, (0, 0))
    draft(m, 0, 65000, 65000, 30000)              # stops at position 3
    m.apply(VerifyIssue(True, 2))
    m.apply(VerifyResult(0, 2, 5))
    assert m.apply(Unlock()) == [Unlocked(0)]     # position 3 still waits: no new round
    events = m.apply(VerifyIssue(True, 2))
    assert issued_positions(events) == [(0, 3)]
    m.apply(VerifyResult(0, 1, 6))
    assert m.apply(Unlock()) == [Unlocked(1), Resumed(0, 6, False)]
    assert m.conservation(final=True).accepted == 3


def test_full_shared_pool_applies_back_pressure_without_touching_h():
    m = manager(shared_entries=2)
    admit(m, (0, 0), (1, 1))
    draft(m, 0, 60000, 60000)
    assert draft(m, 1, 50000) == [Refused(1, 1, Pool.SHARED)]
    assert draft(m, 1, 50000) == [Refused(1, 1, Pool.SHARED)]    # retry, still full
    slot = m.controller.slots[1]
    assert (slot.h, slot.t, slot.pending) == (65536, 0, 0)
    m.apply(VerifyIssue(False, 2))                # full pass: issued although the TLM is busy
    assert draft(m, 1, 50000) == [Drafted(1, 1, Pool.EAGER, 50000, False)]


def test_full_eager_pool_applies_back_pressure_per_microbatch():
    m = manager(eager_entries=4, micro_batches=4)                 # one eager entry each
    admit(m, (0, 0), (1, 0), (2, 1))
    for r in (0, 1, 2):
        draft(m, r, 60000)
    m.apply(VerifyIssue(True, 8))
    assert draft(m, 0, 60000)[0].pool is Pool.EAGER
    assert draft(m, 1, 60000) == [Refused(1, 2, Pool.EAGER)]       # micro-batch 0 is full
    assert draft(m, 2, 60000)[0].pool is Pool.EAGER                # micro-batch 1 is not


def test_eager_tokens_that_do_not_fit_stay_and_keep_their_order():
    m = manager(shared_entries=3, eager_entries=16, micro_batches=4)
    admit(m, (0, 0), (1, 1))
    draft(m, 0, P1)
    draft(m, 1, P1)
    m.apply(VerifyIssue(True, 8))
    draft(m, 0, P1, P1)                           # eager: 0@2, 0@3
    draft(m, 1, P1, P1)                           # eager: 1@2, 1@3
    m.apply(VerifyResult(0, 1, 1))
    m.apply(VerifyResult(1, 1, 1))
    assert m.apply(Unlock()) == [Unlocked(0), Moved(0, 0, (2, 3)), Moved(1, 1, (2,))]
    # request 1 still has position 3 in its Eager Pool: its next token queues behind it
    assert draft(m, 1, P1) == [Drafted(1, 4, Pool.EAGER, P1, False)]
    assert draft(m, 0, P1) == [Refused(0, 4, Pool.SHARED)]
    m.apply(VerifyIssue(True, 8))
    m.apply(VerifyResult(0, 2, 1))
    m.apply(VerifyResult(1, 1, 1))
    assert m.apply(Unlock()) == [Unlocked(1), Moved(1, 1, (3, 4))]


def test_retire_discards_pooled_tokens_with_a_reason_and_frees_the_slot():
    m = manager(shared_entries=2)
    admit(m, (0, 0), (1, 1))
    draft(m, 0, P1, P1)
    m.apply(VerifyIssue(True, 1))
    draft(m, 1, P1)                                # eager
    with pytest.raises(ProtocolError, match="in the current verification"):
        m.apply(Retire(0))
    m.apply(VerifyResult(0, 1, 3))
    assert m.apply(Unlock()) == [Unlocked(0), Moved(1, 1, (1,))]
    assert m.apply(Retire(0)) == [Discarded(0, (2,), DiscardReason.REQUEST_RETIRED), Retired(0)]
    assert 0 not in m.controller.slots
    assert m.apply(Admit(0, 3))[0].microbatch == 3
    m.apply(Retire(1))
    m.conservation(final=True)


def test_result_and_unlock_protocol_errors_leave_state_unchanged():
    m = manager()
    admit(m, (0, 0), (1, 0))
    draft(m, 0, P1, P1)
    draft(m, 1, P1)
    with pytest.raises(ProtocolError, match="not locked"):
        m.apply(Unlock())
    m.apply(VerifyIssue(True, 2))                  # (0,1), (0,2); request 1 waits
    with pytest.raises(ProtocolError, match="no token in the current verification"):
        m.apply(VerifyResult(1, 0, 0))
    with pytest.raises(ProtocolError, match="had 2 token"):
        m.apply(VerifyResult(0, 3, 0))
    with pytest.raises(ProtocolError, match=r"no VerifyResult yet for request\(s\) \[0\]"):
        m.apply(Unlock())
    m.apply(VerifyResult(0, 2, 0))
    with pytest.raises(ProtocolError, match="already has its result"):
        m.apply(VerifyResult(0, 2, 0))
    assert m.apply(Unlock()) == [Unlocked(0)]
    assert m.conservation().accepted == 2


@pytest.mark.parametrize("txn, match", [
    (DraftToken(0, 0, 1, 7, 65537), r"prob: expected raw UQ1.16 in \[0, 65536\]"),
    (DraftToken(0, 0, 1, 1 << 17, 1), r"token: expected an integer in \[0, 131071\]"),
    (DraftToken(0, 4, 1, 7, 1), r"microbatch: expected an integer in \[0, 3\]"),
    (DraftToken(0, 0, 0, 7, 1), "expects round position 1, found 0"),
    (DraftToken(200, 0, 1, 7, 1), r"request: expected an integer in \[0, 127\]"),
    (VerifyIssue(True, 0), r"capacity: expected an integer in \[1, 1023\]"),
    (Admit(16, 0), "outside the 16 Controller slots"),
    ("Unlock", "not a Manager input transaction"),
])
def test_out_of_range_fields_are_protocol_errors(txn, match):
    m = manager()
    admit(m, (0, 0))
    with pytest.raises(ProtocolError, match=match):
        m.apply(txn)
    assert m.conservation().drafted == 0


def test_verification_ids_count_passes():
    m = manager()
    admit(m, (0, 0))
    for vid in range(3):
        draft(m, 0, P1)
        assert of(m.apply(VerifyIssue(True, 1)), Locked) == [Locked(vid)]
        m.apply(VerifyResult(0, 1, 0))
        assert m.apply(Unlock())[0] == Unlocked(vid)


def test_end_round_stops_drafting_and_waits_for_the_pool():
    m = manager()
    admit(m, (0, 0))
    with pytest.raises(ProtocolError, match="no draft token in this round"):
        m.apply(EndRound(0))
    draft(m, 0, 60000, 60000)
    assert m.apply(EndRound(0)) == [RoundEnded(0, 2, 54931)]
    with pytest.raises(ProtocolError, match="stopped, not drafting"):
        m.apply(EndRound(0))
    m.apply(VerifyIssue(True, 8))
    m.apply(VerifyResult(0, 2, 21))
    assert m.apply(Unlock()) == [Unlocked(0), Resumed(0, 21, False)]


def test_end_round_after_everything_was_accepted_resumes_at_once():
    m = manager()
    admit(m, (0, 0))
    draft(m, 0, P1)
    m.apply(VerifyIssue(True, 8))
    m.apply(VerifyResult(0, 1, 33))
    assert m.apply(Unlock()) == [Unlocked(0)]      # still drafting: same round
    assert m.apply(EndRound(0)) == [RoundEnded(0, 1, P1), Resumed(0, 33, False)]
    assert draft(m, 0, P1)[0].position == 1
