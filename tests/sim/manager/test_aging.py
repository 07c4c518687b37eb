"""Aging of the Shared Pool's greedy selection (sim/manager/shared_pool.py), hand-worked."""
from sim.manager.shared_pool import PoolEntry, SharedPool
from sim.manager.transactions import Issued, Unlock, VerifyIssue, VerifyResult
from tests.sim.manager.helpers import admit, draft, manager, of


def entry(request, position, h):
    return PoolEntry(request, 0, position, 100 + position, h, 0)


def _passes(pool: SharedPool, n: int, per_pass: int = 1) -> list[list[tuple[int, int]]]:
    """``n`` verifications of ``per_pass`` tokens, each fully accepted; (request, position)."""
    out = []
    for _ in range(n):
        chosen = pool.select(per_pass)
        out.append([(e.request, e.position) for e in chosen])
        for request in {e.request for e in chosen}:
            pool.release(request)
        pool.unlock()
    return out


def _pool(aging, *tokens) -> SharedPool:
    """A 16-entry pool holding ``tokens`` (request, position, H), inserted in that order."""
    pool = SharedPool(16, aging)
    for request, position, h in tokens:
        pool.insert(entry(request, position, h))
    return pool


def _starving_pool(aging):
    # Request 0 drafts four confident tokens, request 1 one unlikely token.
    return _pool(aging, (0, 1, 60000), (0, 2, 50000), (0, 3, 40000), (0, 4, 30000), (1, 1, 20000))


def test_greedy_order_starves_the_unlikely_request():
    assert _passes(_starving_pool(None), 5) == [[(0, 1)], [(0, 2)], [(0, 3)], [(0, 4)], [(1, 1)]]


def test_request_passed_over_k_times_is_served_next():
    # K = 2: request 1 is passed over by passes 1 and 2 (count 1, 2 = K: aged) and goes first
    # in pass 3; request 0's waiting tokens count pass 3 (1 < K) and are served after.
    pool = _starving_pool(2)
    got = _passes(pool, 3)
    assert got == [[(0, 1)], [(0, 2)], [(1, 1)]]
    assert [e.age for e in pool.lookup(0)] == [1, 1]
    assert _passes(pool, 2) == [[(0, 3)], [(0, 4)]]


def test_k_one_alternates():
    assert _passes(_starving_pool(1), 5) == [[(0, 1)], [(1, 1)], [(0, 2)], [(0, 3)], [(0, 4)]]


def test_serving_a_request_resets_all_its_waiting_tokens():
    pool = _pool(2, (0, 1, 60000), (0, 2, 10000), (1, 1, 50000))
    assert _passes(pool, 1) == [[(0, 1)]]
    # (0, 2) waited but its request was served: count 0; request 1 was passed over: 1.
    assert [e.age for e in pool.lookup(0)] == [0] and [e.age for e in pool.lookup(1)] == [1]


def test_aged_requests_keep_the_greedy_order_among_themselves():
    # Three requests passed over twice (K = 2) by request 9; then aged, they go by H descending
    # and, on equal H, ascending request id, and before request 9's higher-H token.
    pool = _pool(2, (9, 1, 65000), (9, 2, 64000), (9, 3, 63000), (3, 1, 20000), (2, 1, 30000),
                 (1, 1, 20000))
    assert _passes(pool, 2) == [[(9, 1)], [(9, 2)]]
    assert _passes(pool, 1, per_pass=4) == [[(2, 1), (1, 1), (3, 1), (9, 3)]]


def test_new_token_of_an_aged_request_is_not_aged_and_the_prefix_holds():
    # Request 1 ages with one token; a second token joins it later with count 0: the aged
    # token is served first, the new one keeps its H rank after request 0's.
    pool = _pool(1, (0, 1, 60000), (0, 2, 55000), (1, 1, 50000))
    assert _passes(pool, 1) == [[(0, 1)]]
    pool.insert(entry(1, 2, 50000))
    assert [e.age for e in pool.lookup(1)] == [1, 0]
    assert _passes(pool, 1, per_pass=2) == [[(1, 1), (0, 2)]]
    assert _passes(pool, 1) == [[(1, 2)]]


def test_aging_through_the_manager_transactions():
    # The Manager passes K from its config; Issued carries the aged order.
    m = manager(aging_passes=1)
    admit(m, (0, 0), (1, 1))
    draft(m, 0, 65000, 65000, 65000)
    draft(m, 1, 30000)
    orders = []
    for _ in range(2):
        issued = of(m.apply(VerifyIssue(True, 1)), Issued)[0]
        orders.append([(t.request, t.position) for t in issued.tokens])
        m.apply(VerifyResult(issued.tokens[0].request, 1, 5))
        m.apply(Unlock())
    assert orders == [[(0, 1)], [(1, 1)]]
