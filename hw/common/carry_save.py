"""Carry-save addition from bitwise operations: full-adder rows and a Wallace tree of them.

A row of full adders (a 3:2 compressor) turns three equal-width vectors into two with the same
sum modulo 2^width, with one XOR3 and one majority gate of depth per bit and no carry chain:
s = a ^ b ^ c, carry = majority(a, b, c) << 1. ``carry_save_sum`` reduces any number of
operands to two that way (rows of three at a time, log_1.5 depth), so a multi-operand sum
costs one carry-propagate adder at the end. Widths are kept (everything is modulo 2^width,
which is exactly two's complement arithmetic). Each row is its own Signal (TOOLCHAIN.md).
"""
from __future__ import annotations

from amaranth.hdl import Signal


def full_adder_row(m, a, b, c, width: int, name: str) -> tuple[Signal, Signal]:
    """(sum, carry) with sum + carry = a + b + c modulo 2^width."""
    s, carry = Signal(width, name=f"{name}_s"), Signal(width, name=f"{name}_c")
    m.d.comb += [s.eq(a ^ b ^ c), carry.eq((((a & b) | (a & c) | (b & c)) << 1)[:width])]
    return s, carry


def carry_save_sum(m, operands: list, width: int, name: str, *, fault: str | None = None) -> tuple:
    """Two vectors whose sum is that of ``operands`` modulo 2^width (a Wallace tree of
    ``full_adder_row``s; one operand is returned with a zero). ``fault`` "tree_carry_dropped":
    the last row's carry vector is lost (mutation testing)."""
    level, depth = list(operands), 0
    if not level:
        raise ValueError("carry_save_sum: no operands")
    if len(level) == 1:
        return level[0], 0
    while len(level) > 2:
        nxt = []
        for i in range(0, len(level) - 2, 3):
            nxt.extend(full_adder_row(m, *level[i:i + 3], width, f"{name}{depth}_{i // 3}"))
        nxt.extend(level[len(level) - len(level) % 3:] if len(level) % 3 else [])
        level, depth = nxt, depth + 1
    if fault == "tree_carry_dropped":
        return level[0], 0
    return level[0], level[1]
