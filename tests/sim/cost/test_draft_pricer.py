"""A prediction step priced by its contexts (``System.draft_pricer``, ``CostAdapter.price_draft``)
is the step pricer's price of the same requests with one query each: checked on random steps
on every kind of attention (PIM under AttAcc's schedule, context unit 16, and the command
model, unit 1; unfused and fused GPU kernels), FC on GPU and PIM, with the memos cold and warm,
and interleaved with the step pricer (the two share their memos)."""

import random

from sim.cost.system import clear_caches, load_system
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
    system = load_system(name, calibration)
    for mapping, step, draft in pricers(system, "draft_pricer"):
        for i, contexts in enumerate(_steps(1, 15)):
            # alternate which entry point fills the shared memos first
            first, second = (draft(contexts), step(_pairs(contexts)))[::1 if i % 2 else -1]
            assert first == second, (name, mapping, contexts)
        # each step alone on cold caches, against price_step
        for contexts in _steps(2, 3):
            got = draft(contexts)
            clear_caches()
            assert got == system.price_step("opt-1.3b", _pairs(contexts), mapping=mapping,
                                            devices=1), (name, mapping, contexts)


def test_the_adapters_draft_step_is_its_price():
    """The engine's form (``Priced``) against ``CostAdapter.price`` on a fresh adapter, and a
    repeated step answered from the adapter's cache."""
    for fc in ("gpu", "pim"):
        clear_caches()
        drafts = CostAdapter("saddle", "opt-66b", "opt-1.3b")
        steps = CostAdapter("saddle", "opt-66b", "opt-1.3b")
        for contexts in _steps(3, 20):
            got = drafts.price_draft(contexts, fc, "pim")
            assert got == steps.price("dlm", _pairs(contexts), fc, "pim", 1)
            assert drafts.price_draft(contexts, fc, "pim") is got
        assert drafts.calls == steps.calls
