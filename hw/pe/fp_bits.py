"""Floating-point building blocks shared by the PE's arithmetic units."""
from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal

FP32_QNAN = 0x7FC00000  # the one NaN the PE produces (sign 0, quiet bit set)
FP16_QNAN = 0x7E00


def normalize_left(m: Module, value, name: str):
    """Shift `value` left until its top bit is 1; return (shifted, leading-zero count).

    A logarithmic shifter: stage k shifts by 2^k when the top 2^k bits are all zero, so the
    count comes out bit by bit and no priority encoder is needed. For a zero `value` the
    result is zero and the count meaningless; callers test for zero separately.
    """
    width = len(value)
    steps = []
    k = 1
    while k < width:
        steps.append(k)
        k *= 2
    current = value
    zero_tops = {}
    for k in reversed(steps):
        top_zero = Signal(name=f"{name}_z{k}")
        m.d.comb += top_zero.eq(current[width - k:] == 0)
        shifted = Signal(width, name=f"{name}_s{k}")
        m.d.comb += shifted.eq(Mux(top_zero, current << k, current))
        zero_tops[k] = top_zero
        current = shifted
    lz = Signal(len(steps), name=f"{name}_lz")
    m.d.comb += lz.eq(Cat(*(zero_tops[k] for k in steps)))
    return current, lz
