"""A multiplier as its own module, so that synthesis maps each distinct one once."""
from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


class Multiplier(wiring.Component):
    """``product`` = ``a`` x ``b`` (unsigned, combinational). Hierarchical synthesis
    (hw/flow/synth.py, hw/flow/unique_modules.py) maps identical instances once, and ABC's delay
    mapping of several wide products in one module takes far longer than one at a time."""

    def __init__(self, a_bits: int, b_bits: int):
        super().__init__({"a": In(a_bits), "b": In(b_bits), "product": Out(a_bits + b_bits)})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.product.eq(self.a * self.b)
        return m
