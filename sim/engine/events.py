"""Event queue with integer picosecond time and a total, deterministic order.

Events at the same time run by ascending ``priority`` and then in insertion order, so a run
never depends on heap internals or on hashing.
"""
from __future__ import annotations

from heapq import heappop, heappush
from dataclasses import dataclass
from typing import Callable


@dataclass(slots=True)
class Event:
    time: int
    priority: int
    seq: int
    action: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


class EventQueue:
    """A heap of events; ``run`` pops them in (time, priority, seq) order. The heap holds
    ``(time, priority, seq, event)`` tuples: compared in C, and ``seq`` is unique, so the event
    itself is never compared."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, int, Event]] = []
        self._seq = 0
        self.now = 0

    def at(self, time: int, action: Callable[[], None], priority: int = 0) -> Event:
        if not isinstance(time, int):
            raise TypeError(f"event time must be an int number of ps, found {time!r}")
        if time < self.now:
            raise ValueError(f"event scheduled in the past: {time} ps < now {self.now} ps")
        seq = self._seq
        event = Event(time, priority, seq, action)
        self._seq = seq + 1
        heappush(self._heap, (time, priority, seq, event))
        return event

    def after(self, delay: int, action: Callable[[], None], priority: int = 0) -> Event:
        return self.at(self.now + delay, action, priority)

    def run(self, until: int | None = None) -> int:
        """Process events until the queue is empty (or ``until``); returns the final time."""
        heap = self._heap
        while heap:
            if until is not None and heap[0][0] > until:
                break
            event = heappop(heap)[3]
            if event.cancelled:
                continue
            self.now = event.time
            event.action()
        return self.now

    def __len__(self) -> int:
        return sum(1 for *_, e in self._heap if not e.cancelled)
