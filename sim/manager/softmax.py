"""Bit-exact model of the Controller's softmax unit (`hw/manager/softmax.py`).

The unit sees the DLM's logits of one draft step as a stream, ``lanes`` logits per beat, and
returns the greedy token (first index of the largest logit) with its probability in UQ1.16.
It never stores the vocabulary: it keeps a running maximum and a running sum of exponentials
relative to it (an online softmax), so the only state is a few registers whatever the vocabulary.

Arithmetic, in the order the hardware does it (every step is an integer operation):

1. Base change. A logit ``x`` (format ``LOGIT``: signed, ``LOGIT.frac`` fractional bits, natural
   log units) becomes ``y = (x * LOG2E) >> LOG2E_FRAC`` (arithmetic shift, floor): the same
   fixed-point scale in log2 units, so exp becomes a power of two.
2. Reference. ``m = ceil(ymax / 2**LOGIT.frac)`` is an integer exponent at or above the running
   maximum ``ymax``. Because it is an integer, moving the reference is a plain right shift of
   the sum, which is why it is not the maximum itself.
3. Term. For ``d = m * 2**LOGIT.frac - y >= 0``, ``2**(y - m) = 2**-(d >> frac) * 2**-(d & mask)``:
   a table of ``2**-f`` for the fraction (``2**exp_frac_bits`` = 1.0) and a right shift by the
   integer part (floor). Terms are exact to ``2**-exp_frac_bits`` of the maximum's term;
   ``exp_frac_bits`` must exceed log2 of the vocabulary for the floor losses of many tiny terms
   to stay small against the sum.
4. Beat. ``S <- (S >> (m_new - m_old)) + sum of the beat's terms at m_new``, where ``m_new``
   follows the beat's maximum (a strictly larger maximum moves the argmax, so ties keep the
   first index).
5. Division. ``p = ((table[m * 2**frac - ymax]) << 16) // S`` (a restoring divider, one quotient
   bit per cycle). The maximum's term is part of ``S`` at the final reference, so ``p <= 1.0``.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from sim.manager.formats import LOGIT, PROB

# log2(e) as UQ1.15; the relative error 6e-6 costs at most 2e-3 in the exponent of a term
# 256 log units away from the maximum, far below the logit quantization.
LOG2E_FRAC = 15
LOG2E = round(math.log2(math.e) * (1 << LOG2E_FRAC))


@dataclass(frozen=True)
class SoftmaxParams:
    """Sizes of one softmax unit. ``vocab`` bounds the running sum's width."""

    lanes: int
    vocab: int
    exp_frac_bits: int

    def __post_init__(self):
        for name in ("lanes", "vocab", "exp_frac_bits"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"SoftmaxParams.{name}: expected a positive int, found {value!r}")

    @property
    def base2_bits(self) -> int:
        """Width of a signed base-2 logit ``y`` (LOGIT scaled by log2(e) < 2 grows one bit)."""
        return LOGIT.bits + 1

    @property
    def term_bits(self) -> int:
        return self.exp_frac_bits + 1

    @property
    def sum_bits(self) -> int:
        return self.term_bits + self.index_bits

    @property
    def index_bits(self) -> int:
        return max(1, (self.vocab - 1).bit_length())


@cache
def exp2_table(exp_frac_bits: int) -> tuple[int, ...]:
    """``round(2**exp_frac_bits * 2**(-f / 2**LOGIT.frac))`` for every fraction ``f``."""
    steps = 1 << LOGIT.frac
    return tuple(int(math.floor((1 << exp_frac_bits) * 2.0 ** (-f / steps) + 0.5))
                 for f in range(steps))


def to_base2(x: int) -> int:
    """Step 1: a raw LOGIT value in log2 units, same fractional bits (floor)."""
    return (x * LOG2E) >> LOG2E_FRAC


def reference(y: int) -> int:
    """Step 2: the integer exponent ``ceil(y / 2**LOGIT.frac)``."""
    return -((-y) >> LOGIT.frac)


def term(y: int, m: int, exp_frac_bits: int) -> int:
    """Step 3: ``2**(y - m)`` in units of ``2**-exp_frac_bits``, floor; needs ``y <= m``."""
    d = (m << LOGIT.frac) - y
    assert d >= 0, "term above the reference"
    shift = d >> LOGIT.frac
    if shift > exp_frac_bits:
        return 0
    return exp2_table(exp_frac_bits)[d & ((1 << LOGIT.frac) - 1)] >> shift


class SoftmaxModel:
    """The unit's state, beat by beat; ``result()`` is what the hardware outputs."""

    def __init__(self, params: SoftmaxParams):
        self.params = params
        self.count = 0          # logits seen
        self.sum = 0
        self.ref = 0
        self.ymax = 0
        self.argmax = 0

    def beat(self, logits: Sequence[int]) -> None:
        """One beat of 1..lanes raw LOGIT values (the last beat of a vector may be short)."""
        p = self.params
        if not 1 <= len(logits) <= p.lanes:
            raise ValueError(f"a beat holds 1..{p.lanes} logits, found {len(logits)}")
        if self.count + len(logits) > p.vocab:
            raise ValueError(f"more than vocab={p.vocab} logits in one vector")
        ys = [to_base2(LOGIT.check(x, "logit")) for x in logits]
        best = max(range(len(ys)), key=lambda i: (ys[i], -i))
        if self.count == 0 or ys[best] > self.ymax:
            self.ymax, self.argmax = ys[best], self.count + best
        new_ref = reference(self.ymax)
        shift = new_ref - self.ref if self.count else p.sum_bits
        kept = self.sum >> shift if shift < p.sum_bits else 0
        self.sum = kept + sum(term(y, new_ref, p.exp_frac_bits) for y in ys)
        self.ref = new_ref
        self.count += len(logits)

    def result(self) -> tuple[int, int]:
        """(greedy token index, its probability as raw UQ1.16)."""
        if self.count == 0:
            raise ValueError("softmax of an empty vector")
        num = term(self.ymax, self.ref, self.params.exp_frac_bits)
        return self.argmax, (num << PROB.frac) // self.sum


def softmax_greedy(logits: Sequence[int], params: SoftmaxParams) -> tuple[int, int]:
    """Greedy token and its raw UQ1.16 probability for a whole vector of raw LOGIT values,
    streamed ``params.lanes`` per beat in index order, exactly as the hardware computes it."""
    model = SoftmaxModel(params)
    for start in range(0, len(logits), params.lanes):
        model.beat(logits[start:start + params.lanes])
    return model.result()

