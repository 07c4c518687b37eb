"""The planned draft round's pricer (``System.round_pricer``, ``CostAdapter.price_round``) is
the step pricer applied to each of the round's steps: checked on random rounds on every kind
of attention (PIM under AttAcc's schedule, context unit 16, and the command model, unit 1;
unfused and fused GPU kernels), FC on GPU and PIM, with the memos cold and warm."""

import random

from sim.cost.system import clear_caches, load_system
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
def test_a_round_is_its_steps_priced_one_by_one(name, calibration):
    system = load_system(name, calibration)
    for mapping, step, draft_round in pricers(system, "round_pricer"):
        for contexts, caps in _rounds(1, 12):
            got = draft_round(contexts, caps)
            assert got == [step(reqs) for reqs in _steps(contexts, caps)], (name, mapping, contexts, caps)
        # and each step priced alone on cold caches
        contexts, caps = _rounds(2, 1)[0]
        got = draft_round(contexts, caps)
        for priced, reqs in zip(got, _steps(contexts, caps), strict=True):
            clear_caches()
            assert priced == system.price_step("opt-1.3b", reqs, mapping=mapping, devices=1)


def test_the_adapters_round_is_its_steps():
    """The engine's form (``Priced``, one ``Work`` shared by the steps of a memo entry, their
    own operation counts) against ``CostAdapter.price`` step by step, on a fresh adapter."""
    for fc in ("gpu", "pim"):
        clear_caches()
        rounds = CostAdapter("saddle", "opt-66b", "opt-1.3b")
        for contexts, caps in _rounds(3, 10):
            got = rounds.price_round("dlm", contexts, caps, fc, "pim", 1)
            steps = CostAdapter("saddle", "opt-66b", "opt-1.3b")
            assert got == [steps.price("dlm", reqs, fc, "pim", 1) for reqs in _steps(contexts, caps)]
