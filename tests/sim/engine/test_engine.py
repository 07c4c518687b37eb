"""Event order, fluid device sharing and latency breakdown on hand-computed cases."""
import pytest

from sim.engine.devices import DeviceSet, IntervalLog, Work
from sim.engine.events import EventQueue
from sim.manager.transactions import DiscardReason
from sim.metrics import ConservationError, TokenCounts, latency_breakdown


def test_events_run_by_time_then_insertion():
    q, seen = EventQueue(), []
    q.at(5, lambda: seen.append("a"))
    q.at(5, lambda: seen.append("b"))
    q.at(5, lambda: seen.append("c"))
    q.at(2, lambda: seen.append("first"))
    e = q.at(3, lambda: seen.append("cancelled"))
    q.cancel(e)
    assert len(q) == 4
    assert q.run() == 5
    assert seen == ["first", "a", "b", "c"]


def test_event_in_the_past_and_float_time_are_refused():
    q = EventQueue()
    q.at(10, lambda: None)
    q.run()
    with pytest.raises(ValueError):
        q.at(5, lambda: None)
    with pytest.raises(TypeError):
        q.at(12.5, lambda: None)


def _run(fg: Work | None, bg: Work, bg_start: int = 0):
    q, log = EventQueue(), IntervalLog()
    dev = DeviceSet(q, 2, log)
    done = {}
    if fg is not None:
        dev.start_foreground("TLM", fg, lambda: done.setdefault("fg", q.now))
    q.at(bg_start, lambda: dev.start_background(0, "DLM/mb0", bg, lambda: done.setdefault("bg", q.now)))
    q.run()
    return done, dev, log


def test_background_alone_takes_its_time():
    done, _, _ = _run(None, Work(40, 40, 0))
    assert done == {"bg": 40}


def test_background_gets_the_gpu_capacity_the_foreground_leaves():
    # TLM keeps the GPU busy 50 % of its 100 ps; the DLM step needs the GPU all the time:
    # it runs at rate 0.5, so its 40 ps of work end at 80 ps.
    done, dev, _ = _run(Work(100, 50, 0, devices=2), Work(40, 40, 0))
    assert done == {"fg": 100, "bg": 80}
    assert dev.gpu_busy_ps == 50 * 2 + 40


def test_background_speeds_up_when_the_foreground_ends():
    # Rate 0.25 for 100 ps (25 ps of work done), then alone: 15 ps more -> 115.
    done, _, log = _run(Work(100, 75, 0), Work(40, 40, 0))
    assert done == {"fg": 100, "bg": 115}
    assert log.intervals["DLM/mb0"] == [(0, 115, Work(40, 40, 0))]


def test_disjoint_devices_overlap_perfectly():
    # TLM on the GPU, DLM on PIM: no contention.
    done, _, _ = _run(Work(100, 100, 0), Work(60, 0, 60), bg_start=10)
    assert done == {"fg": 100, "bg": 70}


def test_work_busier_than_its_duration_is_refused():
    with pytest.raises(ValueError):
        Work(10, 11, 0)


def test_latency_breakdown_partitions_the_run():
    log = IntervalLog()
    log.add("DLM/mb0", 0, 10)
    log.add("monitor/mb0", 10, 12)
    log.add("TLM", 5, 20)
    log.add("decide", 20, 21)
    out = latency_breakdown(log, 25)
    assert out == {"prediction": 5, "verification": 10, "monitoring": 0, "decision_making": 1,
                   "overlap": 5, "idle": 4}
    assert sum(out.values()) == 25


def test_latency_breakdown_of_an_empty_log_is_idle():
    assert latency_breakdown(IntervalLog(), 7) == {"prediction": 0, "verification": 0, "monitoring": 0,
                                                   "decision_making": 0, "overlap": 0, "idle": 7}


def test_latency_breakdown_with_shared_edges_and_repeats():
    # Intervals that start where others end, and the same interval twice: each instant once.
    log = IntervalLog()
    for lane, s, e in (("DLM/mb0", 0, 4), ("DLM/mb1", 0, 4), ("TLM", 4, 9), ("TLM", 9, 12),
                       ("monitor/mb0", 4, 6), ("DLM/mb0", 10, 12)):
        log.add(lane, s, e)
    assert log.spans("DLM").tolist() == [[0, 4], [10, 12], [0, 4]]
    assert latency_breakdown(log, 12) == {"prediction": 4, "verification": 6, "monitoring": 0,
                                          "decision_making": 0, "overlap": 2, "idle": 0}


def test_token_conservation_check_names_the_imbalance():
    t = TokenCounts(generated=5, drafted=6, accepted=3, rejected=1, tlm_tokens=2)
    t.discard(DiscardReason.REJECTED_PREFIX, 2)
    t.check(5)
    t.drafted += 1
    with pytest.raises(ConservationError, match="drafted 7"):
        t.check(5)
