"""Verilog export, Verilator lint and Yosys synthesis (both methods) on a small known design."""
import json

import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from common.errors import SaddleError
from hw.flow.export import lint, write_verilog
from hw.flow.synth import (
    GenericWeights,
    fetch_celllib,
    generic_cell_kind,
    generic_nand2_eq,
    load_flow,
    load_generic_weights,
    parse_liberty,
    synthesize,
)
from tests.hw.flow.accumulator import Accumulator, add_accumulators


@pytest.fixture(scope="module")
def acc_verilog(tmp_path_factory):
    return write_verilog(Accumulator(), "acc", tmp_path_factory.mktemp("acc"))


def test_export_is_stable_and_lints_clean(acc_verilog):
    mtime = acc_verilog.stat().st_mtime_ns
    assert write_verilog(Accumulator(), "acc", acc_verilog.parent) == acc_verilog
    assert acc_verilog.stat().st_mtime_ns == mtime  # unchanged text is not rewritten
    assert "module acc(" in acc_verilog.read_text()
    result = lint(acc_verilog, "acc")
    assert result.ok, result.messages


def test_lint_reports_a_combinational_loop(tmp_path):
    bad = tmp_path / "bad.v"
    bad.write_text("module bad(input a, output y);\n  wire w;\n  assign w = ~w ^ a;\n"
                   "  assign y = w;\nendmodule\n")
    result = lint(bad, "bad")
    assert not result.ok and "UNOPTFLAT" in result.messages


def test_generic_flip_flop_weights_decompose_by_name():
    w = GenericWeights({"$_NAND_": 1.0}, 4.0, 2.0, 1.5, 3.0, "table")
    assert generic_nand2_eq("$_DFF_P_", w) == 4.0
    assert generic_nand2_eq("$_DFFE_PP_", w) == 6.0
    assert generic_nand2_eq("$_SDFFE_PP0P_", w) == 7.5
    assert generic_nand2_eq("$_DFF_PN0_", w) == 7.0
    assert generic_nand2_eq("$_DFFE_PN0P_", w) == 9.0
    assert generic_cell_kind("$_DLATCH_P_") == "latch"
    assert generic_cell_kind("$_SDFF_PP0_") == "ff"
    assert generic_cell_kind("$_XOR_") == "gate"
    with pytest.raises(SaddleError, match=r"table: gates: no NAND2-eq weight for Yosys cell \$_FOO_"):
        generic_nand2_eq("$_FOO_", w)


def test_generic_synthesis_counts_the_flip_flops(acc_verilog, tmp_path):
    r = synthesize(acc_verilog, "acc", liberty=None, work_dir=tmp_path)
    assert (r.flip_flops, r.latches, r.memory_bits) == (8, 0, 0)
    assert r.library == "yosys-generic"
    weights = load_generic_weights()
    assert r.nand2_eq == pytest.approx(sum(n * generic_nand2_eq(t, weights) for t, n in r.cells_by_type.items()), abs=0.1)
    # 8 flip-flops with enable and reset alone weigh 8 * 7.33; the adder adds a few dozen.
    assert 8 * 7.3 < r.nand2_eq < 8 * 7.3 + 80
    json.dumps(r.to_dict())


def test_osu018_synthesis_uses_library_areas(acc_verilog, tmp_path):
    try:
        libpath = fetch_celllib()
    except SaddleError as exc:
        pytest.skip(f"osu018 library not available here: {exc}")
    lib = parse_liberty(libpath)
    assert lib.name == "osu018_stdcells" and lib.nand2_area == 24.0
    assert "DFFPOSX1" in lib.flip_flops and "LATCH" in lib.latches
    r = synthesize(acc_verilog, "acc", liberty=libpath, work_dir=tmp_path)
    assert (r.flip_flops, r.latches) == (8, 0)
    assert r.cells_by_type["DFFPOSX1"] == 8
    assert r.area == sum(n * lib.areas[t] for t, n in r.cells_by_type.items())
    assert r.nand2_eq == pytest.approx(r.area / 24.0, abs=0.05)
    assert lib.outputs["FAX1"] == {"YC", "YS"} and lib.outputs["DFFPOSX1"] == {"Q"}


def test_delay_mapping_uses_the_parallel_prefix_carries(acc_verilog, tmp_path):
    """The accumulator's 8-bit adder through Yosys' Kogge-Stone carry network, then ABC with a
    delay target; the same flip-flops, and only library cells."""
    try:
        libpath = fetch_celllib()
    except SaddleError as exc:
        pytest.skip(f"osu018 library not available here: {exc}")
    r = synthesize(acc_verilog, "acc", liberty=libpath, work_dir=tmp_path, goal="delay")
    assert (r.flip_flops, r.latches) == (8, 0) and "abc -D 100 -constr" in r.method
    assert "_80_lcu_kogge_stone" in (tmp_path / "yosys.log").read_text()
    assert (tmp_path / "abc.constr").read_text() == "set_driving_cell INVX1\nset_load 0.02\n"
    with pytest.raises(SaddleError, match="delay mapping needs the osu018 library"):
        synthesize(acc_verilog, "acc", liberty=None, work_dir=tmp_path, goal="delay")


class ThreeAccumulators(wiring.Component):
    """Three Accumulator submodules on their own inputs: no logic outside them."""

    def __init__(self):
        super().__init__({"en": In(3), "d": In(24), "q": Out(24)})

    def elaborate(self, platform):
        m = Module()
        add_accumulators(m, self, 3)
        return m


@pytest.mark.parametrize("library", ["generic", "osu018"])
def test_hierarchical_synthesis_sums_the_instances(acc_verilog, library, tmp_path):
    """Kept hierarchy: each module is mapped once per instance and the report is the sum,
    exactly three times one Accumulator; the submodule instances are not counted as cells."""
    if library == "osu018":
        try:
            libpath = fetch_celllib()
        except SaddleError as exc:
            pytest.skip(f"osu018 library not available here: {exc}")
    else:
        libpath = None
    one = synthesize(acc_verilog, "acc", liberty=libpath, work_dir=tmp_path / "one", hierarchy="flat")
    three_v = write_verilog(ThreeAccumulators(), "acc3", tmp_path / "v")
    three = synthesize(three_v, "acc3", liberty=libpath, work_dir=tmp_path / "three", hierarchy="hier")
    assert three.hierarchy == "hier" and "hierarchy kept" in three.method
    assert three.cells_by_type == {t: 3 * n for t, n in one.cells_by_type.items()}
    assert (three.cells, three.flip_flops, three.latches) == (3 * one.cells, 24, 0)
    assert three.nand2_eq == pytest.approx(3 * one.nand2_eq, abs=0.1)
    part = {"cells": one.cells, "flip_flops": 8, "nand2_eq": one.nand2_eq}
    assert three.parts == {f"acc3.acc{i}": part for i in range(3)}
    flat = synthesize(three_v, "acc3", liberty=libpath, work_dir=tmp_path / "flat", hierarchy="flat")
    assert flat.hierarchy == "flat" and flat.flip_flops == 24


def test_synthesis_flow_config(tmp_path):
    from hw.flow.synth import load_direct_mapping

    assert load_flow()["shared_pool"] == "hier"
    assert load_direct_mapping() == {"manager", "manager_sram", "manager_plus"}
    nothing = tmp_path / "none.yaml"
    nothing.write_text("hierarchical: []\n")
    assert load_direct_mapping(nothing) == frozenset()
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("hierarchical: []\ndirect_mapping: [manager, 7]\n")
    with pytest.raises(SaddleError, match=r"direct_mapping\[1\]: expected a block name, found 7"):
        load_direct_mapping(wrong)
    bad = tmp_path / "flow.yaml"
    bad.write_text("hierarchical:\n  - shared_pool\n  - 3\n")
    with pytest.raises(SaddleError, match=r"flow.yaml: hierarchical\[1\]: expected a block name, found 3"):
        load_flow(bad)
    with pytest.raises(SaddleError, match="hierarchy: expected one of flat, hier, found 'deep'"):
        synthesize(tmp_path / "x.v", "x", liberty=None, work_dir=tmp_path, hierarchy="deep")


def test_struct_payload_ports_survive_export():
    """Stream payloads with struct layouts flatten to Views; each must still become a port,
    and the constant `ready` of an always-ready stream must not."""
    from hw.flow.export import to_verilog
    from hw.pe.bank_pe import BankPE

    text = to_verilog(BankPE(lanes=1), "pe1")
    header = text[text.index("module pe1("):].split(";", 1)[0]
    assert sorted(header[len("module pe1("):-1].replace(" ", "").split(",")) == \
        ["clk", "cmd__payload", "cmd__valid", "out__payload", "out__valid", "rst"]
    assert "input [34:0] cmd__payload;" in text   # op 2 + mode 1 + 2 x 16
    assert "output [47:0] out__payload;" in text  # fp32 32 + fp16 16


def test_auto_library_falls_back_to_generic_with_a_note(monkeypatch, capsys):
    import hw.flow.synth

    def unavailable():
        raise SaddleError("cannot fetch qflow-tech-osu018: offline")

    monkeypatch.setattr(hw.flow.synth, "fetch_celllib", unavailable)
    assert hw.flow.synth.resolve_library("auto") is None
    assert "falling back to yosys-generic" in capsys.readouterr().err
    assert hw.flow.synth.resolve_library("generic") is None
    with pytest.raises(SaddleError, match="offline"):
        hw.flow.synth.resolve_library("osu018")


def test_liberty_override_must_exist(monkeypatch, tmp_path):
    from hw.flow.synth import cached_celllib

    monkeypatch.setenv("SADDLE_LIBERTY", str(tmp_path / "missing.lib"))
    with pytest.raises(SaddleError, match="SADDLE_LIBERTY=.*missing.lib: no such file"):
        cached_celllib()


def test_cli_names_unknown_blocks(capsys):
    from sim.cli import main

    assert main(["hw", "synth", "--block", "no_such_block"]) == 2
    err = capsys.readouterr().err
    assert "unknown block no_such_block; known:" in err and "bank_pe" in err


def test_cli_hierarchy_overrides_the_flow(tmp_path, capsys):
    import json

    from sim.cli import main
    # The scheduler is flat in configs/synth/flow.yaml; --hierarchy hier maps its modules one by
    # one, and a design without submodules gives the same figures either way.
    args = ["hw", "synth", "--block", "scheduler", "--library", "generic", "--json", "--out", str(tmp_path)]
    assert main(args) == 0
    flat = json.loads(capsys.readouterr().out)["blocks"][0]
    assert main(args + ["--hierarchy", "hier"]) == 0
    hier = json.loads(capsys.readouterr().out)["blocks"][0]
    assert (flat["hierarchy"], hier["hierarchy"]) == ("flat", "hier")
    assert hier["nand2_eq"] == flat["nand2_eq"] and hier["parts"] == {}


def test_direct_mapping_skips_the_generic_abc(acc_verilog, tmp_path, monkeypatch):
    """A block listed under direct_mapping maps Yosys' gates with `abc -liberty` alone: the
    same flip-flops, the generic-gate ABC absent from the log."""
    import hw.flow.synth

    try:
        libpath = fetch_celllib()
    except SaddleError as exc:
        pytest.skip(f"osu018 library not available here: {exc}")
    monkeypatch.setattr(hw.flow.synth, "load_direct_mapping", lambda: frozenset({"acc"}))
    r = synthesize(acc_verilog, "acc", liberty=libpath, work_dir=tmp_path)
    assert "direct mapping" in r.method
    assert (r.flip_flops, r.cells_by_type["DFFPOSX1"], r.latches) == (8, 8, 0)
    assert (tmp_path / "yosys.log").read_text().count("Executing ABC pass") == 1


@pytest.mark.parametrize("hierarchy", ["flat", "hier"])
def test_sram_macro_is_inferred_and_kept_as_a_black_box(tmp_path, hierarchy):
    """The Shared Pool with SRAM storage: Yosys infers the payload memory ($mem_v2, checked),
    the flow keeps it as one macro cell whose area is its bits at the stated density; with
    flip-flop storage there is no memory."""
    from hw.flow.sram_macro import load_sram_model
    from hw.manager.shared_pool import PAYLOAD_BITS, SharedPool

    try:
        libpath = fetch_celllib()
    except SaddleError as exc:
        pytest.skip(f"osu018 library not available here: {exc}")
    lib = parse_liberty(libpath)
    verilog = write_verilog(SharedPool(8, 4, storage="sram"), "sp", tmp_path / "v")
    result = synthesize(verilog, "sp", liberty=libpath, work_dir=tmp_path / hierarchy, hierarchy=hierarchy)
    bits = 8 * PAYLOAD_BITS
    assert result.memory_bits == bits and "1 SRAM macro(s) (8 x 21)" in result.method
    assert result.cells_by_type["SADDLE_SRAM_8x21_0"] == 1
    macro = bits * load_sram_model().nand2_eq_per_bit(lib.nand2_area)
    logic = sum(n * lib.areas[t] for t, n in result.cells_by_type.items() if not t.startswith("SADDLE")) / lib.nand2_area
    assert result.nand2_eq == pytest.approx(logic + macro, abs=0.2)
    if hierarchy == "hier":
        assert result.parts["sp.sram"] == {"cells": 1, "flip_flops": 0, "nand2_eq": pytest.approx(macro, abs=0.1)}
    ff = synthesize(write_verilog(SharedPool(8, 4), "sp", tmp_path / "ff"), "sp", liberty=libpath,
                    work_dir=tmp_path / "ff", hierarchy=hierarchy)
    assert ff.memory_bits == 0 and not (tmp_path / "ff" / "cells.lib").exists()
    assert ff.flip_flops - result.flip_flops == bits     # the payload's flip-flops
