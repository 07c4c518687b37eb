"""The Shared Pool: a CAM of draft tokens from every micro-batch, and greedy selection.

Entries are looked up and invalidated by request. ``select`` picks the tokens of one
verification and locks the pool: no insert and no selection until ``unlock``. Selected tokens
stay in their entries (in flight) until their request's result releases them, so a locked
pool's occupancy includes them.

Selection order: descending cumulative probability H, ties broken by ascending request id, then
ascending position. H is non-increasing along a request's round, so the first ``n`` tokens in
that order always include every earlier pooled token of a selected token's request (the prefix
property); ``select`` asserts it.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class PoolEntry:
    request: int
    microbatch: int
    position: int
    token: int
    h: int
    serial: int            # ledger id of the drafted token (conservation check)


def selection_key(entry: PoolEntry) -> tuple[int, int, int]:
    return (-entry.h, entry.request, entry.position)


class SharedPool:
    def __init__(self, capacity: int):
        self.capacity = capacity
        self.locked = False
        self._waiting: dict[int, list[PoolEntry]] = {}    # request -> entries, ascending position
        self._in_flight: dict[int, list[PoolEntry]] = {}
        self._count = 0                                   # waiting + in flight

    @property
    def count(self) -> int:
        return self._count

    @property
    def free(self) -> int:
        return self.capacity - self._count

    @property
    def waiting_count(self) -> int:
        return self._count - sum(len(v) for v in self._in_flight.values())

    def insert(self, entry: PoolEntry) -> None:
        assert not self.locked and self._count < self.capacity, "insert into a locked or full Shared Pool"
        entries = self._waiting.setdefault(entry.request, [])
        assert not entries or entries[-1].position < entry.position, "positions out of order"
        entries.append(entry)
        self._count += 1

    def lookup(self, request: int) -> list[PoolEntry]:
        """Waiting (not in flight) entries of the request, ascending position."""
        return list(self._waiting.get(request, ()))

    def in_flight(self, request: int) -> list[PoolEntry]:
        return list(self._in_flight.get(request, ()))

    def in_flight_requests(self) -> list[int]:
        return sorted(self._in_flight)

    def serials(self) -> set[int]:
        """Ledger serials of every entry, waiting or in flight."""
        return {e.serial for group in (self._waiting, self._in_flight)
                for entries in group.values() for e in entries}

    def invalidate(self, request: int) -> list[PoolEntry]:
        """Remove and return the request's waiting entries."""
        entries = self._waiting.pop(request, [])
        self._count -= len(entries)
        return entries

    def select(self, n: int) -> list[PoolEntry]:
        """Up to ``n`` waiting entries in selection order; they go in flight and the pool locks."""
        assert not self.locked, "select on a locked Shared Pool"
        candidates = [e for entries in self._waiting.values() for e in entries]
        candidates.sort(key=selection_key)
        chosen = candidates[:n]
        per_request: dict[int, list[PoolEntry]] = {}
        for e in chosen:
            per_request.setdefault(e.request, []).append(e)
        for request, taken in per_request.items():
            entries = self._waiting[request]
            k = len(taken)
            assert all(a is b for a, b in zip(taken, entries[:k])), \
                f"prefix property broken for request {request}"
            self._in_flight[request] = taken
            if k == len(entries):
                del self._waiting[request]
            else:
                self._waiting[request] = entries[k:]
        self.locked = True
        return chosen

    def release(self, request: int) -> list[PoolEntry]:
        """Remove and return the request's in-flight entries (its result arrived)."""
        entries = self._in_flight.pop(request, [])
        self._count -= len(entries)
        return entries

    def unlock(self) -> None:
        assert not self._in_flight, "unlock with tokens still in flight"
        self.locked = False
