"""The Scheduler: operation counts -> intensity estimates -> threshold comparison -> GPU or PIM.

Only the two operators whose intensity moves at run time are scheduled; DLM attention stays on
PIM and TLM FC on the GPU.

- DLM FC after a prediction step of a micro-batch: each of the b requests still drafting feeds
  one token through every FC matrix, so FC intensity with FP16 weights is about b FLOP/byte.
  Estimate = b / 1. GPU iff b >= dlm_fc_threshold.
- TLM attention before a verification: request i contributes q_i draft tokens as queries against
  its own KV cache, so attention intensity is about mean(q_i) FLOP/byte (times the GQA group
  size, a per-model constant folded into the measured threshold). Estimate = sum(q_i) / n over
  the n requests of the verification. GPU iff sum(q_i) >= tlm_attention_threshold * n, which a
  hardware block evaluates with one small multiplication and no division.

Thresholds are integers measured offline from the cost model with exactly these estimates.
With ``dynamic`` off (SADDLE-s) the static mapping is returned unchanged.
"""
from __future__ import annotations

from collections.abc import Iterable

from sim.manager.transactions import Device


def dlm_fc_estimate(drafting: int) -> tuple[int, int]:
    return drafting, 1


def tlm_attention_estimate(requests: Iterable[int]) -> tuple[int, int]:
    """(sum of queries, number of requests) for the selected tokens' request ids."""
    requests = list(requests)
    return len(requests), len(set(requests))


def at_or_above(numerator: int, denominator: int, threshold: int) -> bool:
    return numerator >= threshold * denominator


class Scheduler:
    def __init__(self, dynamic: bool, dlm_fc_threshold: int, tlm_attention_threshold: int,
                 static_dlm_fc: Device, static_tlm_attention: Device):
        self.dynamic = dynamic
        self.dlm_fc_threshold = dlm_fc_threshold
        self.tlm_attention_threshold = tlm_attention_threshold
        self.static_dlm_fc = static_dlm_fc
        self.static_tlm_attention = static_tlm_attention

    def dlm_fc(self, numerator: int, denominator: int) -> Device:
        if not self.dynamic:
            return self.static_dlm_fc
        return Device.GPU if at_or_above(numerator, denominator, self.dlm_fc_threshold) else Device.PIM

    def tlm_attention(self, numerator: int, denominator: int) -> Device:
        if not self.dynamic:
            return self.static_tlm_attention
        return Device.GPU if at_or_above(numerator, denominator, self.tlm_attention_threshold) else Device.PIM
