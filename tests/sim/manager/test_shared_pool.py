import pytest

from sim.manager.shared_pool import PoolEntry, SharedPool


def entry(request, position, h, serial=0):
    return PoolEntry(request, 0, position, 100 + position, h, serial)


def test_selection_is_descending_h_then_request_then_position():
    pool = SharedPool(16)
    for e in [entry(3, 1, 50000), entry(3, 2, 40000), entry(1, 1, 40000), entry(1, 2, 40000),
              entry(2, 1, 50000), entry(0, 1, 10000)]:
        pool.insert(e)
    chosen = pool.select(5)
    assert [(e.request, e.position) for e in chosen] == [(2, 1), (3, 1), (1, 1), (1, 2), (3, 2)]
    assert pool.locked and pool.count == 6 and pool.waiting_count == 1
    assert [e.position for e in pool.lookup(0)] == [1]


def test_selection_takes_a_prefix_of_each_request():
    pool = SharedPool(8)
    for pos, h in [(1, 60000), (2, 30000), (3, 29000)]:
        pool.insert(entry(5, pos, h))
    pool.insert(entry(4, 1, 30000))
    chosen = pool.select(3)
    # (4,1) and (5,2) tie at 30000: request 4 first; (5,3) waits.
    assert [(e.request, e.position) for e in chosen] == [(5, 1), (4, 1), (5, 2)]
    assert [e.position for e in pool.in_flight(5)] == [1, 2]
    assert [e.position for e in pool.lookup(5)] == [3]


def test_prefix_property_violation_is_caught():
    pool = SharedPool(4)
    pool.insert(entry(0, 1, 100))
    pool.insert(entry(0, 2, 200))          # H grew along the round: impossible for the Controller
    with pytest.raises(AssertionError, match="prefix property"):
        pool.select(1)


def test_lock_refuses_insert_and_select_until_unlock():
    pool = SharedPool(4)
    pool.insert(entry(0, 1, 100))
    pool.select(4)
    with pytest.raises(AssertionError):
        pool.insert(entry(1, 1, 100))
    with pytest.raises(AssertionError):
        pool.select(1)
    with pytest.raises(AssertionError, match="in flight"):
        pool.unlock()
    assert [e.position for e in pool.release(0)] == [1]
    pool.unlock()
    assert pool.count == 0 and pool.free == 4


def test_invalidate_by_request_leaves_others():
    pool = SharedPool(4)
    for r in (0, 1, 0):
        pool.insert(entry(r, len(pool.lookup(r)) + 1, 100))
    assert [e.position for e in pool.invalidate(0)] == [1, 2]
    assert pool.count == 1 and pool.lookup(0) == [] and len(pool.lookup(1)) == 1
