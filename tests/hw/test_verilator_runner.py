"""The shared cocotb/Verilator runner passes a correct bench and reports a failing one by name."""
from pathlib import Path

import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

BENCH = Path(__file__).with_name("cocotb_counter.py")


class Accumulator(wiring.Component):
    def __init__(self):
        super().__init__({"en": In(1), "d": In(8), "q": Out(8)})

    def elaborate(self, platform):
        m = Module()
        with m.If(self.en):
            m.d.sync += self.q.eq(self.q + self.d)
        return m


@pytest.mark.slow
def test_passing_bench_passes(verilator_design):
    results = verilator_design("runner_selftest_acc", Accumulator).run(BENCH)
    assert results.is_file()


@pytest.mark.slow
def test_failing_bench_names_the_cocotb_test(verilator_design):
    design = verilator_design("runner_selftest_acc", Accumulator)
    with pytest.raises(AssertionError, match=r"accumulates: q = 12, expected 5"):
        design.run(BENCH, env={"EXPECT": "5"})
