"""``SharedPool.select`` sorts without a Python key call per entry (a stable sort on H over
the entries in request, position order): on random pools it picks exactly the tokens, in
exactly the order, of a sort by the documented keys (``selection_key``, ``aged_selection_key``)."""
import random

import pytest

from sim.manager.shared_pool import PoolEntry, SharedPool, aged_selection_key, selection_key


def _pool(rng: random.Random, aging: int | None) -> tuple[SharedPool, list[PoolEntry]]:
    pool = SharedPool(64, aging)
    entries = []
    requests = rng.sample(range(40), rng.randint(1, 12))
    for request in requests:      # inserted in a random request order, as drafting interleaves
        h, age = 65536, rng.randint(0, 4)
        for position in range(1, rng.randint(1, 6) + 1):
            h = rng.choice((h, h, rng.randint(0, h)))       # non-increasing along a round, ties common
            e = PoolEntry(request, 0, position, position, h, len(entries), age)
            entries.append(e)
            age = rng.randint(0, age)                       # a newer token never counts more passes
    rng.shuffle(requests)
    for request in requests:
        for e in [e for e in entries if e.request == request]:
            pool.insert(e)
    return pool, entries


@pytest.mark.parametrize("aging", (None, 2))
def test_select_is_the_sort_by_the_selection_key(aging):
    rng = random.Random(7)
    for _ in range(400):
        pool, entries = _pool(rng, aging)
        n = rng.randint(1, len(entries) + 2)
        key = selection_key if aging is None else (lambda e: aged_selection_key(e, aging))
        expected = sorted(entries, key=key)[:n]     # before select counts the passes
        assert pool.select(n) == expected


@pytest.mark.parametrize("aging", (None, 2))
def test_the_kept_order_follows_inserts_and_removals(aging):
    """``ordered()`` asked between inserts (new entries merged into the kept list), removals
    and selections: always the sort of the waiting entries by the documented keys."""
    rng = random.Random(11)
    key = selection_key if aging is None else (lambda e: aged_selection_key(e, aging))
    for _ in range(200):
        pool, entries = _pool(rng, aging)
        waiting = list(entries)
        serial = len(entries)
        for _ in range(rng.randint(1, 8)):
            action = rng.random()
            if action < 0.5 and pool.free:          # another token of a waiting or new request
                request = rng.choice([e.request for e in waiting] + [99])
                mine = [e for e in waiting if e.request == request]
                position = max((e.position for e in mine), default=0) + 1
                h = rng.randint(0, min((e.h for e in mine), default=65536))
                e = PoolEntry(request, 0, position, position, h, serial)
                serial += 1
                pool.insert(e)
                waiting.append(e)
            elif action < 0.8 and waiting:          # a request's waiting tokens invalidated
                request = rng.choice(waiting).request
                pool.invalidate(request)
                waiting = [e for e in waiting if e.request != request]
            assert pool.ordered() == sorted(waiting, key=key)
        if waiting:
            n = rng.randint(1, len(waiting))
            expected = sorted(waiting, key=key)[:n]     # before select counts the passes
            assert pool.select(n) == expected
