"""Event queue with integer picosecond time and a total, deterministic order: events at the
same time run in insertion order, so a run never depends on heap internals or on hashing.
"""
from __future__ import annotations

from collections.abc import Callable
from heapq import heappop, heappush


class EventQueue:
    """A heap of ``(time, seq, action)`` tuples, compared in C (``seq`` is unique, so an action
    is never compared). An event is named by its ``seq``."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Callable[[], None]]] = []
        self._cancelled: set[int] = set()
        self._seq = 0
        self.now = 0

    def at(self, time: int, action: Callable[[], None]) -> int:
        """Run ``action`` at ``time``; returns the event's ``seq``."""
        if not isinstance(time, int):
            raise TypeError(f"event time must be an int number of ps, found {time!r}")
        if time < self.now:
            raise ValueError(f"event scheduled in the past: {time} ps < now {self.now} ps")
        return self.after(time - self.now, action)

    def after(self, delay: int, action: Callable[[], None]) -> int:
        """``at(now + delay, ...)``."""
        if type(delay) is not int or delay < 0:
            return self.at(self.now + delay, action)   # raises the error of at
        seq = self._seq
        self._seq = seq + 1
        heappush(self._heap, (self.now + delay, seq, action))
        return seq

    def cancel(self, seq: int) -> None:
        """The event ``seq`` (still pending) will not run."""
        self._cancelled.add(seq)

    def run(self) -> int:
        """Process events until the queue is empty; returns the final time."""
        heap, cancelled = self._heap, self._cancelled
        while heap:
            time, seq, action = heappop(heap)
            if cancelled and seq in cancelled:
                cancelled.discard(seq)
                continue
            self.now = time
            action()
        return self.now

    def __len__(self) -> int:
        return sum(1 for event in self._heap if event[1] not in self._cancelled)
