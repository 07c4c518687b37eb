"""``IntervalLog`` keeps each lane's starts and ends in int64 arrays: what it shows
(``intervals``, ``spans``) is what a plain list of (start, end, work) per lane would give."""
import random

import numpy as np

from sim.engine.devices import IntervalLog, Work


def test_intervals_and_spans_are_the_logged_tuples():
    rng = random.Random(5)
    log, reference = IntervalLog(), {}
    for _ in range(3000):
        lane = rng.choice(("TLM", "DLM/mb0", "DLM/mb1", "DLMX", "monitor/mb0", "decide"))
        start = rng.randint(0, 10**15)
        end = start + rng.choice((0, 1, rng.randint(1, 10**9)))        # empty intervals are not kept
        work = Work(end - start, 0, 0) if lane.startswith(("TLM", "DLM")) else None
        log.add(lane, start, end, work)
        if end > start:
            reference.setdefault(lane, []).append((start, end, work))
    assert list(log.intervals) == list(reference) and dict(log.intervals) == reference
    for prefix in ("TLM", "DLM", "monitor", "decide", "absent"):
        want = [(s, e) for lane, spans in reference.items() if lane == prefix or lane.startswith(prefix + "/")
                for s, e, _ in spans]
        got = log.spans(prefix)
        assert got.dtype == np.int64 and got.shape == (len(want), 2) and got.tolist() == [list(x) for x in want]
