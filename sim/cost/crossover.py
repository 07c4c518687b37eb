"""The Scheduler's offline thresholds: where the GPU starts to beat PIM.

Both compare whole steps priced by ``System.price_step`` with the operator on the GPU and on
PIM, everything else equal, so transfers and the other operators count as they would at run
time. Ties go to PIM (the GPU must be strictly faster).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

from common.errors import SaddleError
from sim.cost.system import StepCost, System
from sim.model import ModelSpec


def _first_gpu_win(system: System, sizes: Iterable[int],
                   price: Callable[[int, str], StepCost]) -> int | None:
    """The first size at which ``price(size, "gpu")`` is faster than ``price(size, "pim")``."""
    if system.pim is None:
        raise SaddleError(f"{system.name} has no PIM: there is no GPU/PIM crossover to measure")
    return next((n for n in sizes if price(n, "gpu").time_ps < price(n, "pim").time_ps), None)


def dlm_fc_crossover(system: System, dlm: ModelSpec | str, *, context: int,
                     max_batch: int = 512, power_constrained: bool = False) -> int | None:
    """Smallest effective batch (requests still drafting, q = 1, each at ``context``) at which
    the DLM step on one device is faster with FC on the GPU than on PIM; None up to max_batch."""
    price = lambda batch, fc: system.price_draft(dlm, [(context, 1)] * batch, fc=fc,
                                                 power_constrained=power_constrained)
    return _first_gpu_win(system, range(1, max_batch + 1), price)


def tlm_attention_crossover(system: System, tlm: ModelSpec | str, *, batch: int, context: int,
                            max_queries: int = 64, power_constrained: bool = False) -> int | None:
    """Smallest query-token count per request (``batch`` requests at ``context``) at which the
    TLM verification pass over all devices is faster with attention on the GPU than on PIM;
    None up to max_queries."""
    price = lambda q, attention: system.price_verify(tlm, [(context, q)] * batch,
                                                     attention=attention,
                                                     power_constrained=power_constrained)
    return _first_gpu_win(system, range(1, min(max_queries, context) + 1), price)
