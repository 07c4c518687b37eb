"""A planned draft round is the one entry point, ``StepModel.price``, applied to each of the
round's steps: ``CostAdapter.price_round`` against ``CostAdapter.price`` step by step on a
fresh adapter, and the round's steps on warm memos against ``price_step`` on cold ones, on
every kind of attention and FC on GPU and PIM."""

import random

from sim.cost.system import load_hardware
from sim.engine.costs import CostAdapter
from tests.sim.cost.placements import EVERY_SYSTEM, pricers


def _rounds(seed: int, count: int) -> list[tuple[list[int], list[int]]]:
    """Random rounds: 1-20 requests, contexts 1-700 (some at a context unit's edge), caps 1-12
    (fewer at the output's end), and the same round again one step later (memo hits)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        n = rng.randint(1, 20)
        contexts = [rng.choice((rng.randint(1, 700), 16 * rng.randint(1, 40), 16 * rng.randint(1, 40) + 1))
                    for _ in range(n)]
        caps = [rng.choice((8, 8, 8, rng.randint(1, 12))) for _ in range(n)]
        out += [(contexts, caps), ([c + 1 for c in contexts], caps)]
    return out


def _steps(contexts: list[int], caps: list[int]) -> list[tuple[tuple[int, int], ...]]:
    return [tuple((c + s, 1) for c, cap in zip(contexts, caps) if cap > s) for s in range(max(caps))]


@EVERY_SYSTEM
def test_a_rounds_steps_on_warm_memos_are_their_cold_prices(name, calibration):
    """``StepModel.price`` over a span of steps (every context one more per step) against
    ``price_step`` of each step alone."""
    system = load_hardware(name, calibration)
    for mapping, price in pricers(system):
        for contexts, caps in _rounds(1, 4):
            steps = max(caps)
            got = price(contexts, [1] * len(contexts), steps)
            for s, cost in enumerate(got):
                want = system.price_step("opt-1.3b", [(c + s, 1) for c in contexts],
                                         mapping=mapping, devices=1)
                assert cost == want, (name, mapping, contexts, s)
            if min(contexts) > 2:       # more queries per request, as a span too
                got = price(contexts, [3] * len(contexts), 3)
                assert got[2] == system.price_step("opt-1.3b", [(c + 2, 3) for c in contexts],
                                                   mapping=mapping, devices=1)


def test_the_adapters_round_is_its_steps():
    for fc in ("gpu", "pim"):
        rounds = CostAdapter.named("saddle", "opt-66b", "opt-1.3b")
        for contexts, caps in _rounds(3, 10):
            got = rounds.price_round("dlm", contexts, caps, fc, "pim", 1)
            steps = CostAdapter.named("saddle", "opt-66b", "opt-1.3b")
            assert got == [steps.price("dlm", reqs, fc, "pim", 1) for reqs in _steps(contexts, caps)]
        assert rounds.price_round("dlm", [], [], fc, "pim", 1) == []
