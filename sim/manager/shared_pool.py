"""The Shared Pool: a CAM of draft tokens from every micro-batch, and greedy selection.

Entries are looked up and invalidated by request. ``select`` picks the tokens of one
verification and locks the pool: no insert and no selection until ``unlock``. Selected tokens
stay in their entries (in flight) until their request's result releases them.

Selection order (``selection_key``): descending cumulative probability H, then ascending request
id, then ascending position. With aging (``aging_passes`` = K, None = off, the paper's selector)
each waiting entry counts the selections that passed its request over (``PoolEntry.age``,
saturating at K) and the entries whose count reached K come first (``aged_selection_key``).
README.md ("Greedy selection", "Aging") states the rules and why either order keeps the prefix
property (a selected token's earlier pooled tokens are selected too), which ``select`` asserts.
"""
from __future__ import annotations

from bisect import bisect_left
from itertools import chain
from operator import is_


class PoolEntry:
    """One draft token in a pool (a plain class: its constructor runs per token, sim/cost/value.py)."""

    __slots__ = ("request", "microbatch", "position", "token", "h", "serial", "age", "h_prev", "last")

    def __init__(self, request: int, microbatch: int, position: int, token: int, h: int, serial: int,
                 age: int = 0, h_prev: int = 1 << 16, last: bool = False) -> None:
        self.request, self.microbatch, self.position, self.token = request, microbatch, position, token
        self.h = h
        self.serial = serial      # ledger id of the drafted token (conservation check)
        self.age = age            # passes passed over while waiting (aging), saturating at K
        self.h_prev = h_prev      # H before this token (SADDLE+'s planner: planner.py)
        self.last = last          # the round's stopping token (the Controller said stop)


def selection_key(entry: PoolEntry) -> tuple[int, int, int]:
    return (-entry.h, entry.request, entry.position)


def aged_selection_key(entry: PoolEntry, aging_passes: int) -> tuple[bool, int, int, int]:
    return (entry.age < aging_passes, -entry.h, entry.request, entry.position)


def _h(entry: PoolEntry) -> int:
    # A function, not attrgetter: compiled, it reads the native attribute directly.
    return entry.h


class SharedPool:
    def __init__(self, capacity: int, aging_passes: int | None = None):
        self.capacity = capacity
        self.aging_passes = aging_passes
        self.locked = False
        self._waiting: dict[int, list[PoolEntry]] = {}    # request -> entries, ascending position
        self._in_flight: dict[int, list[PoolEntry]] = {}
        self.count = 0                                    # entries: waiting + in flight
        # ``ordered()``'s list, new entries merged in, until one leaves (SADDLE+ asks per attempt)
        self._order: list[PoolEntry] | None = None

    @property
    def free(self) -> int:
        return self.capacity - self.count

    @property
    def waiting_count(self) -> int:
        return self.count - sum(len(v) for v in self._in_flight.values())

    def insert(self, entry: PoolEntry) -> None:
        self.insert_all([entry])

    def insert_all(self, entries: list[PoolEntry]) -> None:
        """One request's tokens in ascending position (an Eager Pool's drain, or ``insert``'s
        one token): only the junction with those already waiting is checked."""
        assert not self.locked and self.count + len(entries) <= self.capacity, \
            "insert into a locked or full Shared Pool"
        self._merge(entries)
        held = self._waiting.setdefault(entries[0].request, [])
        assert not held or held[-1].position < entries[0].position, "positions out of order"
        held += entries
        self.count += len(entries)

    def lookup(self, request: int) -> list[PoolEntry]:
        """Waiting (not in flight) entries of the request, ascending position."""
        return list(self._waiting.get(request, ()))

    def in_flight(self, request: int) -> list[PoolEntry]:
        return list(self._in_flight.get(request, ()))

    def in_flight_count(self, request: int) -> int:
        return len(self._in_flight.get(request, ()))

    def serials(self) -> set[int]:
        """Ledger serials of every entry, waiting or in flight."""
        return {e.serial for group in (self._waiting, self._in_flight)
                for entries in group.values() for e in entries}

    def invalidate(self, request: int) -> list[PoolEntry]:
        """Remove and return the request's waiting entries."""
        entries = self._waiting.pop(request, [])
        self._order = None
        self.count -= len(entries)
        return entries

    def ordered(self) -> list[PoolEntry]:
        """The waiting entries in selection order (the pool's own list, which later inserts
        change: read, not written, nor kept past the next insert)."""
        if self._order is not None:
            return self._order
        # selection_key's order (aged_selection_key's with aging) with no key tuples: (request,
        # position) order, a stable sort on H descending (``reverse`` keeps ties in order), with
        # aging a stable partition on the age.
        waiting = self._waiting
        candidates = list(chain.from_iterable(map(waiting.__getitem__, sorted(waiting))))
        candidates.sort(key=_h, reverse=True)
        aging = self.aging_passes
        if aging is not None:
            candidates = [e for e in candidates if e.age >= aging] + [e for e in candidates if e.age < aging]
        self._order = candidates
        return candidates

    def _merge(self, entries: list[PoolEntry]) -> None:
        """New entries into ``ordered()``'s kept list (without aging, their place there holds)."""
        if self.aging_passes is not None:
            self._order = None
        elif self._order is not None:
            for e in entries:
                self._order.insert(bisect_left(self._order, selection_key(e), key=selection_key), e)

    def select(self, n: int, order: list[PoolEntry] | None = None) -> list[PoolEntry]:
        """Up to ``n`` waiting entries in selection order (``order``: ``ordered()``'s, if
        already taken); they go in flight and the pool locks."""
        assert not self.locked, "select on a locked Shared Pool"
        waiting, aging = self._waiting, self.aging_passes
        chosen = (self.ordered() if order is None else order)[:n]
        self._order = None
        per_request: dict[int, list[PoolEntry]] = {}
        for e in chosen:
            per_request.setdefault(e.request, []).append(e)
        for request, taken in per_request.items():
            entries = waiting[request]
            k = len(taken)
            assert all(map(is_, taken, entries)), f"prefix property broken for request {request}"
            self._in_flight[request] = taken
            if k == len(entries):
                del waiting[request]
            else:
                waiting[request] = entries[k:]
        if aging is not None:
            # The requests served restart their count, every other one counts this pass.
            for request, entries in waiting.items():
                for e in entries:
                    e.age = 0 if request in per_request else min(e.age + 1, aging)
        self.locked = True
        return chosen

    def release(self, request: int) -> list[PoolEntry]:
        """Remove and return the request's in-flight entries (its result arrived)."""
        entries = self._in_flight.pop(request, [])
        self.count -= len(entries)
        return entries

    def unlock(self) -> None:
        assert not self._in_flight, "unlock with tokens still in flight"
        self.locked = False
