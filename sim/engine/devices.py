"""Devices as shared resources, with a fluid model of two models running at once.

A step (a DLM prediction step, a TLM pass) is a ``Work`` (``sim.cost.step``): its time alone
and how long it keeps each GPU and PIM device busy. When drafting overlaps verification (the
Eager Pool systems), the TLM pass is the foreground job: it spans every device at full speed.
Each micro-batch's DLM stream is a background job on its own device and gets the capacity the
pass leaves: if the pass keeps the device's GPU busy a fraction u of the time and the DLM step
alone a fraction v, the step runs at rate min(1, (1 - u) / v) (likewise for PIM). Rates change
only when a job starts or ends, so completion times stay exact integers (ceil). The TLM has
priority (our choice): it is on every request's critical path.
"""
from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np

from sim.cost.step import Work
from sim.engine.events import EventQueue


class _Running:
    # A plain class: its constructor runs per step (sim/cost/value.py says why).
    __slots__ = ("lane", "work", "on_done", "start", "remaining", "rate", "since", "event")

    def __init__(self, lane: str, work: Work, on_done: Callable[[], None], start: int,
                 remaining: float, rate: float, since: int) -> None:
        self.lane, self.work, self.on_done, self.start = lane, work, on_done, start
        self.remaining = remaining     # nominal ps still to run (at rate 1)
        self.rate, self.since = rate, since
        self.event: int | None = None  # the seq of its completion event


class DeviceSet:
    """``n_devices`` identical devices (one GPU and its PIM stacks each), one foreground slot
    spanning all of them and one background slot per device."""

    def __init__(self, queue: EventQueue, n_devices: int, log: IntervalLog) -> None:
        self.queue = queue
        self.n_devices = n_devices
        self.log = log
        self.foreground: _Running | None = None
        self.background: dict[int, _Running] = {}
        self.gpu_busy_ps = 0      # device-ps summed over devices
        self.pim_busy_ps = 0
        # The (GPU, PIM) capacity the foreground job leaves, max(0, 1 - its share): once a pass.
        self._free: tuple[float, float] = (1.0, 1.0)
        # Each device's background completion action, built once, not once per step.
        self._finish = [partial(self._finish_background, device) for device in range(n_devices)]

    # -- starting jobs -------------------------------------------------------------------
    def start_foreground(self, lane: str, work: Work, on_done: Callable[[], None]) -> None:
        if self.foreground is not None:
            raise RuntimeError(f"foreground busy with {self.foreground.lane}")
        now = self.queue.now
        job = self.foreground = _Running(lane, work, on_done, now, float(work.time_ps), 1.0, now)
        gpu_used, pim_used = work.shares
        self._free = (max(0.0, 1.0 - gpu_used), max(0.0, 1.0 - pim_used))
        self._account(work)
        job.event = self.queue.after(work.time_ps, self._finish_foreground)
        self._rerate()

    def start_background(self, device: int, lane: str, work: Work,
                         on_done: Callable[[], None]) -> None:
        if not 0 <= device < self.n_devices:
            raise ValueError(f"device {device} out of range 0..{self.n_devices - 1}")
        background = self.background
        if device in background:
            raise RuntimeError(f"device {device} background busy with {background[device].lane}")
        now = self.queue.now
        rate = 1.0 if self.foreground is None else self._background_rate(work)
        job = background[device] = _Running(lane, work, on_done, now, float(work.time_ps), rate, now)
        self._account(work)
        if rate == 1.0:       # what _schedule computes, without the float arithmetic
            job.event = self.queue.after(work.time_ps, self._finish[device])
        else:
            self._schedule(device, job)

    def run_series(self, device: int, lane: str, works: Sequence[Work], starts: list[int],
                   ends: list[int]) -> None:
        """Background steps on ``device`` from ``starts`` (in order, none overlapping; ``ends``:
        each start + its ``time_ps``), simulated without an event by a caller that knows
        nothing else runs beside them (lock-step drafting), booked at once."""
        if self.foreground is not None or device in self.background:
            raise RuntimeError(f"{lane}: device {device} is not alone")
        self.gpu_busy_ps += sum([work.gpu_ps * work.devices for work in works])
        self.pim_busy_ps += sum([work.pim_ps * work.devices for work in works])
        self.log.add_series(lane, starts, ends, works)

    def run_alone(self, device: int, lane: str, work: Work, start: int) -> int:
        """``run_series`` of one step; returns its end."""
        end = start + work.time_ps
        self.run_series(device, lane, [work], [start], [end])
        return end

    def busy_background(self, device: int) -> bool:
        return device in self.background

    # -- internals -----------------------------------------------------------------------
    def _account(self, work: Work) -> None:
        self.gpu_busy_ps += work.gpu_ps * work.devices
        self.pim_busy_ps += work.pim_ps * work.devices

    def _background_rate(self, work: Work) -> float:
        if self.foreground is None:
            return 1.0
        # min(1, (1 - u) / v) over the resources the step uses, GPU then PIM.
        # Two plain unpackings: a nested one compiles to generic iteration over boxed floats.
        gpu_free, pim_free = self._free
        gpu_need, pim_need = work.shares
        rate = 1.0
        if gpu_need > 0:
            rate = min(rate, gpu_free / gpu_need)
        if pim_need > 0:
            rate = min(rate, pim_free / pim_need)
        return rate

    def _schedule(self, device: int, job: _Running) -> None:
        """The completion event of ``job`` for its remaining work at its rate (none at rate 0)."""
        rate = job.rate
        if rate > 0:
            delay = math.ceil(job.remaining / rate - 1e-9) if job.remaining > 1e-9 else 0
            job.event = self.queue.after(delay, self._finish[device])

    def _rerate(self) -> None:
        """The foreground job started or ended: every background job's progress is booked at
        its old rate and its completion rescheduled at its new one."""
        now = self.queue.now
        for device in sorted(self.background):
            job = self.background[device]
            job.remaining = max(0.0, job.remaining - (now - job.since) * job.rate)
            job.since, job.rate = now, self._background_rate(job.work)
            if job.event is not None:
                self.queue.cancel(job.event)
                job.event = None
            self._schedule(device, job)

    def _finish_foreground(self) -> None:
        job = self.foreground
        assert job is not None
        self.foreground = None
        self.log.add(job.lane, job.start, self.queue.now, job.work)
        self._rerate()
        job.on_done()

    def _finish_background(self, device: int) -> None:
        job = self.background.pop(device)
        self.log.add(job.lane, job.start, self.queue.now, job.work)
        job.on_done()


class IntervalLog:
    """Closed intervals per lane (``TLM``, ``DLM/mb3``, ``monitor/mb3``, ``decide``), each
    with the Work that ran in it (None for Manager activity), for metrics and the timeline;
    starts and ends in int64 ``array``s (read by numpy without an object per interval)."""

    def __init__(self) -> None:
        self._lanes: dict[str, tuple[array, array, list[Work | None]]] = {}

    def add(self, lane: str, start: int, end: int, work: Work | None = None) -> None:
        if end > start:
            found = self._lanes.get(lane)
            if found is None:
                found = self._lanes[lane] = (array("q"), array("q"), [])
            starts, ends, works = found
            starts.append(start)
            ends.append(end)
            works.append(work)

    def add_series(self, lane: str, starts: list[int], ends: list[int], works: Sequence[Work | None]) -> None:
        """``add`` of each (start, end, work) in order, the lane's arrays extended at once."""
        if not all(map(int.__lt__, starts, ends)):     # an empty interval is not logged
            for interval in zip(starts, ends, works):
                self.add(lane, *interval)
            return
        found = self._lanes.get(lane)
        if found is None:
            found = self._lanes[lane] = (array("q"), array("q"), [])
        found[0].extend(starts)
        found[1].extend(ends)
        found[2].extend(works)

    @property
    def intervals(self) -> dict[str, list[tuple[int, int, Work | None]]]:
        """Lane -> its (start, end, work) intervals in the order logged."""
        return {lane: list(zip(*found)) for lane, found in self._lanes.items()}

    def spans(self, prefix: str) -> np.ndarray:
        """(start, end) of all intervals of lanes named ``prefix`` or ``prefix/...``, in lane
        then log order, as an (n, 2) int64 array."""
        lanes = [(starts, ends) for lane, (starts, ends, _) in self._lanes.items()
                 if lane == prefix or lane.startswith(prefix + "/")]
        # np.array copies each buffer (a view would keep the array from growing).
        return np.column_stack((np.concatenate([np.array(s, dtype=np.int64) for s, _ in lanes] or [_NONE]),
                                np.concatenate([np.array(e, dtype=np.int64) for _, e in lanes] or [_NONE])))


_NONE = np.empty(0, dtype=np.int64)
