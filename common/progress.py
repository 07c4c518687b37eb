"""Progress of a grid on stderr: a bar on a terminal; elsewhere (a log, CI) one line every
``SADDLE_PROGRESS_INTERVAL`` seconds (default 10); both end with one summary line that stays.
``announce`` says what a long step before the runs is doing once it has taken a second.

The lines are printed by a ``SIGALRM`` interval timer in the main thread (no thread: the local
backend forks its workers from a single thread); off the main thread only the summary is.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

DEFAULT_INTERVAL = 10.0


def interval() -> float:
    """Seconds between two progress lines (``SADDLE_PROGRESS_INTERVAL``)."""
    text = os.environ.get("SADDLE_PROGRESS_INTERVAL", "")
    try:
        value = float(text) if text else DEFAULT_INTERVAL
    except ValueError:
        value = DEFAULT_INTERVAL
    return value if value > 0 else DEFAULT_INTERVAL


def _say(line: str) -> None:
    try:
        print(f"saddle: {line}", file=sys.stderr, flush=True)
    except (OSError, ValueError, RuntimeError):
        pass    # stderr closed, or in the middle of a write (reentrant): not worth an error


@contextmanager
def every(seconds: float, first: float, report: Callable[[], str]) -> Iterator[None]:
    """Print ``report()`` after ``first`` seconds, then every ``seconds``, while the block runs
    (main thread only; elsewhere nothing)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGALRM, lambda *_: _say(report()))
    signal.setitimer(signal.ITIMER_REAL, first, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextmanager
def announce(what: str, after: float = 1.0) -> Iterator[None]:
    """Say ``what`` is being done (with the time so far) if it takes longer than ``after``."""
    start = time.monotonic()
    with every(interval(), after, lambda: f"{what} ({time.monotonic() - start:.0f} s)"):
        yield


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m // 60}:{m % 60:02d}:{s:02d}" if m >= 60 else f"{m}:{s:02d}"


class Progress:
    """Counts of a grid's runs; ``bar``: a tqdm bar (a terminal), else timed lines."""

    def __init__(self, name: str, total: int, saved: int, bar: bool) -> None:
        self.name, self.total, self.saved = name, total, saved
        self.simulated = self.failed = self.shared = 0
        self.start = time.monotonic()
        self.bar = None
        if bar:
            from tqdm import tqdm
            # No monitor thread: the local backend forks its workers only from a single thread.
            tqdm.monitor_interval = 0
            self.bar = tqdm(total=total, initial=saved, desc=name, unit="run", leave=False,
                            mininterval=0)

    @property
    def done(self) -> int:
        return self.saved + self.shared + self.simulated + self.failed

    def ended(self, failed: bool, shared: bool = False) -> None:
        """A run ended: simulated here (or failed), or ``shared``: saved by another process."""
        self.failed += failed
        self.shared += shared
        self.simulated += not failed and not shared
        if self.bar is not None:
            if self.failed:
                self.bar.set_postfix(failed=self.failed, refresh=False)
            self.bar.update(1)

    def line(self) -> str:
        """The timed line: runs done of all, failed, elapsed and an estimate of the time left."""
        elapsed = time.monotonic() - self.start
        ran = self.simulated + self.failed
        left = self.total - self.done
        eta = f", about {_clock(elapsed / ran * left)} left" if ran and left else ""
        failed = f", {self.failed} failed" if self.failed else ""
        return f"{self.name}: {self.done} of {self.total} runs done{failed}, {_clock(elapsed)} elapsed{eta}"

    @contextmanager
    def running(self) -> Iterator[None]:
        if self.bar is not None:
            try:
                yield
            finally:
                self.bar.close()
            return
        with every(interval(), interval(), self.line):
            yield

    def summary(self) -> str:
        parts = [f"{self.simulated} simulated", f"{self.saved} reused"]
        if self.shared:
            parts.append(f"{self.shared} simulated by another process")
        if self.failed:
            parts.append(f"{self.failed} failed")
        return (f"{self.name}: {self.total} runs: {', '.join(parts)} in "
                f"{_clock(time.monotonic() - self.start)}")
