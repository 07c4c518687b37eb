"""Scheduler: counts -> intensity estimates -> threshold comparisons -> GPU or PIM.

The model's rules (``sim.manager.scheduler``), as combinational logic:

- DLM FC: the estimate is b / 1 with b = requests still drafting in the micro-batch, the
  population count of ``drafting`` (one bit per request slot, an adder tree). GPU iff
  b >= ``dlm_fc_threshold``.
- TLM attention: the estimate is ``queries`` / ``requests`` (tokens of the verification over its
  distinct requests). GPU iff queries >= ``tlm_attention_threshold`` * requests: one small
  multiplication, no division.
- With ``dynamic`` low the static mapping (``static_dlm_fc_gpu``, ``static_tlm_attention_gpu``)
  is returned.
- SADDLE+ (``plus``; off: no such port): while ``locked`` (a pass runs) DLM FC compares with
  ``dlm_fc_threshold_locked`` instead (the model's pass-aware Scheduler).

Interface: all ports are plain signals; outputs are valid in the cycle the inputs are (the
Manager registers them into its event stream). Device encoding: 1 = GPU, 0 = PIM.
``fault``: one of ``FAULTS``, for mutation testing (hw/common/fault.py); None in the shipped
design.
"""
from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.common.fault import checked_fault
from hw.common.popcount import popcount
from sim.manager.formats import THRESHOLD


class Scheduler(wiring.Component):
    FAULTS = {
        "dlm_fc_compare_reversed": "scheduler: DLM FC on the GPU iff b <= threshold (the model: b >= threshold)",
        "tlm_attention_strict": "scheduler: TLM attention on the GPU iff queries > threshold x requests "
                                "(the model: >=)",
        "locked_threshold_inverted": "scheduler, SADDLE+: DLM FC compares with the locked threshold while the "
                                     "Shared Pool is unlocked, and with the other one while it is locked",
    }

    def __init__(self, requests: int, max_queries: int, *, plus: bool = False, fault: str | None = None):
        self.requests, self.max_queries, self.plus = requests, max_queries, plus
        self.fault = checked_fault(fault, Scheduler)
        locked = {"locked": In(1), "dlm_fc_threshold_locked": In(THRESHOLD.bits)} if plus else {}
        super().__init__({
            **locked,
            "dynamic": In(1),
            "dlm_fc_threshold": In(THRESHOLD.bits), "tlm_attention_threshold": In(THRESHOLD.bits),
            "static_dlm_fc_gpu": In(1), "static_tlm_attention_gpu": In(1),
            "drafting": In(requests),
            "queries": In(range(max_queries + 1)), "query_requests": In(range(requests + 1)),
            "drafting_count": Out(range(requests + 1)),
            "dlm_fc_gpu": Out(1), "tlm_attention_gpu": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.drafting_count.eq(popcount(m, self.drafting))

        scaled = Signal(THRESHOLD.bits + len(self.query_requests))
        m.d.comb += scaled.eq(self.tlm_attention_threshold * self.query_requests)
        threshold = self.dlm_fc_threshold
        if self.plus:
            threshold = Signal(THRESHOLD.bits)
            locked = ~self.locked if self.fault == "locked_threshold_inverted" else self.locked
            m.d.comb += threshold.eq(Mux(locked, self.dlm_fc_threshold_locked, self.dlm_fc_threshold))
        fc_gpu = self.drafting_count >= threshold
        attention_gpu = self.queries >= scaled
        if self.fault == "dlm_fc_compare_reversed":
            fc_gpu = self.drafting_count <= threshold
        elif self.fault == "tlm_attention_strict":
            attention_gpu = self.queries > scaled
        m.d.comb += [
            self.dlm_fc_gpu.eq(Mux(self.dynamic, fc_gpu, self.static_dlm_fc_gpu)),
            self.tlm_attention_gpu.eq(Mux(self.dynamic, attention_gpu, self.static_tlm_attention_gpu)),
        ]
        return m
