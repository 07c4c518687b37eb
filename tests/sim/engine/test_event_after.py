"""``EventQueue.after`` (its push written out) is ``at(now + delay)``: the same order of
events, the same sequence numbers, the same errors."""
import random

import pytest

from sim.engine.events import EventQueue


def _run(use_after: bool) -> list[tuple[int, int, int]]:
    rng = random.Random(2)
    q = EventQueue()
    seen = []

    def action(name: int):
        def fire():
            seen.append((q.now, name))
            for _ in range(rng.randint(0, 2)):
                if len(seen) < 3000:
                    delay = rng.choice([0, 0, 1, 5, 40])
                    child = len(seen) * 10 + rng.randint(0, 9)
                    seq = (q.after(delay, action(child)) if use_after
                           else q.at(q.now + delay, action(child)))
                    seen.append(("seq", seq))
        return fire
    for i in range(20):
        q.at(rng.randint(0, 50), action(i))
    q.run()
    return seen


def test_after_is_at_now_plus_delay():
    assert _run(True) == _run(False)
    assert len(_run(True)) > 1000


def test_after_rejects_what_at_rejects():
    q = EventQueue()
    q.at(10, lambda: None)
    q.run()
    with pytest.raises(ValueError, match="in the past"):
        q.after(-1, lambda: None)
    # Compiled (build_compiled.py), the argument's int annotation is checked on entry.
    with pytest.raises(TypeError, match="must be an int|int object expected"):
        q.after(1.5, lambda: None)
    assert len(q) == 0
