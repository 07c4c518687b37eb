"""Floating-point building blocks shared by the PE's arithmetic units."""
from __future__ import annotations

from amaranth import C, Cat, Module, Mux, Signal

FP32_QNAN = 0x7FC00000  # the one NaN the PE produces (sign 0, quiet bit set)
FP16_QNAN = 0x7E00


def leading_zeros(m: Module, value, name: str):
    """(count, all_zero) of ``value``: the number of leading zeros (``len(value)`` for zero) by a
    tree of (any one, count) pairs, log2 levels of a 2:1 multiplexer each, so every count bit
    settles after about the same depth (a shifter can then use all of them at once)."""
    width = len(value)
    size = 1
    while size < width:
        size *= 2
    # Leaves: one bit each, padded below with ones (so the padding never counts as zeros).
    nodes = [(value[width - 1 - i], C(0, 0)) if i < width else (C(1, 1), C(0, 0))
             for i in range(size)]    # index 0 = most significant
    level = 0
    while len(nodes) > 1:
        nxt = []
        for j in range(0, len(nodes), 2):
            (hi_any, hi_count), (lo_any, lo_count) = nodes[j], nodes[j + 1]
            any_ = Signal(name=f"{name}_l{level}_{j // 2}_any")
            count = Signal(level + 1, name=f"{name}_l{level}_{j // 2}_n")
            m.d.comb += [any_.eq(hi_any | lo_any),
                         count.eq(Mux(hi_any, Cat(hi_count, 0), Cat(lo_count, 1)))]
            nxt.append((any_, count))
        nodes, level = nxt, level + 1
    _, count = nodes[0]
    zero = Signal(name=f"{name}_zero")
    m.d.comb += zero.eq(value == 0)
    return count, zero


def shift_left(m: Module, value, amount, fill, name: str):
    """``value`` shifted left by ``amount`` within its width, the vacated bits set to ``fill``
    (a 1-bit signal): one 2:1 multiplexer level per bit of ``amount``."""
    width = len(value)
    current = value
    for k in range(len(amount)):
        step = 1 << k
        nxt = Signal(width, name=f"{name}_s{k}")
        if step >= width:
            m.d.comb += nxt.eq(Mux(amount[k], fill.replicate(width), current))
        else:
            m.d.comb += nxt.eq(Mux(amount[k], Cat(fill.replicate(step), current[:width - step]), current))
        current = nxt
    return current
