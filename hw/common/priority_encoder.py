"""Priority encoders from bitwise operations (no wide arithmetic, see TOOLCHAIN.md).

``first_one_hot`` isolates the lowest set bit of a wide vector with a log-depth prefix-OR scan
and an edge detect; ``one_hot_index`` encodes a one-hot vector with one OR tree per index bit.
Each scan stage is its own Signal so that the expression is shared, not copied.
"""
from __future__ import annotations

from amaranth.hdl import Signal


def first_one_hot(m, vector, name: str):
    """One-hot (or zero) Signal of the lowest set bit of ``vector``."""
    width = len(vector)
    stage = Signal(width, name=f"{name}_scan0")
    m.d.comb += stage.eq(vector)
    shift, level = 1, 0
    while shift < width:
        level += 1
        nxt = Signal(width, name=f"{name}_scan{level}")
        m.d.comb += nxt.eq(stage | (stage << shift)[:width])
        stage, shift = nxt, shift * 2
    out = Signal(width, name=f"{name}_onehot")
    m.d.comb += out.eq(vector & ~(stage << 1)[:width])
    return out


def one_hot_index(m, one_hot, name: str):
    """Index of the set bit of a one-hot vector (0 when none is set)."""
    width = len(one_hot)
    bits = max(1, (width - 1).bit_length())
    index = Signal(bits, name=f"{name}_index")
    for b in range(bits):
        mask = sum(1 << i for i in range(width) if (i >> b) & 1)
        m.d.comb += index[b].eq((one_hot & mask).any())
    return index
