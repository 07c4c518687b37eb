"""The shared cocotb/Verilator runner passes a correct bench and reports a failing one by name."""
from pathlib import Path

import pytest

from tests.hw.flow.accumulator import Accumulator

BENCH = Path(__file__).with_name("cocotb_counter.py")


@pytest.mark.slow
def test_passing_bench_passes(verilator_design):
    results = verilator_design("runner_selftest_acc", Accumulator).run(BENCH)
    assert results.is_file()


@pytest.mark.slow
def test_failing_bench_names_the_cocotb_test(verilator_design):
    design = verilator_design("runner_selftest_acc", Accumulator)
    with pytest.raises(AssertionError, match=r"accumulates: q = 12, expected 5"):
        design.run(BENCH, env={"EXPECT": "5"})
