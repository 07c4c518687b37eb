"""Softmax unit of the Controller: the DLM's logits in, the greedy token and its probability out.

Interface (``lib.wiring`` Component, both ports ``lib.stream``):

- ``logits`` (in): one beat carries ``lanes`` raw LOGIT values (``sim.manager.formats.LOGIT``,
  lane 0 first in vocabulary order), ``count`` = how many lanes are valid (1..lanes; only the
  last beat of a vector may be short) and ``last`` = this beat ends the vector.
- ``result`` (out): ``token`` (index of the first largest logit) and ``prob`` (its probability,
  raw UQ1.16, ``sim.manager.formats.PROB``).

Cycle behaviour: ``logits.ready`` is high while the unit accumulates, so a vector of V logits
takes ceil(V / lanes) cycles at full rate. After the last beat the restoring divider takes
``PROB.bits`` cycles (one quotient bit each); ``result.valid`` rises in the next cycle and holds
until ``result.ready``; the next vector's beats are accepted from the cycle after the transfer.
So the latency from the last beat to ``result.valid`` is ``PROB.bits + 1`` cycles.

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
    DIVIDE = 1
    OUTPUT = 2


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

    def __init__(self, params: SoftmaxParams, *, fault: str | None = None):
        self.params = params
        self.fault = checked_fault(fault, Softmax)
        super().__init__({
            "logits": In(stream.Signature(logits_layout(params))),
            "result": Out(stream.Signature(result_layout(params))),
        })

    def elaborate(self, platform):
        p = self.params
        frac = LOGIT.frac
        m = Module()

        ref_bits = p.base2_bits - frac + 1
        count = Signal(range(p.vocab + 1))
        ymax = Signal(signed(p.base2_bits))
        argmax = Signal(p.index_bits)
        ref = Signal(signed(ref_bits))
        acc = Signal(p.sum_bits)
        table = Array(Const(v, p.term_bits) for v in exp2_table(p.exp_frac_bits))

        def exp_term(name, y, r):
            """``2**(y - r)`` in units of 2**-exp_frac_bits for y <= r (floor)."""
            d = Signal(unsigned(p.base2_bits + 1), name=f"{name}_d")
            t = Signal(p.term_bits, name=f"{name}_t")
            m.d.comb += d.eq((r << frac) - y)
            shift = d[frac:]
            m.d.comb += t.eq(Mux(shift > p.exp_frac_bits, 0, table[d[:frac]] >> shift))
            return t

        beat = self.logits.payload
        first = count == 0

        # Per lane: base change, then the beat's maximum by a first-index-wins tree.
        ys, valids = [], []
        for i in range(p.lanes):
            y = Signal(signed(p.base2_bits), name=f"y{i}")
            prod = Signal(signed(LOGIT.bits + LOG2E_FRAC + 2), name=f"y{i}_prod")
            m.d.comb += [prod.eq(beat.lanes[i] * LOG2E), y.eq(prod >> LOG2E_FRAC)]
            ys.append(y)
            valids.append(beat.count > i)
        nodes = [(ys[i], Const(i, range(p.lanes)), valids[i]) for i in range(p.lanes)]
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

        new_ymax = Signal(signed(p.base2_bits))
        new_argmax = Signal(p.index_bits)
        new_ref = Signal(signed(ref_bits))
        moved = Signal()
        m.d.comb += [
            moved.eq(first | (beat_y > ymax)),
            new_ymax.eq(Mux(moved, beat_y, ymax)),
            new_argmax.eq(Mux(moved, count + beat_i, argmax)),
            new_ref.eq((new_ymax + ((1 << frac) - 1)) >> frac),
        ]
        if self.fault == "softmax_no_max_subtraction":
            m.d.comb += new_ref.eq(0)

        # The running sum moves to the new reference by a right shift, then takes the beat.
        ref_step = Signal(unsigned(ref_bits + 1))
        kept = Signal(p.sum_bits)
        m.d.comb += [
            ref_step.eq(new_ref - ref),
            kept.eq(Mux(first | (ref_step >= p.sum_bits), 0, acc >> ref_step)),
        ]
        terms = []
        for i in range(p.lanes):
            t = exp_term(f"lane{i}", ys[i], new_ref)
            masked = Signal(p.term_bits, name=f"lane{i}_term")
            m.d.comb += masked.eq(Mux(valids[i], t, 0))
            terms.append(masked)
        while len(terms) > 1:
            nxt = []
            for j in range(0, len(terms) - 1, 2):
                s = Signal(len(terms[j]) + 1, name=f"tsum{len(terms)}_{j // 2}")
                m.d.comb += s.eq(terms[j] + terms[j + 1])
                nxt.append(s)
            if len(terms) % 2:
                nxt.append(terms[-1])
            terms = nxt
        new_acc = Signal(p.sum_bits)
        m.d.comb += new_acc.eq(kept + terms[0])
        num = exp_term("num", new_ymax, new_ref)

        # Restoring divider: quotient of (num << PROB.frac) by the sum, MSB first.
        rem = Signal(p.term_bits + PROB.frac)
        div = Signal(p.sum_bits + PROB.bits - 1)
        quo = Signal(PROB.bits)
        steps = Signal(range(PROB.bits + 1))
        fits = Signal()
        m.d.comb += fits.eq(rem >= div)

        out = self.result.payload
        state = Signal(_State)
        with m.Switch(state):
            with m.Case(_State.ACCUM):
                m.d.comb += self.logits.ready.eq(1)
                with m.If(self.logits.valid):
                    m.d.sync += [
                        ymax.eq(new_ymax), argmax.eq(new_argmax), ref.eq(new_ref),
                        acc.eq(new_acc), count.eq(count + beat.count),
                    ]
                    with m.If(beat.last):
                        m.d.sync += [
                            rem.eq(num << PROB.frac),
                            div.eq(new_acc << (PROB.bits - 1)),
                            quo.eq(0), steps.eq(PROB.bits),
                        ]
                        m.d.sync += state.eq(_State.DIVIDE)
            with m.Case(_State.DIVIDE):
                m.d.sync += [
                    rem.eq(Mux(fits, rem - div, rem)),
                    quo.eq(Cat(fits, quo[:-1])),
                    div.eq(div >> 1),
                    steps.eq(steps - 1),
                ]
                with m.If(steps == 1):
                    m.d.sync += state.eq(_State.OUTPUT)
            with m.Default():   # OUTPUT
                m.d.comb += [self.result.valid.eq(1), out.token.eq(argmax), out.prob.eq(quo)]
                with m.If(self.result.ready):
                    m.d.sync += count.eq(0)
                    m.d.sync += state.eq(_State.ACCUM)
        return m

