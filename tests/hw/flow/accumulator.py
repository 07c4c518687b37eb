"""A tiny known design for the infrastructure tests (export, lint, synthesis, the runner)."""
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


class Accumulator(wiring.Component):
    """8 flip-flops with enable and synchronous reset; an 8-bit adder."""

    def __init__(self):
        super().__init__({"en": In(1), "d": In(8), "q": Out(8)})

    def elaborate(self, platform):
        m = Module()
        with m.If(self.en):
            m.d.sync += self.q.eq(self.q + self.d)
        return m


def add_accumulators(m: Module, owner: wiring.Component, count: int) -> None:
    """`count` Accumulator submodules ``acc0``.. of `m`, accumulator i on ``owner.en[i]`` and
    the 8-bit slices i of ``owner.d`` and ``owner.q``."""
    for i in range(count):
        acc = m.submodules[f"acc{i}"] = Accumulator()
        m.d.comb += [acc.en.eq(owner.en[i]), acc.d.eq(owner.d[8 * i:8 * i + 8]),
                     owner.q[8 * i:8 * i + 8].eq(acc.q)]
