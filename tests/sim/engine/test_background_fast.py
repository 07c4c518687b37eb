"""A background step's start: the rate-1 shortcut and the foreground's free capacity kept per
pass give what the plain formulas give."""
import math
import random

from sim.engine.devices import DeviceSet, IntervalLog, Work, _Running
from sim.engine.events import EventQueue


def _plain_rate(fg: Work | None, work: Work) -> float:
    """min(1, (1 - u) / v) over the resources the step uses, as the module doc states it."""
    if fg is None:
        return 1.0
    rate = 1.0
    for used, need in zip(fg.shares, work.shares):
        if need > 0:
            rate = min(rate, max(0.0, 1.0 - used) / need)
    return rate


def _plain_delay(work: Work, rate: float) -> int | None:
    """_schedule's completion delay of a fresh step (None at rate 0: no event)."""
    remaining = float(work.time_ps)
    if rate <= 0:
        return None
    return math.ceil(remaining / rate - 1e-9) if remaining > 1e-9 else 0


def _random_work(rng: random.Random) -> Work:
    t = rng.choice([0, 1, 2, 3, 999, 10 ** 6 + 7, rng.randrange(1, 10 ** 9), rng.randrange(2 ** 40, 2 ** 52)])
    gpu = rng.choice([0, t, rng.randint(0, t)])
    pim = rng.choice([0, t, rng.randint(0, t)])
    return Work(t, gpu, pim, rng.choice([1, 4]))


def test_started_step_ends_as_the_plain_formulas_say():
    rng = random.Random(7)
    shortcut = 0
    for _ in range(3000):
        queue = EventQueue()
        dev = DeviceSet(queue, 2, IntervalLog())
        fg = None if rng.random() < 0.3 else _random_work(rng)
        if fg is not None:
            dev.start_foreground("TLM", fg, lambda: None)
        work = _random_work(rng)
        dev.start_background(1, "DLM/mb1", work, lambda: None)
        job = dev.background[1]
        rate = _plain_rate(fg, work)
        assert job.rate == rate
        shortcut += rate == 1.0
        pending = {seq: time for time, seq, _ in queue._heap}
        delay = _plain_delay(work, rate)
        if delay is None:
            assert job.event is None
        else:
            assert pending[job.event] == delay
    assert 300 < shortcut < 2700     # both paths taken


def test_rate_one_shortcut_equals_schedule():
    # The shortcut against _schedule itself, on fresh jobs at rate 1 of every size class.
    for t in [0, 1, 2, 7, 10 ** 6, 2 ** 30 + 1, 2 ** 52 - 1, 2 ** 52, 2 ** 53 - 1]:
        queue = EventQueue()
        dev = DeviceSet(queue, 1, IntervalLog())
        work = Work(t, t, 0)
        dev.start_background(0, "DLM/mb0", work, lambda: None)
        fast = dev.background.pop(0).event
        job = _Running("DLM/mb0", work, lambda: None, 0, float(t), 1.0, 0)
        dev._schedule(0, job)
        times = {seq: time for time, seq, _ in queue._heap}
        assert times[fast] == times[job.event] == t
