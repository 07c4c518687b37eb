"""A prediction step (one query per request) goes through the one entry point,
``StepModel.price``, with warm memos shared with other steps: checked against ``price_step``
on cold memos, on every kind of attention (PIM under AttAcc's schedule, context unit 16, and
the command model, unit 1; unfused and fused GPU kernels), FC on GPU and PIM; and the engine's
``CostAdapter.price_draft`` against its ``price`` of the same pairs, also once its tables
overflowed."""

import random

from sim.cost.system import load_hardware
from sim.engine.costs import CostAdapter
from tests.sim.cost.placements import EVERY_SYSTEM, pricers


def _steps(seed: int, count: int) -> list[tuple[int, ...]]:
    """Random steps: 1-20 requests, contexts 1-700 (some at a context unit's edge), and each
    step again one token later and in another order (memo hits on PIM and unfused GPU)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        n = rng.randint(1, 20)
        contexts = tuple(rng.choice((rng.randint(1, 700), 16 * rng.randint(1, 40),
                                     16 * rng.randint(1, 40) + 1)) for _ in range(n))
        out += [contexts, tuple(c + 1 for c in contexts), tuple(reversed(contexts))]
    return out


def _pairs(contexts: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    return tuple((c, 1) for c in contexts)


@EVERY_SYSTEM
def test_a_draft_step_is_the_step_of_its_pairs(name, calibration):
    system = load_hardware(name, calibration)
    for mapping, price in pricers(system):
        for i, contexts in enumerate(_steps(1, 15)):
            [got] = price(contexts, (1,) * len(contexts))
            if i % 5 == 0 and min(contexts) > 1:      # other memo entries in between
                price(contexts, (2,) * len(contexts))
            assert got == system.price_step("opt-1.3b", _pairs(contexts), mapping=mapping,
                                            devices=1), (name, mapping, contexts)


def test_the_adapters_draft_step_is_its_price():
    """``StepPrice`` of ``price_draft`` against ``CostAdapter.price`` on a fresh adapter, and a
    repeated step answered from the adapter's cache."""
    for fc in ("gpu", "pim"):
        drafts = CostAdapter.named("saddle", "opt-66b", "opt-1.3b")
        steps = CostAdapter.named("saddle", "opt-66b", "opt-1.3b")
        for contexts in _steps(3, 20):
            got = drafts.price_draft(contexts, fc, "pim")
            assert got == steps.price("dlm", _pairs(contexts), fc, "pim", 1)
            assert drafts.price_draft(contexts, fc, "pim") is got


def test_a_full_table_is_emptied_and_its_prices_found_again():
    """``PriceCache``'s limit: no table keyed by a step holds more entries; a step asked again after its entry
    was dropped gets an equal price (prices are pure functions of the step)."""
    small = CostAdapter.named("saddle", "opt-66b", "opt-1.3b")
    small.cache.limit = 7
    fresh = CostAdapter.named("saddle", "opt-66b", "opt-1.3b")
    steps = _steps(5, 12)
    first = [small.price_draft(contexts, "pim", "pim") for contexts in steps]
    by_step = [t for name, t in small.cache._tables.items() if name[0] in ("engine draft", "step")]
    assert max(map(len, by_step)) == 7
    for contexts, got in zip(steps, first):
        assert small.price_draft(contexts, "pim", "pim") == got == fresh.price_draft(contexts, "pim", "pim")
