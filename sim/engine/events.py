"""Event queue with integer picosecond time and a total, deterministic order.

Events at the same time run by ascending ``priority`` and then in insertion order, so a run
never depends on heap internals or on hashing.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Callable


@dataclass
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
        event = Event(time, priority, self._seq, action)
        self._seq += 1
        heapq.heappush(self._heap, (time, priority, event.seq, event))
        return event

    def after(self, delay: int, action: Callable[[], None], priority: int = 0) -> Event:
        return self.at(self.now + delay, action, priority)

    def run(self, until: int | None = None) -> int:
        """Process events until the queue is empty (or ``until``); returns the final time."""
        while self._heap:
            if until is not None and self._heap[0][0] > until:
                break
            event = heapq.heappop(self._heap)[3]
            if event.cancelled:
                continue
            self.now = event.time
            event.action()
        return self.now

    def __len__(self) -> int:
        return sum(1 for *_, e in self._heap if not e.cancelled)
