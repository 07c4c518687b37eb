"""The systems and placements the pricer tests sweep: PIM under AttAcc's schedule (context unit
16) and the command model (unit 1), unfused and fused GPU kernels, FC and attention on every
device the system has."""
from collections.abc import Iterator
from typing import Callable

import pytest

from sim.cost.system import System, clear_caches

EVERY_SYSTEM = pytest.mark.parametrize(("name", "calibration"), [
    (name, calibration) for calibration in ("attacc", "physical") for name in ("saddle", "dgx-a100")])


def pricers(system: System, other: str) -> Iterator[tuple[dict[str, str], Callable, Callable]]:
    """For every (FC, attention) mapping ``system`` can run OPT-1.3B with, on cold memos:
    (mapping, its ``step_pricer``, its pricer ``other``, e.g. ``round_pricer``) on one device."""
    places = ("gpu", "pim") if system.pim else ("gpu",)
    for fc in places:
        for attention in places:
            mapping = {"fc": fc, "attention": attention}
            clear_caches()
            yield (mapping, system.step_pricer("opt-1.3b", mapping=mapping, devices=1),
                   getattr(system, other)("opt-1.3b", mapping=mapping, devices=1))
