"""Chrome/Perfetto trace (JSON, ``chrome://tracing`` or ui.perfetto.dev) of one run: lanes
``TLM``, ``DLM/mbN``, ``monitor/mbN`` and ``decide``, and counter tracks ``GPU`` and ``PIM``
with the devices' busy fraction (each step's average share over its interval).
"""
from __future__ import annotations

import json
from pathlib import Path

from sim.engine.devices import IntervalLog

_PS_PER_US = 1_000_000


def _us(ps: int) -> float:
    return ps / _PS_PER_US


def timeline_events(log: IntervalLog, n_devices: int) -> list[dict]:
    intervals = log.intervals
    lanes = sorted(intervals, key=lambda n: (not n.startswith("TLM"), n))
    events: list[dict] = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0,
                           "args": {"name": "SADDLE simulator"}}]
    deltas: dict[str, dict[int, float]] = {"GPU": {}, "PIM": {}}
    for tid, lane in enumerate(lanes, start=1):
        events.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": tid,
                       "args": {"name": lane}})
        for start, end, work in intervals[lane]:
            events.append({"ph": "X", "name": lane.split("/")[0], "pid": 1, "tid": tid,
                           "ts": _us(start), "dur": _us(end - start)})
            if work is None:
                continue
            for track, busy in (("GPU", work.gpu_ps), ("PIM", work.pim_ps)):
                share = busy * work.devices / (end - start) / n_devices
                if share:
                    deltas[track][start] = deltas[track].get(start, 0.0) + share
                    deltas[track][end] = deltas[track].get(end, 0.0) - share
    for track, changes in deltas.items():
        level = 0.0
        for time in sorted(changes):
            level += changes[time]
            events.append({"ph": "C", "name": track, "pid": 1, "ts": _us(time),
                           "args": {"busy": round(max(level, 0.0), 6)}})
    return events


def write_timeline(path: str | Path, log: IntervalLog, n_devices: int) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        json.dump({"traceEvents": timeline_events(log, n_devices), "displayTimeUnit": "ms"}, f)
