"""The shared cocotb/Verilator runner passes a correct bench and reports a failing one by name;
a build folder of the current sources is reused without elaborating the design, a changed one
is not; only the top module is visible to cocotb unless asked."""
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


@pytest.mark.slow
def test_a_current_build_is_reused_without_elaborating(verilator_design, monkeypatch):
    from hw.flow import verilator_runner
    from hw.flow.verilator_runner import VerilatorDesign

    design = verilator_design("runner_selftest_acc", Accumulator)
    assert (design.build_dir / "rtl_digest").is_file() and design.stats["public"] == "ports"

    def no_export(*args, **kw):
        raise AssertionError("exported again")
    monkeypatch.setattr(verilator_runner, "write_verilog", no_export)
    # Another process (here: another object) with the same name, sources and options: nothing to do.
    same = VerilatorDesign("runner_selftest_acc", Accumulator).build()
    assert same.reused and same.verilog == design.verilog
    assert same.run(BENCH).is_file()
    # A factory defined elsewhere, other build options: another design.
    assert VerilatorDesign("runner_selftest_acc", lambda: Accumulator()).digest() != design.digest()
    assert VerilatorDesign("runner_selftest_acc", Accumulator, public="all").digest() != design.digest()
    with pytest.raises(ValueError, match="public"):
        VerilatorDesign("x", Accumulator, public="some")
