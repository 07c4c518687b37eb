"""The Scheduler's offline thresholds: where the GPU starts to beat PIM.

Both compare whole steps priced by ``System.price_step`` with the operator on the GPU and on
PIM, everything else equal, so transfers and the other operators count as they would at run
time. Ties go to PIM (the GPU must be strictly faster).
"""
from __future__ import annotations

from common.errors import SaddleError
from sim.cost.system import System
from sim.model import ModelSpec


def _need_pim(system: System) -> None:
    if system.pim is None:
        raise SaddleError(f"{system.name} has no PIM: there is no GPU/PIM crossover to measure")


def dlm_fc_crossover(system: System, dlm: ModelSpec | str, *, context: int,
                     max_batch: int = 512, power_constrained: bool = False) -> int | None:
    """Smallest effective batch (requests still drafting, q = 1, each at ``context``) at which
    the DLM step on one device is faster with FC on the GPU than on PIM; None up to max_batch."""
    _need_pim(system)
    for batch in range(1, max_batch + 1):
        reqs = [(context, 1)] * batch
        gpu = system.price_draft(dlm, reqs, fc="gpu", power_constrained=power_constrained)
        pim = system.price_draft(dlm, reqs, fc="pim", power_constrained=power_constrained)
        if gpu.time_ps < pim.time_ps:
            return batch
    return None


def tlm_attention_crossover(system: System, tlm: ModelSpec | str, *, batch: int, context: int,
                            max_queries: int = 64, power_constrained: bool = False) -> int | None:
    """Smallest query-token count per request (``batch`` requests at ``context``) at which the
    TLM verification pass over all devices is faster with attention on the GPU than on PIM;
    None up to max_queries."""
    _need_pim(system)
    for q in range(1, min(max_queries, context) + 1):
        reqs = [(context, q)] * batch
        gpu = system.price_verify(tlm, reqs, attention="gpu", power_constrained=power_constrained)
        pim = system.price_verify(tlm, reqs, attention="pim", power_constrained=power_constrained)
        if gpu.time_ps < pim.time_ps:
            return q
    return None
