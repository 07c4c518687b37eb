"""The Eager Pools: one per micro-batch, splitting ``total_entries`` evenly.

They take the draft tokens of a micro-batch while the Shared Pool is locked, and those of a
request that still has eager tokens (so that its tokens reach the Shared Pool in position
order). At unlock the eager tokens of rejected requests are discarded and the others move to
the Shared Pool in ascending request id, then position, while it has room; the rest move at a
later drain (README.md, "Semantics").
"""
from __future__ import annotations

from sim.manager.shared_pool import PoolEntry, SharedPool


class EagerPools:
    def __init__(self, micro_batches: int, total_entries: int):
        self.capacity = total_entries // micro_batches
        self._entries: list[dict[int, list[PoolEntry]]] = [{} for _ in range(micro_batches)]
        self._count = [0] * micro_batches

    def count(self, microbatch: int) -> int:
        return self._count[microbatch]

    def free(self, microbatch: int) -> int:
        return self.capacity - self._count[microbatch]

    def holds(self, request: int, microbatch: int) -> bool:
        return request in self._entries[microbatch]

    def lookup(self, request: int, microbatch: int) -> list[PoolEntry]:
        return list(self._entries[microbatch].get(request, ()))

    def serials(self) -> set[int]:
        return {e.serial for pool in self._entries for entries in pool.values() for e in entries}

    def insert(self, entry: PoolEntry) -> None:
        mb = entry.microbatch
        assert self._count[mb] < self.capacity, "insert into a full Eager Pool"
        pool = self._entries[mb]
        entries = pool.get(entry.request)
        if not entries:
            pool[entry.request] = [entry]
        else:
            entries.append(entry)
        self._count[mb] += 1

    def take(self, request: int, microbatch: int) -> list[PoolEntry]:
        """Remove and return all of the request's eager entries."""
        entries = self._entries[microbatch].pop(request, [])
        self._count[microbatch] -= len(entries)
        return entries

    def on_unlock(self, rejected: dict[int, int], shared: SharedPool
                  ) -> tuple[dict[int, list[PoolEntry]], dict[int, list[PoolEntry]]]:
        """Discard the eager tokens of ``rejected`` (request -> micro-batch), drain the rest:
        (moved, discarded), each request -> entries in ascending position."""
        discarded = {r: entries for r in sorted(rejected) if (entries := self.take(r, rejected[r]))}
        return self.drain_into(shared), discarded

    def drain_into(self, shared: SharedPool) -> dict[int, list[PoolEntry]]:
        """Move eager tokens to the unlocked Shared Pool while it has room (request, position order)."""
        moved: dict[int, list[PoolEntry]] = {}
        pools, count = self._entries, self._count
        free = shared.free          # kept here as the moves take entries (insert_all adds them)
        order = sorted((request, mb) for mb, pool in enumerate(pools) for request in pool)
        for request, mb in order:
            if free == 0:
                break
            pool = pools[mb]
            entries = pool[request]
            k = len(entries) if len(entries) < free else free
            moved[request] = taken = entries[:k]
            shared.insert_all(taken)
            free -= k
            count[mb] -= k
            if k == len(entries):
                del pool[request]
            else:
                pool[request] = entries[k:]
        return moved
