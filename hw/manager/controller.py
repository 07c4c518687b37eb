"""Controller: per-request state, the softmax unit, the H multiplier and the stop comparator.

Per request slot (``requests`` of them) it keeps what the model's ``RequestSlot`` keeps:
admitted, micro-batch, state (DRAFTING / STOPPED / REJECTED), H (UQ1.16), t (draft tokens of
the round) and the TLM token the next round starts from. The stop rule is the model's
(``sim.manager.controller``): H_t = (H_{t-1} * p_t) >> 16, stop iff H_t < tau or
t >= max_draft_len; the token that crosses tau is still a drafted token. With ``calibrated``
set, the multiplier takes ``acceptance[bin(p_t)]`` instead of p_t (the calibrated stop rule:
``bin`` = p's top four fraction bits, 1.0 the last entry; ``acceptance`` is 16 UQ1.16 entries,
entry i in bits [17 i, 17 i + 17)).

Interface (``lib.wiring`` Component):

- configuration: ``tau`` (UQ1.16), ``max_draft_len``, ``calibrated``, ``acceptance``; held
  stable while in use (a change of ``calibrated`` or ``acceptance`` reaches a DRAFT with
  ``use_logits`` one cycle later than one with ``prob``: that operand is registered).
- command ``op`` (``CtlOp``) with ``req``, ``mb``, ``prob``, ``use_logits``, ``token``,
  ``reject``; ``op_ready`` is low only for a ``DRAFT`` with ``use_logits`` while the softmax
  has no result; ``draft_ready``: the same for a ``DRAFT`` or ``SKIP``, from ``use_logits``
  alone (not from ``op``, which the user may decide late in the cycle). Each command completes in the cycle it is given with ``op_ready`` high:
  ``ADMIT`` (slot ``req`` in micro-batch ``mb``, round start), ``DRAFT`` (one token of
  probability ``prob``, or the softmax's greedy token with ``use_logits``), ``RESULT`` (the
  verification's TLM ``token`` is the next round's start; ``reject`` marks the round rejected),
  ``NEW_ROUND`` (H = 1.0, t = 0, drafting), ``END_ROUND`` (drafting of the round stops, as
  the model's EndRound), ``RETIRE``, ``SKIP`` (with ``use_logits``: drop the softmax result of a
  token the pools refused; the DLM sends its logits again).
- ``pre_req``, ``pre_prob``: the request and the probability of the next cycle's ``DRAFT``
  (its H is read and its multiplier operand derived one cycle ahead; ``prob`` itself then only
  feeds ``sampled_prob``).
- decision (combinational, for the ``DRAFT`` in this cycle): ``h_new``, ``t_new``, ``stop``,
  ``sampled_token``/``sampled_prob`` (softmax result or ``prob``).
- read port: ``req`` -> ``rd_mb``, ``rd_state``, ``rd_h``, ``rd_t``, ``rd_next_token``,
  ``rd_admitted`` (the last slot's values for a ``req`` beyond the slots).
- ``q_mb`` -> ``drafting``: one bit per slot, admitted, drafting and in micro-batch ``q_mb``.
- ``logits`` (in stream): the softmax unit's input (`hw.manager.softmax.Softmax`).
- SADDLE+ (``plus``; off: none of these ports): ``tau_table`` (``TAU_BUCKETS`` UQ1.16 entries,
  entry i in bits [17 i, 17 i + 17)) replaces ``tau``: the comparator's tau is the entry of
  ``tau_bucket(L)``, L the admitted slots (a counter, +1 at ``ADMIT``, -1 at ``RETIRE``), held in
  a register one cycle behind the count (no DRAFT follows an ADMIT or RETIRE that closely).
  ``h_old``: H before the DRAFT's token (its pool entry's ``h_prev``); ``drafting_all``: one
  bit per slot, admitted and drafting; ``gain``: the sum of ``H >> 8`` over those slots (the
  planner's G), a register kept by every command from the slot's state before and after it.

Cycle behaviour: one decision per cycle, back-to-back on the same request included; the state
is in registers. A ``DRAFT`` of request r in cycle c needs ``pre_req`` = r in cycle c - 1: H is
read then into a register (a write of slot r in cycle c - 1, by a decision, ADMIT or NEW_ROUND,
is forwarded), and cycle c multiplies, compares and writes back. So the decision cycle starts at
registers (H, the probability) and holds no 128-way read; decision latency 0 cycles from the
``DRAFT`` (the outputs are valid in its cycle), one cycle of look-ahead for its request.

``fault``: one of ``FAULTS`` or of the softmax unit's, for mutation testing
(hw/common/fault.py); None in the shipped design.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import enum, stream, wiring
from amaranth.lib.wiring import In, Out

from hw.common.fault import checked_fault, fault_for
from hw.common.read_mux import read
from hw.manager.softmax import Softmax, logits_layout
from sim.manager.controller import ACCEPTANCE_BINS, TAU_BUCKETS
from sim.manager.formats import MICROBATCH_ID, POSITION, PROB, PROB_ONE, REQUEST_ID, TAU, TOKEN_ID
from sim.manager.softmax import SoftmaxParams

# SADDLE+'s gain term of a drafting slot: H >> 8 (sim/manager/planner.py), at most 256.
GAIN_SHIFT = 8


def gain_max(requests: int) -> int:
    """The largest ``gain``: every slot drafting at H = 1.0."""
    return requests * (PROB_ONE >> GAIN_SHIFT)


class CtlOp(enum.Enum, shape=3):
    NOP = 0
    ADMIT = 1
    DRAFT = 2
    RESULT = 3
    NEW_ROUND = 4
    RETIRE = 5
    END_ROUND = 6
    SKIP = 7


class SlotState(enum.Enum, shape=2):
    """Encoding of ``sim.manager.controller.RequestState``."""
    DRAFTING = 0
    STOPPED = 1
    REJECTED = 2


class Controller(wiring.Component):
    FAULTS = {
        "h_compare_le": "controller: stop on H_t <= tau instead of H_t < tau (one LSB off)",
        "max_len_compare_gt": "controller: stop on t > max_draft_len instead of t >= max_draft_len",
        "acceptance_one_wraps": "controller, calibrated rule: p_t = 1.0 selects acceptance entry 0 (its "
                                "fraction bits) instead of the last entry",
        "acceptance_bin_low": "controller, calibrated rule: the acceptance entry is chosen by p_t's fraction "
                              "bits one position lower (bits 11..14 instead of 12..15)",
        "logits_factor_stale": "controller: the softmax result's multiplier operand is registered from the "
                               "quotient as it is, not as it will be (a cycle late)",
        "prob_factor_late": "controller: the prob operand is registered from prob, not from pre_prob (the "
                            "previous cycle's probability)",
        "tau_bucket_by_live": "controller, SADDLE+: the tau table's entry is the bit length of L, not of L - 1",
        "gain_kept_on_stop": "controller, SADDLE+: a draft that stops its round leaves its H in the gain sum",
    }

    def __init__(self, requests: int, softmax: SoftmaxParams, *, plus: bool = False, fault: str | None = None):
        if not 1 <= requests <= REQUEST_ID.max_raw + 1:
            raise ValueError(f"Controller: requests must be in [1, {REQUEST_ID.max_raw + 1}]")
        self.requests, self.softmax_params, self.plus = requests, softmax, plus
        self.fault = checked_fault(fault, Controller, Softmax)
        t = range(POSITION.max_raw + 1)
        tau = ({"tau_table": In(TAU_BUCKETS * TAU.bits)} if plus else {"tau": In(PROB.bits)})
        plus_out = {"h_old": Out(PROB.bits), "drafting_all": Out(requests),
                    "gain": Out(range(gain_max(requests) + 1))} if plus else {}
        super().__init__({
            **tau, "max_draft_len": In(t),
            "calibrated": In(1), "acceptance": In(ACCEPTANCE_BINS * PROB.bits),
            "op": In(CtlOp), "op_ready": Out(1), "draft_ready": Out(1),
            "req": In(REQUEST_ID.bits), "pre_req": In(REQUEST_ID.bits), "pre_prob": In(PROB.bits),
            "mb": In(MICROBATCH_ID.bits), "prob": In(PROB.bits),
            "use_logits": In(1), "token": In(TOKEN_ID.bits), "reject": In(1),
            "h_new": Out(PROB.bits), "t_new": Out(t), "stop": Out(1),
            "sampled_token": Out(TOKEN_ID.bits), "sampled_prob": Out(PROB.bits),
            "rd_mb": Out(MICROBATCH_ID.bits), "rd_state": Out(SlotState), "rd_h": Out(PROB.bits),
            "rd_t": Out(t),
            "rd_next_token": Out(TOKEN_ID.bits), "rd_admitted": Out(1),
            "q_mb": In(MICROBATCH_ID.bits), "drafting": Out(requests),
            "logits": In(stream.Signature(logits_layout(softmax))),
            **plus_out,
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.softmax = softmax = Softmax(self.softmax_params, fault=fault_for(self.fault, Softmax))
        wiring.connect(m, wiring.flipped(self.logits), softmax.logits)

        n = self.requests
        t_shape = range(POSITION.max_raw + 1)
        admitted = Signal(n)
        mbs = [Signal(MICROBATCH_ID.bits, name=f"r{i}_mb") for i in range(n)]
        states = [Signal(SlotState, name=f"r{i}_state") for i in range(n)]
        hs = [Signal(PROB.bits, init=PROB_ONE, name=f"r{i}_h") for i in range(n)]
        ts = [Signal(t_shape, name=f"r{i}_t") for i in range(n)]
        nexts = [Signal(TOKEN_ID.bits, name=f"r{i}_next") for i in range(n)]

        m.d.comb += [
            self.rd_h.eq(read(hs, self.req)),
            self.rd_mb.eq(read(mbs, self.req)),
            self.rd_state.eq(read(states, self.req)),
            self.rd_t.eq(read(ts, self.req)),
            self.rd_next_token.eq(read(nexts, self.req)),
            self.rd_admitted.eq(read([admitted[i] for i in range(n)], self.req)),
            self.drafting.eq(Cat(admitted[i] & (states[i] == SlotState.DRAFTING) & (mbs[i] == self.q_mb)
                                 for i in range(n))),
        ]

        # H of the next DRAFT's request, read a cycle ahead (``pre_req``) so that the decision
        # cycle starts at a register, not at a 128-way read; a write of that slot in this cycle
        # is forwarded (back-to-back decisions on one request).
        h_prev = Signal(PROB.bits)
        h_write = Signal(PROB.bits)
        h_written = Signal()
        m.d.sync += h_prev.eq(Mux(h_written & (self.req == self.pre_req), h_write, read(hs, self.pre_req)))

        # The decision path: one multiplier (its second operand p, or the acceptance table's
        # entry for p) and two comparators. Both operands are registers: the one of ``prob``
        # derived a cycle ahead from ``pre_prob``, the one of a softmax result from the
        # quotient's next state (so it is current whenever the result is).
        product = Signal(2 * PROB.bits)
        sampled = softmax.result.payload
        factor = Signal(PROB.bits)
        factor_logits, factor_prob = Signal(PROB.bits), Signal(PROB.bits)
        m.d.sync += [factor_logits.eq(self._factor(m, softmax.result.payload.prob
                                                   if self.fault == "logits_factor_stale" else softmax.prob_next,
                                                   "logits")),
                     factor_prob.eq(self._factor(m, self.prob if self.fault == "prob_factor_late" else self.pre_prob,
                                                 "prob"))]
        m.d.comb += [
            self.sampled_prob.eq(Mux(self.use_logits, sampled.prob, self.prob)),
            self.sampled_token.eq(Mux(self.use_logits, sampled.token, 0)),
            factor.eq(Mux(self.use_logits, factor_logits, factor_prob)),
            product.eq(h_prev * factor),
            self.h_new.eq(product >> PROB.frac),
            self.t_new.eq(self.rd_t + 1),
        ]
        tau = self._live_tau(m, admitted) if self.plus else self.tau
        m.d.comb += self.stop.eq((self.h_new < tau) | (self.t_new >= self.max_draft_len))
        if self.fault == "h_compare_le":
            m.d.comb += self.stop.eq((self.h_new <= tau) | (self.t_new >= self.max_draft_len))
        elif self.fault == "max_len_compare_gt":
            m.d.comb += self.stop.eq((self.h_new < tau) | (self.t_new > self.max_draft_len))
        takes_result = Signal()
        m.d.comb += [
            takes_result.eq(((self.op == CtlOp.DRAFT) | (self.op == CtlOp.SKIP)) & self.use_logits),
            self.op_ready.eq(~takes_result | softmax.result.valid),
            self.draft_ready.eq(~self.use_logits | softmax.result.valid),
            softmax.result.ready.eq(takes_result),
        ]

        with m.Switch(self.op):
            with m.Case(CtlOp.ADMIT, CtlOp.NEW_ROUND):
                m.d.comb += [h_written.eq(1), h_write.eq(PROB_ONE)]
            with m.Case(CtlOp.DRAFT):
                m.d.comb += [h_written.eq(self.op_ready), h_write.eq(self.h_new)]

        if self.plus:
            drafting_all = Cat(admitted[i] & (states[i] == SlotState.DRAFTING) for i in range(n))
            m.d.comb += [self.h_old.eq(h_prev), self.drafting_all.eq(drafting_all)]
            self._gain(m)
        for i in range(n):
            with m.If(self.req == i):
                with m.Switch(self.op):
                    with m.Case(CtlOp.ADMIT):
                        m.d.sync += [admitted[i].eq(1), mbs[i].eq(self.mb), nexts[i].eq(0)]
                        self._new_round(m, hs[i], ts[i], states[i])
                    with m.Case(CtlOp.DRAFT):
                        with m.If(self.op_ready):
                            m.d.sync += [hs[i].eq(self.h_new), ts[i].eq(self.t_new)]
                            with m.If(self.stop):
                                m.d.sync += states[i].eq(SlotState.STOPPED)
                    with m.Case(CtlOp.RESULT):
                        m.d.sync += nexts[i].eq(self.token)
                        with m.If(self.reject):
                            m.d.sync += states[i].eq(SlotState.REJECTED)
                    with m.Case(CtlOp.NEW_ROUND):
                        self._new_round(m, hs[i], ts[i], states[i])
                    with m.Case(CtlOp.END_ROUND):
                        m.d.sync += states[i].eq(SlotState.STOPPED)
                    with m.Case(CtlOp.RETIRE):
                        m.d.sync += admitted[i].eq(0)
        return m

    def _live_tau(self, m, admitted):
        """The comparator's tau with a tau table: a register holding the table's entry for the
        admitted slots L (``tau_bucket``: 0 for L <= 1, then one more per doubling, at most 7)."""
        live = Signal(range(self.requests + 1))
        with m.Switch(self.op):
            with m.Case(CtlOp.ADMIT):
                m.d.sync += live.eq(live + 1)
            with m.Case(CtlOp.RETIRE):
                m.d.sync += live.eq(live - 1)
        # bit_length(L - 1) capped at 7 = how many of 1, 2, 4, ..., 64 lie below L.
        below = live if self.fault == "tau_bucket_by_live" else live - 1
        bucket = Signal(range(TAU_BUCKETS))
        m.d.comb += bucket.eq(sum((below >= (1 << b)) for b in range(TAU_BUCKETS - 1)))
        tau = Signal(TAU.bits)
        m.d.sync += tau.eq(self.tau_table.word_select(bucket, TAU.bits))
        return tau

    def _gain(self, m):
        """``gain`` = sum of H >> 8 over the drafting slots: each command takes out the slot's
        term before it (read at ``req``) and adds its term after it."""
        gain = Signal.like(self.gain)
        m.d.comb += self.gain.eq(gain)
        before = Signal(range((PROB_ONE >> GAIN_SHIFT) + 1), name="gain_before")
        after = Signal.like(before, name="gain_after")
        m.d.comb += [before.eq(Mux(self.rd_admitted & (self.rd_state == SlotState.DRAFTING),
                                   self.rd_h >> GAIN_SHIFT, 0)), after.eq(before)]
        with m.Switch(self.op):
            with m.Case(CtlOp.ADMIT, CtlOp.NEW_ROUND):
                m.d.comb += after.eq(PROB_ONE >> GAIN_SHIFT)
            with m.Case(CtlOp.DRAFT):
                with m.If(self.op_ready):
                    stopped = 0 if self.fault == "gain_kept_on_stop" else self.stop
                    m.d.comb += after.eq(Mux(stopped, 0, self.h_new >> GAIN_SHIFT))
            with m.Case(CtlOp.RESULT):
                with m.If(self.reject):
                    m.d.comb += after.eq(0)
            with m.Case(CtlOp.END_ROUND, CtlOp.RETIRE):
                m.d.comb += after.eq(0)
        m.d.sync += gain.eq(gain - before + after)

    def _factor(self, m, prob, name: str):
        """The multiplier's operand for probability ``prob``: ``prob``, or with ``calibrated``
        the acceptance table's entry of its bin (p's top four fraction bits; 1.0 the last)."""
        bin_bits = ACCEPTANCE_BINS.bit_length() - 1
        entry = Signal(range(ACCEPTANCE_BINS), name=f"{name}_entry")
        if self.fault == "acceptance_one_wraps":
            m.d.comb += entry.eq(prob[PROB.frac - bin_bits:PROB.frac])
        elif self.fault == "acceptance_bin_low":
            m.d.comb += entry.eq(Mux(prob[PROB.frac], ACCEPTANCE_BINS - 1,
                                     prob[PROB.frac - bin_bits - 1:PROB.frac - 1]))
        else:
            m.d.comb += entry.eq(Mux(prob[PROB.frac], ACCEPTANCE_BINS - 1, prob[PROB.frac - bin_bits:PROB.frac]))
        factor = Signal(PROB.bits, name=f"{name}_factor")
        m.d.comb += factor.eq(Mux(self.calibrated, self.acceptance.word_select(entry, PROB.bits), prob))
        return factor

    @staticmethod
    def _new_round(m, h, t, state):
        m.d.sync += [h.eq(PROB_ONE), t.eq(0), state.eq(SlotState.DRAFTING)]
