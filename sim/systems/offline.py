"""Choices made offline, before a run, from the cost model and the validation split only.

- ``specpim_mapping``: SpecPIM's design-space search. For the initial batch size and the
  maximum sequence length, every placement of DLM FC, DLM attention and TLM attention on GPU or
  PIM is priced for one round (d DLM steps of a micro-batch + one TLM pass with d + 1 queries
  per request); the fastest wins. TLM FC stays on the GPUs.
- ``search_draft_length``: the fixed d of GPU-SD / PIM-SD when an experiment says
  ``draft_length: search``: the d in [1, d_max] maximising expected tokens per round / round
  time, with the expectation 1 + sum_k P(k leading draft tokens accepted) measured on the
  validation split through ``RequestTrace.leading_accepted_all`` (every output position).
- ``scheduler_thresholds``: the Scheduler's crossovers, in its own units: the smallest number
  of drafting requests for which a DLM step with FC on the GPU is not slower than with FC on
  PIM, and the smallest number of draft tokens per request for which a TLM pass with attention
  on the GPU is not slower than on PIM.
- ``verify_capacity``: how many tokens one TLM pass verifies, the paper's "what the GPU can
  verify at once" (fig11), under one of three readings (``CAPACITY_RULES``; compared in
  sim/README.md, "How many tokens a pass verifies"):
  ``ridge`` (shipped): the most tokens for which every TLM FC GEMM stays memory-bound in the cost
  model (compute time, wave quantization included, not above memory time): up to there a pass
  costs one streaming of the weights, past it the GPU is compute-bound;
  ``fc_slack``: the most tokens whose TLM FC time stays within ``1 + slack`` of one token's
  (under a step-shaped GEMM model it stops at the first wave-quantization step, where the GEMMs
  are still memory-bound);
  ``pool``: the Shared Pool's size (the Manager, not the GPU, bounds a pass).
  The capacity N given to the Manager is max(that, batch size), capped by the Shared Pool size:
  a pass can always carry one token of every request of the batch, which autoregressive
  decoding computes anyway.
"""
from __future__ import annotations

import itertools

import numpy as np

from sim.engine.costs import CostAdapter
from sim.systems.spec import CapacityRule
from traces.format import RequestTrace


def _round_ps(costs: CostAdapter, mapping: dict[str, str], batch: int, context: int, d: int) -> int:
    per_mb = -(-batch // costs.n_devices)
    dlm = costs.price("dlm", ((context, 1),) * per_mb, mapping["dlm_fc"], mapping["dlm_attention"], 1)
    tlm = costs.price("tlm", ((context, d + 1),) * batch, mapping["tlm_fc"], mapping["tlm_attention"],
                      costs.n_devices)
    return d * dlm.work.time_ps + tlm.work.time_ps


def specpim_mapping(costs: CostAdapter, batch: int, max_seq_len: int, d: int) -> dict[str, str]:
    places = ("gpu", "pim") if costs.has_pim() else ("gpu",)
    mappings = [{"dlm_fc": dlm_fc, "dlm_attention": dlm_attn, "tlm_fc": "gpu",
                 "tlm_attention": tlm_attn}
                for dlm_fc, dlm_attn, tlm_attn in itertools.product(places, repeat=3)]
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
    if not costs.has_pim():
        return 0, 0
    dlm_fc = max_batch
    for b in range(1, max_batch + 1):
        reqs = ((context, 1),) * b
        gpu = costs.price("dlm", reqs, "gpu", mapping["dlm_attention"], 1).work.time_ps
        pim = costs.price("dlm", reqs, "pim", mapping["dlm_attention"], 1).work.time_ps
        if gpu <= pim:
            dlm_fc = b
            break
    tlm_attn = max_tokens
    for q in range(1, max_tokens + 1):
        reqs = ((context, q + 1),) * batch
        gpu = costs.price("tlm", reqs, "gpu", "gpu", costs.n_devices).work.time_ps
        pim = costs.price("tlm", reqs, "gpu", "pim", costs.n_devices).work.time_ps
        if gpu <= pim:
            tlm_attn = q
            break
    return dlm_fc, tlm_attn


def verify_capacity(costs: CostAdapter, pool_entries: int, rule: CapacityRule | str,
                    slack: float | None = None) -> int:
    """The pass capacity under ``rule`` before the batch floor (see the module's docstring)."""
    rule = CapacityRule(rule)
    if rule is CapacityRule.POOL:
        return pool_entries
    limit = 0.0
    if rule is CapacityRule.FC_SLACK:
        assert slack is not None
        limit = costs.price("tlm", ((2, 1),), "gpu", "gpu", costs.n_devices).cost.fc_ps * (1 + slack)

    def exceeds(n: int) -> bool:
        if rule is CapacityRule.RIDGE:
            return costs.tlm_fc_compute_bound(n)
        return costs.price("tlm", ((n + 1, n),), "gpu", "gpu", costs.n_devices).cost.fc_ps > limit
    n = 1
    while n < pool_entries and not exceeds(n + 1):
        n += 1
    return n
