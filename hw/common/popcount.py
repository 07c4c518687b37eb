"""Population count as a tree of narrow adders (one named ``Signal`` per node)."""
from __future__ import annotations

from amaranth.hdl import Signal


def popcount(m, bits, name: str = "pop"):
    """The number of ones of ``bits``: level L adds pairs into ``{name}{L}_{j}`` (an odd one out
    moves up unchanged); returns the root (a bit when ``bits`` is one bit wide)."""
    terms = [bits[i] for i in range(len(bits))]
    level = 0
    while len(terms) > 1:
        nxt = []
        for j in range(0, len(terms) - 1, 2):
            s = Signal(range(2 ** (level + 1) + 1), name=f"{name}{level}_{j // 2}")
            m.d.comb += s.eq(terms[j] + terms[j + 1])
            nxt.append(s)
        if len(terms) % 2:
            nxt.append(terms[-1])
        terms, level = nxt, level + 1
    return terms[0]
