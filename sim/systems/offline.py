"""Choices made offline, before a run, from the cost model and the validation split only.

- ``specpim_mapping``: SpecPIM's design-space search: every placement of DLM FC, DLM attention
  and TLM attention on GPU or PIM (TLM FC on the GPUs) priced for one round (d DLM steps of a
  micro-batch and a TLM pass of d + 1 queries per request) at the initial batch size and the
  maximum sequence length; the fastest wins.
- ``search_draft_length``: a fixed d (``draft_length: search``): the d in [1, d_max] maximising
  expected tokens per round (1 + sum_k P(k leading draft tokens accepted), measured over every
  output position of the validation split) per round time.
- ``scheduler_thresholds``: the Scheduler's crossovers in its own units: the fewest drafting
  requests for which a DLM step with FC on the GPU is not slower than on PIM, and the fewest
  draft tokens per request for which a TLM pass with attention on the GPU is not slower.
- ``verify_capacity``: the tokens one TLM pass verifies (the paper's "what the GPU can verify
  at once"; readings compared in sim/README.md): ``ridge``, the most for which every TLM FC
  GEMM stays memory-bound (up to there a pass costs one streaming of the weights);
  ``fc_slack``, the most whose TLM FC time stays within ``1 + slack`` of one token's;
  ``pool``, the Shared Pool's size. The Manager is given max(that, batch), capped by the pool.
  (``cost``, SADDLE+'s: the ridge, and the pass planner picks the prefix.)
- SADDLE+ (sim/manager/planner.py): ``pass_costs``, the planner's table (a pass's cost per 16
  tokens at one query per request, each request's attention at the mean context), and
  ``locked_dlm_fc_threshold``, the DLM FC crossover of a step that shares the devices with a
  pass (the background rate of sim/engine/devices.py).
"""
from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np

from sim.engine.costs import CostAdapter
from sim.manager.planner import COST_BUCKET
from sim.systems.spec import CapacityRule
from traces.format import RequestTrace


def _round_ps(costs: CostAdapter, mapping: dict[str, str], batch: int, context: int, d: int) -> int:
    per_mb = -(-batch // costs.n_devices)
    dlm = costs.price("dlm", ((context, 1),) * per_mb, mapping["dlm_fc"], mapping["dlm_attention"], 1)
    tlm = costs.price("tlm", ((context, d + 1),) * batch, mapping["tlm_fc"], mapping["tlm_attention"],
                      costs.n_devices)
    return d * dlm.work.time_ps + tlm.work.time_ps


def placements(pim: bool) -> list[dict[str, str]]:
    """SpecPIM's design space: DLM FC, DLM attention, TLM attention each on GPU or PIM."""
    places = ("gpu", "pim") if pim else ("gpu",)
    return [{"dlm_fc": dlm_fc, "dlm_attention": dlm_attn, "tlm_fc": "gpu", "tlm_attention": tlm_attn}
            for dlm_fc, dlm_attn, tlm_attn in itertools.product(places, repeat=3)]


def specpim_mapping(costs: CostAdapter, batch: int, max_seq_len: int, d: int,
                    fits: Callable[[dict[str, str]], bool] = lambda m: True) -> dict[str, str]:
    """The fastest placement among those that ``fits`` (all, when none does: the run's memory
    check then names what does not fit)."""
    mappings = placements(costs.system.pim is not None)
    mappings = [m for m in mappings if fits(m)] or mappings
    return min(mappings, key=lambda m: _round_ps(costs, m, batch, max_seq_len, d))   # the first of ties


def acceptance_profile(requests: tuple[RequestTrace, ...], d_max: int) -> np.ndarray:
    """``out[k]`` = P(at least k+1 leading draft tokens accepted), over every output position."""
    counts = np.zeros(d_max + 1, dtype=np.int64)
    for r in requests:
        counts += np.bincount(r.leading_accepted_all(d_max), minlength=d_max + 1)
    at_least = counts[::-1].cumsum()[::-1]
    return at_least[1:] / at_least[0]


def search_draft_length(costs: CostAdapter, mapping_for, requests: tuple[RequestTrace, ...],
                        batch: int, context: int, d_max: int) -> tuple[int, dict[str, str]]:
    """(d, mapping) maximising expected tokens per second of a round; ``mapping_for(d)``
    gives the mapping used with d (static, or SpecPIM's search)."""
    profile = acceptance_profile(requests, d_max)
    choices = [(d, mapping_for(d)) for d in range(1, d_max + 1)]
    return max(choices, key=lambda c: (1 + profile[:c[0]].sum())    # the first of ties
               / _round_ps(costs, c[1], batch, context, c[0]))


def scheduler_thresholds(costs: CostAdapter, mapping: dict[str, str], batch: int,
                         context: int, max_batch: int, max_tokens: int) -> tuple[int, int]:
    if costs.system.pim is None:
        return 0, 0

    def dlm(requests: int, fc: str) -> int:
        return costs.price("dlm", ((context, 1),) * requests, fc, mapping["dlm_attention"],
                           1).work.time_ps

    def tlm(draft: int, attention: str) -> int:
        return costs.price("tlm", ((context, draft + 1),) * batch, "gpu", attention,
                           costs.n_devices).work.time_ps
    return (next((b for b in range(1, max_batch + 1) if dlm(b, "gpu") <= dlm(b, "pim")), max_batch),
            next((q for q in range(1, max_tokens + 1) if tlm(q, "gpu") <= tlm(q, "pim")), max_tokens))


def verify_capacity(costs: CostAdapter, pool_entries: int, rule: CapacityRule | str,
                    slack: float | None = None) -> int:
    """The pass capacity under ``rule`` before the batch floor (see the module's docstring)."""
    rule = CapacityRule(rule)
    if rule is CapacityRule.COST:
        rule = CapacityRule.RIDGE
    if rule is CapacityRule.POOL:
        return pool_entries
    limit = 0.0
    if rule is CapacityRule.FC_SLACK:
        assert slack is not None
        one = costs.price("tlm", ((2, 1),), "gpu", "gpu", costs.n_devices)
        limit = one.cost.fc_ps * (1 + slack)

    def exceeds(n: int) -> bool:
        if rule is CapacityRule.RIDGE:
            return costs.tlm_fc_compute_bound(n)
        return costs.price("tlm", ((n + 1, n),), "gpu", "gpu", costs.n_devices).cost.fc_ps > limit
    n = 1
    while n < pool_entries and not exceeds(n + 1):
        n += 1
    return n


COST_UNIT_PS = 1 << 16     # the planner's cost unit (planner.py)


def pass_costs(costs: CostAdapter, mapping: dict[str, str], batch: int, context: int,
               entries: int) -> tuple[list[int], int]:
    """The planner's ``fc`` and ``per_request`` (integers of 2**16 ps, rounded up)."""
    n_dev = costs.n_devices

    def tlm(requests: tuple) -> int:
        return costs.price("tlm", requests, "gpu", mapping["tlm_attention"], n_dev).work.time_ps

    def units(ps: int) -> int:
        return -(-ps // COST_UNIT_PS)
    sizes = [1] + list(range(COST_BUCKET, entries + COST_BUCKET, COST_BUCKET))
    fc = [units(tlm(((n + 1, n),))) for n in sizes]
    attention = tlm(((context, 1),) * batch) - tlm(((2, 1),) * batch)
    return fc, units(max(0, attention) // batch)


def locked_dlm_fc_threshold(costs: CostAdapter, mapping: dict[str, str], batch: int,
                            context: int, max_batch: int) -> int:
    """The fewest drafting requests for which a DLM step with FC on the GPU, sharing the
    devices with a pass of two queries per request, ends no later than with FC on PIM."""
    gpu_busy, pim_busy = costs.price("tlm", ((context, 2),) * batch, "gpu", mapping["tlm_attention"],
                                     costs.n_devices).work.shares

    def shared(requests: int, fc: str) -> float:
        work = costs.price("dlm", ((context, 1),) * requests, fc, mapping["dlm_attention"], 1).work
        rate = min([1.0] + [free / need for free, need in ((1 - gpu_busy, work.shares[0]),
                                                          (1 - pim_busy, work.shares[1])) if need > 0])
        return work.time_ps / rate if rate > 0 else float("inf")
    return next((b for b in range(1, max_batch + 1) if shared(b, "gpu") <= shared(b, "pim")), max_batch)
