"""Long seeded random sequences: legality, determinism, coverage, conservation, and an
independent event-level checker that rebuilds the pools from the events alone."""
import functools

import pytest

from hw.flow.manager_random import coverage, generate, generate_with_events
from sim.manager import Manager, ManagerConfig
from sim.manager.controller import update_h
from sim.manager.transactions import (
    Admitted,
    Discarded,
    DiscardReason,
    Drafted,
    DraftToken,
    Issued,
    Locked,
    Moved,
    NotIssued,
    Pool,
    ProtocolError,
    Refused,
    Resumed,
    Retired,
    RoundEnded,
    Unlocked,
    Verified,
    to_dict,
)
from tests.sim.manager.helpers import config

SMALL = config(max_requests=12, max_draft_len=8, tau=9000, shared_entries=24, eager_entries=16,
               micro_batches=4)
SEEDS = (1, 2, 3, 4)


@functools.cache
def small_run(seed: int):
    """One long finished sequence per seed, shared by the tests that only read it."""
    return generate_with_events(SMALL, seed, 12000)


def check_events(cfg: ManagerConfig, pairs) -> None:
    """Rebuild pools, rounds and H from the transaction stream and check every event."""
    shared: dict[tuple[int, int], int] = {}         # (request, position) -> h, waiting
    flight: dict[tuple[int, int], int] = {}
    eager: dict[tuple[int, int], int] = {}
    mb_of: dict[int, int] = {}
    h_of: dict[int, int] = {}
    locked = False
    eager_cap = cfg.eager_entries // cfg.micro_batches

    def eager_count(mb):
        return sum(1 for (r, _) in eager if mb_of[r] == mb)

    for txn, events in pairs:
        for e in events:
            if isinstance(e, Admitted):
                mb_of[e.request], h_of[e.request] = e.microbatch, 65536
            elif isinstance(e, Resumed):
                h_of[e.request] = 65536
                assert not any(k[0] == e.request for k in (*shared, *flight, *eager))
            elif isinstance(e, Drafted):
                assert isinstance(txn, DraftToken)
                h_of[e.request] = update_h(h_of[e.request], txn.prob)
                assert e.h == h_of[e.request]
                assert e.stop == (e.h < cfg.tau or e.position == cfg.max_draft_len)
                has_eager = any(k[0] == e.request for k in eager)
                if e.pool is Pool.SHARED:
                    assert not locked and not has_eager and len(shared) + len(flight) < cfg.shared_entries
                    shared[(e.request, e.position)] = e.h
                else:
                    assert (locked or has_eager) and eager_count(mb_of[e.request]) < eager_cap
                    eager[(e.request, e.position)] = e.h
            elif isinstance(e, RoundEnded):
                assert e.h == h_of[e.request]
            elif isinstance(e, Refused):
                if e.pool is Pool.SHARED:
                    assert len(shared) + len(flight) == cfg.shared_entries
                else:
                    assert eager_count(mb_of[e.request]) == eager_cap
            elif isinstance(e, Issued):
                assert not locked
                order = sorted(shared, key=lambda k: (-shared[k], k[0], k[1]))
                expect = order[:txn.capacity]
                assert [(t.request, t.position) for t in e.tokens] == expect
                assert len(expect) == txn.capacity or txn.tlm_idle
                for k in expect:
                    flight[k] = shared.pop(k)
                    # prefix property: nothing earlier of the same request stays behind
                    assert not any(r == k[0] and p < k[1] for r, p in shared)
            elif isinstance(e, Locked):
                locked = True
            elif isinstance(e, NotIssued):
                assert locked or len(shared) < txn.capacity and not (txn.tlm_idle and shared)
            elif isinstance(e, Verified):
                mine = sorted(p for r, p in flight if r == e.request)
                assert mine[0] == e.first and len(mine) >= e.accepted + e.rejected
                assert e.rejected == (e.accepted < len(mine))
                for p in mine[:e.accepted + e.rejected]:
                    del flight[(e.request, p)]
            elif isinstance(e, Discarded):
                where = {DiscardReason.REJECTED_PREFIX: [flight],
                         DiscardReason.SHARED_AFTER_REJECT: [shared],
                         DiscardReason.EAGER_AFTER_REJECT: [eager],
                         DiscardReason.REQUEST_RETIRED: [shared, eager]}[e.reason]
                for p in e.positions:
                    (pool,) = [d for d in where if (e.request, p) in d]
                    del pool[(e.request, p)]
            elif isinstance(e, Unlocked):
                assert locked and not flight
                locked = False
            elif isinstance(e, Moved):
                for p in e.positions:
                    shared[(e.request, p)] = eager.pop((e.request, p))
                assert len(shared) <= cfg.shared_entries
            elif isinstance(e, Retired):
                del mb_of[e.request]
    assert not shared and not flight and not eager


@pytest.mark.parametrize("seed", SEEDS)
def test_random_sequences_conserve_tokens_and_pass_the_event_checker(seed):
    pairs, m = small_run(seed)
    totals = m.conservation(final=True)
    assert totals.drafted > 2000 and totals.accepted > 0
    check_events(SMALL, pairs)


def test_corner_cases_are_all_exercised():
    cov = sum((coverage(small_run(s)[0]) for s in SEEDS[:2]), start=coverage([]))
    for key in ("refused_shared", "refused_eager", "reject_first", "reject_later", "all_accepted",
                "tie_across_requests", "tie_same_request", "issued_full_pass", "not_issued_locked",
                "not_issued_below_capacity", "moved", "resumed", "retired", "roundended",
                "discarded_rejected_prefix", "discarded_shared_after_reject",
                "discarded_eager_after_reject", "discarded_request_retired"):
        assert cov[key] > 0, key
    assert cov["max_refusal_streak"] >= 50             # long back-pressure


def test_same_seed_same_bytes_and_replay_gives_the_same_events():
    pairs, _ = generate_with_events(SMALL, 9, 3000)
    again, _ = generate_with_events(SMALL, 9, 3000)
    assert [(to_dict(t), [to_dict(e) for e in ev]) for t, ev in pairs] == \
           [(to_dict(t), [to_dict(e) for e in ev]) for t, ev in again]
    fresh = Manager(SMALL)
    assert [fresh.apply(t) for t, _ in pairs] == [ev for _, ev in pairs]
    assert generate(SMALL, 10, 500) != generate(SMALL, 9, 500)


def test_shipped_config_long_run():
    cfg = ManagerConfig.load()
    pairs, m = generate_with_events(cfg, 5, 4000)
    m.conservation(final=True)
    check_events(cfg, pairs)
    cov = coverage(pairs)
    assert cov["tie_across_requests"] > 0 and cov["moved"] > 0 and cov["issued_full_pass"] > 0


def test_unfinished_sequence_reports_pending_tokens():
    _, m = generate_with_events(SMALL, 1, 800, finish=False)
    totals = m.conservation()
    assert totals.pending > 0
    with pytest.raises(Exception, match="never verified nor discarded"):
        m.conservation(final=True)


def test_issue_without_eager_pool_only_back_pressures():
    cfg = config(eager_entries=0, shared_entries=8, micro_batches=4)
    pairs, m = generate_with_events(cfg, 2, 4000)
    m.conservation(final=True)
    check_events(cfg, pairs)
    assert not any(isinstance(e, Drafted) and e.pool is Pool.EAGER for _, ev in pairs for e in ev)
    assert coverage(pairs)["refused_eager"] > 0


def illegal_twins(txn, m: Manager) -> list:
    """Transactions that must be refused with ProtocolError just before ``txn`` is applied."""
    from dataclasses import replace

    from sim.manager.transactions import Admit, EndRound, Retire, Unlock, VerifyIssue, VerifyResult
    bad = []
    if isinstance(txn, DraftToken):
        bad += [replace(txn, position=txn.position + 1), replace(txn, prob=65537),
                replace(txn, microbatch=(txn.microbatch + 1) % SMALL.micro_batches)]
    elif isinstance(txn, VerifyResult):
        bad.append(replace(txn, accepted=len(m.shared_pool.in_flight(txn.request)) + 1))
    elif isinstance(txn, VerifyIssue):
        bad.append(replace(txn, capacity=0))
    elif isinstance(txn, Unlock):
        bad.append(Admit(min(m.requests_in_pass), 0))          # already admitted
    elif isinstance(txn, (EndRound, Retire)):
        bad.append(Admit(txn.request, 0))
    return bad


def test_protocol_errors_change_nothing():
    pairs, _ = generate_with_events(SMALL, 6, 6000)
    m = Manager(SMALL)
    refused = 0
    for txn, expected in pairs:
        for bad in illegal_twins(txn, m):
            with pytest.raises(ProtocolError):
                m.apply(bad)
            refused += 1
        assert m.apply(txn) == expected
    assert refused > 3000
    m.conservation(final=True)
