"""The Scheduler: operation counts -> intensity estimates -> threshold comparison -> GPU or PIM.

Only DLM FC and TLM attention are scheduled (DLM attention stays on PIM, TLM FC on the GPU).
Each estimate is ``numerator / denominator`` FLOP per byte up to a per-model constant, and the
rule is GPU iff numerator >= threshold * denominator (no divider):

- DLM FC after a prediction step: b / 1, b = the micro-batch's requests still drafting.
- TLM attention before a verification: its tokens / its distinct requests (mean queries per
  request; the GQA group size is folded into the threshold).

Thresholds are integers measured offline from the cost model with exactly these estimates.
With ``dynamic`` off (SADDLE-s) the static mapping is returned unchanged. SADDLE+'s pass-aware
DLM FC threshold (``dlm_fc_threshold_locked``; None in SADDLE) replaces the DLM FC threshold
while the Shared Pool is locked: the next step then shares the devices with a pass.
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
                 static_dlm_fc: Device, static_tlm_attention: Device,
                 dlm_fc_threshold_locked: int | None = None):
        self.dynamic = dynamic
        self.dlm_fc_threshold_locked = dlm_fc_threshold_locked
        self.dlm_fc_threshold = dlm_fc_threshold
        self.tlm_attention_threshold = tlm_attention_threshold
        self.static_dlm_fc = static_dlm_fc
        self.static_tlm_attention = static_tlm_attention

    def dlm_fc(self, numerator: int, denominator: int, locked: bool = False) -> Device:
        if not self.dynamic:
            return self.static_dlm_fc
        threshold = self.dlm_fc_threshold
        if locked and self.dlm_fc_threshold_locked is not None:
            threshold = self.dlm_fc_threshold_locked
        return Device.GPU if at_or_above(numerator, denominator, threshold) else Device.PIM

    def tlm_attention(self, numerator: int, denominator: int) -> Device:
        if not self.dynamic:
            return self.static_tlm_attention
        return Device.GPU if at_or_above(numerator, denominator, self.tlm_attention_threshold) else Device.PIM
