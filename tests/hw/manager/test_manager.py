"""Manager top RTL against the model (sim/manager/manager.py) on the Amaranth simulator:
seeded constrained-random transaction sequences from sim/manager/random_txns.py, every event
compared bit for bit, with random back-pressure on the event stream."""
from __future__ import annotations

import pytest

from hw.flow import manager_replay
from sim.manager.config import ManagerConfig
from sim.manager.random_txns import coverage, generate_with_events
from sim.manager.softmax import SoftmaxParams
from sim.manager.transactions import DraftLogits

SMALL = ManagerConfig(max_requests=8, max_draft_len=8, tau=30000, shared_entries=16, eager_entries=12,
                      micro_batches=3, dlm_fc_threshold=2, tlm_attention_threshold=2)
SOFTMAX = SoftmaxParams(lanes=2, vocab=16, exp_frac_bits=12)


def replay(config, pairs, name, *, stall: float = 0.0, seed: int = 0, long_stalls: bool = False):
    """Every transaction on the RTL, compared with the model's events; per transaction, the
    clock edges it occupies the Manager when issued back to back (see hw/flow/manager_replay.py)."""
    result = manager_replay.replay(config, pairs, softmax=SOFTMAX, stall=stall, seed=seed,
                                   long_stalls=long_stalls, name=name)
    assert result.mismatch is None, result.mismatch
    return result.cycles


@pytest.mark.parametrize("seed", [1, 2])
def test_random_sequences_against_model(seed):
    pairs, model = generate_with_events(SMALL, seed, 700, requests=8, softmax=SOFTMAX)
    assert sum(isinstance(txn, DraftLogits) for txn, _ in pairs) > 20
    cov = coverage(pairs)
    for corner in ("refused_shared", "refused_eager", "reject_first", "all_accepted", "moved",
                   "tie_across_requests", "not_issued_locked", "discarded_eager_after_reject"):
        assert cov[corner] > 0, (corner, cov)
    replay(SMALL, pairs, f"manager_random_{seed}", stall=0.3, seed=seed, long_stalls=True)
    model.conservation(final=True)


def test_draft_and_issue_cycle_costs():
    pairs, _ = generate_with_events(SMALL, 3, 300, requests=8)
    cycles = replay(SMALL, pairs, "manager_cycles")
    drafts = {n for kind, n, _ in cycles if kind == "DraftToken"}
    # Edges: accept, decide + pool write (DRAFTED or REFUSED out), DONE out, DONE transfer.
    assert drafts == {4}, drafts
    # Edges: accept, check, one per selected token, end of selection, ISSUED, LOCKED, MAPPING,
    # DONE out, DONE transfer: k tokens cost k + 8.
    issues = {n - k for kind, n, k in cycles if kind == "VerifyIssue" and k}
    assert issues == {8}, issues


def test_directed_round_by_hand():
    """Empty, a tie within a request, Issue while locked, eager drafting, a reject at the first
    token, everything accepted, the eager move, the new round and retirement; every event
    worked out by hand, and the model and the RTL must both produce exactly these."""
    from sim.manager.manager import Manager as Model
    from sim.manager.transactions import (
        Admit, Admitted, Device, Discarded, DiscardReason as R, DraftToken, Drafted, Issued, Locked,
        Mapping, Moved, NotIssued, NotIssuedReason, Op, Pool, Resumed, Retire, Retired,
        SchedulerQuery, SelectedToken as S, Unlock, Unlocked, Verified, VerifyIssue, VerifyResult)

    script = [
        (VerifyIssue(True, 4), [NotIssued(NotIssuedReason.EMPTY, 0)]),
        (Admit(0, 0), [Admitted(0, 0)]),
        (Admit(1, 1), [Admitted(1, 1)]),
        (DraftToken(0, 0, 1, 10, 65536), [Drafted(0, 1, Pool.SHARED, 65536, False)]),
        (DraftToken(0, 0, 2, 11, 32768), [Drafted(0, 2, Pool.SHARED, 32768, False)]),
        # 32768 * 32768 >> 16 = 16384 < tau = 30000: stop, the token is still drafted.
        (DraftToken(0, 0, 3, 12, 32768), [Drafted(0, 3, Pool.SHARED, 16384, True)]),
        (DraftToken(1, 1, 1, 20, 49152), [Drafted(1, 1, Pool.SHARED, 49152, False)]),
        (DraftToken(1, 1, 2, 21, 49152), [Drafted(1, 2, Pool.SHARED, 36864, False)]),
        (DraftToken(1, 1, 3, 22, 65536), [Drafted(1, 3, Pool.SHARED, 36864, False)]),
        (VerifyIssue(False, 8), [NotIssued(NotIssuedReason.BELOW_CAPACITY, 6)]),
        # Descending H; the tie at 36864 within request 1 goes by position. 4 tokens of 2
        # requests: 4 >= threshold 2 * 2, attention on the GPU.
        (VerifyIssue(False, 4), [Issued(0, (S(0, 1, 10, 65536), S(1, 1, 20, 49152), S(1, 2, 21, 36864),
                                            S(1, 3, 22, 36864))),
                                 Locked(0), Mapping(Op.TLM_ATTENTION, Device.GPU, 4, 2, -1)]),
        (VerifyIssue(True, 4), [NotIssued(NotIssuedReason.LOCKED, 2)]),
        (DraftToken(1, 1, 4, 23, 65536), [Drafted(1, 4, Pool.EAGER, 36864, False)]),
        (VerifyResult(0, 0, 77), [Verified(0, 1, 0, True), Discarded(0, (2, 3), R.SHARED_AFTER_REJECT)]),
        (VerifyResult(1, 3, 88), [Verified(1, 1, 3, False)]),
        (Unlock(), [Unlocked(0), Moved(1, 1, (4,)), Resumed(0, 77, True)]),
        (SchedulerQuery(1), [Mapping(Op.DLM_FC, Device.PIM, 1, 1, 1)]),
        (Retire(1), [Discarded(1, (4,), R.REQUEST_RETIRED), Retired(1)]),
    ]
    model = Model(SMALL)
    for txn, expected in script:
        assert model.apply(txn) == expected, txn
    replay(SMALL, script, "manager_directed", stall=0.5, seed=4)
