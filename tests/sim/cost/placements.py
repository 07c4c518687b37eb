"""The systems and placements the pricer tests sweep: PIM under AttAcc's schedule (context unit
16) and the command model (unit 1), unfused and fused GPU kernels, FC and attention on every
device the system has."""
from collections.abc import Callable, Iterator

import pytest

from sim.cost.step import PriceCache, StepCost
from sim.cost.system import System

EVERY_SYSTEM = pytest.mark.parametrize(("name", "calibration"), [
    (name, calibration) for calibration in ("attacc", "physical") for name in ("saddle", "dgx-a100")])


def pricers(system: System) -> Iterator[tuple[dict[str, str], Callable[..., StepCost]]]:
    """For every (FC, attention) mapping ``system`` can run OPT-1.3B with, on one device:
    (mapping, ``price(contexts, queries, steps=1)``: ``StepModel.price``'s steps as
    ``StepCost``s, through one ``StepModel`` whose memos start cold and stay warm)."""
    places = ("gpu", "pim") if system.pim else ("gpu",)
    for fc in places:
        for attention in places:
            mapping = {"fc": fc, "attention": attention}
            model = system.step_model("opt-1.3b", mapping=mapping, devices=1, cache=PriceCache())
            yield mapping, lambda contexts, queries, steps=1, model=model: [
                StepCost.of(p) for p in model.price(contexts, queries, steps)]
