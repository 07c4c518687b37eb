"""Softmax unit of the Controller: the DLM's logits in, the greedy token and its probability out.

Interface (``lib.wiring`` Component, both ports ``lib.stream``):

- ``logits`` (in): one beat carries ``lanes`` raw LOGIT values (``sim.manager.formats.LOGIT``,
  lane 0 first in vocabulary order), ``count`` = how many lanes are valid (1..lanes; only the
  last beat of a vector may be short) and ``last`` = this beat ends the vector.
- ``result`` (out): ``token`` (index of the first largest logit) and ``prob`` (its probability,
  raw UQ1.16, ``sim.manager.formats.PROB``).
- ``prob_next`` (out): the value ``result.prob`` will have in the next cycle (the quotient
  register's next state), so that a consumer can register what it derives from the probability
  and have it when ``result.valid`` rises.

Cycle behaviour: ``logits.ready`` is high while the unit accumulates, so a vector of V logits
takes ceil(V / lanes) cycles at full rate (one beat per cycle, II = 1). A beat passes six
stages, each ending in a register, so that no path holds more than one of its steps:

    1  base change of every lane (logit x log2(e), a constant multiplier)
    2  the beat's maximum (first-index-wins tree) and its integer reference ceil(max)
    3  recurrence: running maximum, argmax and reference; the sum's shift to the new reference
    4  every lane's term 2^(y - reference) (table and shift)
    5  the beat's sum of terms (adder tree)
    6  recurrence: running sum <- (running sum >> shift) + the beat's sum

After the last beat the unit stops accepting (``logits.ready`` low) until its result is taken;
when the last beat has left stage 6 the restoring divider takes ``PROB.bits`` cycles (one
quotient bit each); ``result.valid`` rises in the next cycle and holds until ``result.ready``;
the next vector's beats are accepted from the cycle after the transfer. So the latency from the
transfer of the last beat to ``result.valid`` is ``LATENCY`` = ``PIPELINE`` + ``PROB.bits`` =
5 + 17 = 22 cycles (``PIPELINE``: the registers of stages 1-5 that a beat crosses before the sum),
and a vector of V logits occupies the unit ceil(V / lanes) + ``LATENCY`` cycles.

The two recurrences (stages 3 and 6) are split because the reference of a beat is known before
its terms are: the reference is ceil(running maximum), so it moves exactly when the maximum
does, and then to the beat's own reference (computed in stage 2). The terms and the sum are
floored exactly as in the one-step form of ``sim.manager.softmax`` (each beat's terms taken at
the reference in force after that beat, the running sum shifted once per beat), so the unit
stays bit-exact with the model.

The arithmetic is an online base-2 softmax; ``sim.manager.softmax`` documents it step by step and
is the bit-exact reference. No logit is stored, only the running maximum, the reference
exponent, the running sum and the argmax.
"""
from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from hw.common.fault import checked_fault
from sim.manager.formats import LOGIT, PROB
from sim.manager.softmax import LOG2E, LOG2E_FRAC, SoftmaxParams, exp2_table


class _State(enum.Enum, shape=2):
    ACCUM = 0
    FLUSH = 1
    DIVIDE = 2
    OUTPUT = 3


def logits_layout(params: SoftmaxParams) -> data.StructLayout:
    return data.StructLayout({
        "lanes": data.ArrayLayout(signed(LOGIT.bits), params.lanes),
        "count": unsigned(params.lanes.bit_length()),
        "last": unsigned(1),
    })


def result_layout(params: SoftmaxParams) -> data.StructLayout:
    return data.StructLayout({
        "token": unsigned(params.index_bits),
        "prob": unsigned(PROB.bits),
    })


class Softmax(wiring.Component):
    """Online base-2 softmax with greedy selection; see the module docstring. ``fault``: one
    of ``FAULTS`` for mutation testing (hw/common/fault.py), None in the shipped design."""

    FAULTS = {"softmax_no_max_subtraction":
              "softmax: the terms are 2^y, not 2^(y - running maximum) (the reference stays 0)"}

    PIPELINE = 5                        # stage registers a beat crosses before the running sum
    LATENCY = PIPELINE + PROB.bits      # last beat's transfer -> result.valid (the divider's steps)

    def __init__(self, params: SoftmaxParams, *, fault: str | None = None):
        self.params = params
        self.fault = checked_fault(fault, Softmax)
        super().__init__({
            "logits": In(stream.Signature(logits_layout(params))),
            "result": Out(stream.Signature(result_layout(params))),
            "prob_next": Out(PROB.bits),
        })

    def elaborate(self, platform):
        p = self.params
        frac = LOGIT.frac
        m = Module()
        ref_bits = p.base2_bits - frac + 1
        table = Array(Const(v, p.term_bits) for v in exp2_table(p.exp_frac_bits))

        def exp_term(name, y, r):
            """``2**(y - r)`` in units of 2**-exp_frac_bits for y <= r (floor)."""
            d = Signal(unsigned(p.base2_bits + 1), name=f"{name}_d")
            t = Signal(p.term_bits, name=f"{name}_t")
            m.d.comb += d.eq((r << frac) - y)
            shift = d[frac:]
            m.d.comb += t.eq(Mux(shift > p.exp_frac_bits, 0, table[d[:frac]] >> shift))
            return t

        def stage(name, value, shape=None):
            """``value`` registered: the boundary between two pipeline stages."""
            reg = Signal(shape if shape is not None else len(value), name=name)
            m.d.sync += reg.eq(value)
            return reg

        beat = self.logits.payload
        accept = Signal()
        m.d.comb += accept.eq(self.logits.valid & self.logits.ready)

        # Stage 1: base change of every lane (a constant multiplier each).
        v1, last1 = stage("v1", accept), stage("last1", beat.last)
        n1 = stage("n1", beat.count)
        ys1, lane_v1 = [], []
        for i in range(p.lanes):
            prod = Signal(signed(LOGIT.bits + LOG2E_FRAC + 2), name=f"y{i}_prod")
            m.d.comb += prod.eq(beat.lanes[i] * LOG2E)
            ys1.append(stage(f"y{i}_s1", prod >> LOG2E_FRAC, signed(p.base2_bits)))
            lane_v1.append(stage(f"lane{i}_v1", beat.count > i))

        # Stage 2: the beat's maximum by a first-index-wins tree, and its integer reference.
        nodes = [(ys1[i], Const(i, range(p.lanes)), lane_v1[i]) for i in range(p.lanes)]
        level = 0
        while len(nodes) > 1:
            nxt = []
            for j in range(0, len(nodes) - 1, 2):
                (ya, ia, va), (yb, ib, vb) = nodes[j], nodes[j + 1]
                take_b = Signal(name=f"max{level}_{j // 2}_b")
                y = Signal(signed(p.base2_bits), name=f"max{level}_{j // 2}_y")
                i = Signal(range(p.lanes), name=f"max{level}_{j // 2}_i")
                v = Signal(name=f"max{level}_{j // 2}_v")
                m.d.comb += [
                    take_b.eq(vb & (~va | (yb > ya))),
                    y.eq(Mux(take_b, yb, ya)), i.eq(Mux(take_b, ib, ia)), v.eq(va | vb),
                ]
                nxt.append((y, i, v))
            if len(nodes) % 2:
                nxt.append(nodes[-1])
            nodes, level = nxt, level + 1
        beat_y, beat_i, _ = nodes[0]
        beat_ref = Signal(signed(ref_bits))
        m.d.comb += beat_ref.eq((beat_y + ((1 << frac) - 1)) >> frac)
        v2, last2, n2 = stage("v2", v1), stage("last2", last1), stage("n2", n1)
        ys2 = [stage(f"y{i}_s2", y, signed(p.base2_bits)) for i, y in enumerate(ys1)]
        lane_v2 = [stage(f"lane{i}_v2", v) for i, v in enumerate(lane_v1)]
        by2 = stage("beat_y2", beat_y, signed(p.base2_bits))
        bi2 = stage("beat_i2", beat_i)
        bref2 = stage("beat_ref2", beat_ref, signed(ref_bits))

        # Stage 3, the first recurrence: running maximum, argmax and reference. The reference
        # is ceil(ymax), so it moves exactly when the maximum does, to the beat's own reference.
        count = Signal(range(p.vocab + 1))
        ymax = Signal(signed(p.base2_bits))
        argmax = Signal(p.index_bits)
        ref = Signal(signed(ref_bits))
        first = Signal()
        moved = Signal()
        new_ref = Signal(signed(ref_bits))
        m.d.comb += [first.eq(count == 0), moved.eq(first | (by2 > ymax)),
                     new_ref.eq(Mux(moved, bref2, ref))]
        if self.fault == "softmax_no_max_subtraction":
            m.d.comb += new_ref.eq(0)
        ref_step = Signal(unsigned(ref_bits + 1))
        m.d.comb += ref_step.eq(new_ref - ref)
        with m.If(v2):
            m.d.sync += [count.eq(count + n2), ref.eq(new_ref)]
            with m.If(moved):
                m.d.sync += [ymax.eq(by2), argmax.eq(count + bi2)]
        v3, last3 = stage("v3", v2), stage("last3", last2)
        ref3 = stage("ref3", new_ref, signed(ref_bits))
        # The running sum is emptied (first beat) or shifted to the new reference; a shift
        # past its width empties it too.
        clear3 = stage("clear3", first | (ref_step >= p.sum_bits))
        step3 = stage("step3", ref_step[:max(1, (p.sum_bits - 1).bit_length())])
        ys3 = [stage(f"y{i}_s3", y, signed(p.base2_bits)) for i, y in enumerate(ys2)]
        lane_v3 = [stage(f"lane{i}_v3", v) for i, v in enumerate(lane_v2)]

        # Stage 4: every lane's term at the new reference (table and shift).
        terms = []
        for i in range(p.lanes):
            t = exp_term(f"lane{i}", ys3[i], ref3)
            terms.append(stage(f"lane{i}_term", Mux(lane_v3[i], t, 0), p.term_bits))
        v4, last4 = stage("v4", v3), stage("last4", last3)
        clear4, step4 = stage("clear4", clear3), stage("step4", step3)

        # Stage 5: the beat's sum of terms, an adder tree.
        while len(terms) > 1:
            nxt = []
            for j in range(0, len(terms) - 1, 2):
                s = Signal(len(terms[j]) + 1, name=f"tsum{len(terms)}_{j // 2}")
                m.d.comb += s.eq(terms[j] + terms[j + 1])
                nxt.append(s)
            if len(terms) % 2:
                nxt.append(terms[-1])
            terms = nxt
        beat_sum = stage("beat_sum", terms[0])
        v5, last5 = stage("v5", v4), stage("last5", last4)
        clear5, step5 = stage("clear5", clear4), stage("step5", step4)

        # Stage 6, the second recurrence: the running sum moves to the beat's reference by a
        # right shift and takes the beat's sum. Terms and sums are floored exactly as in the
        # one-step form (each beat's terms are taken at that beat's reference), so the result
        # is the model's bit for bit.
        acc = Signal(p.sum_bits)
        new_acc = Signal(p.sum_bits)
        m.d.comb += new_acc.eq(Mux(clear5, 0, acc >> step5) + beat_sum)
        with m.If(v5):
            m.d.sync += acc.eq(new_acc)
        # The maximum's term, from registers that are final once the last beat left stage 3.
        num = stage("num", exp_term("num", ymax, ref), p.term_bits)

        # Restoring divider: quotient of (num << PROB.frac) by the sum, MSB first.
        rem = Signal(p.term_bits + PROB.frac)
        div = Signal(p.sum_bits + PROB.bits - 1)
        quo = Signal(PROB.bits)
        quo_next = Signal(PROB.bits)        # what ``quo`` holds in the next cycle (``prob_next``)
        m.d.comb += [quo_next.eq(quo), self.prob_next.eq(quo_next)]
        m.d.sync += quo.eq(quo_next)
        steps = Signal(range(PROB.bits + 1))
        diff = Signal(len(div) + 1)
        fits = Signal()
        m.d.comb += [diff.eq(rem - div), fits.eq(~diff[-1])]

        # The payload is the registers themselves, not gated by the state: a consumer's
        # datapath (the Controller's multiplier) then starts at a flip-flop.
        out = self.result.payload
        m.d.comb += [out.token.eq(argmax), out.prob.eq(quo)]
        state = Signal(_State)
        with m.Switch(state):
            with m.Case(_State.ACCUM):
                m.d.comb += self.logits.ready.eq(1)
                with m.If(accept & beat.last):
                    m.d.sync += state.eq(_State.FLUSH)
            with m.Case(_State.FLUSH):
                with m.If(v5 & last5):
                    m.d.sync += [
                        rem.eq(num << PROB.frac),
                        div.eq(new_acc << (PROB.bits - 1)),
                        steps.eq(PROB.bits),
                    ]
                    m.d.comb += quo_next.eq(0)
                    m.d.sync += state.eq(_State.DIVIDE)
            with m.Case(_State.DIVIDE):
                m.d.sync += [
                    rem.eq(Mux(fits, diff, rem)),
                    div.eq(div >> 1),
                    steps.eq(steps - 1),
                ]
                m.d.comb += quo_next.eq(Cat(fits, quo[:-1]))
                with m.If(steps == 1):
                    m.d.sync += state.eq(_State.OUTPUT)
            with m.Default():   # OUTPUT
                m.d.comb += self.result.valid.eq(1)
                with m.If(self.result.ready):
                    m.d.sync += count.eq(0)
                    m.d.sync += state.eq(_State.ACCUM)
        return m
