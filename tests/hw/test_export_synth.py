"""Verilog export, Verilator lint and Yosys synthesis (both methods) on a small known design."""
import json

import pytest

from hw.export import lint, write_verilog
from hw.synth import (GenericWeights, fetch_celllib, generic_cell_kind, generic_nand2_eq,
                      load_generic_weights, parse_liberty, synthesize)
from sim.errors import SaddleError
from tests.hw.accumulator import Accumulator


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


def test_struct_payload_ports_survive_export():
    """Stream payloads with struct layouts flatten to Views; each must still become a port,
    and the constant `ready` of an always-ready stream must not."""
    from hw.export import to_verilog
    from hw.pe import BankPE

    text = to_verilog(BankPE(lanes=1), "pe1")
    header = text[text.index("module pe1("):].split(";", 1)[0]
    assert sorted(header[len("module pe1("):-1].replace(" ", "").split(",")) == \
        ["clk", "cmd__payload", "cmd__valid", "out__payload", "out__valid", "rst"]
    assert "input [34:0] cmd__payload;" in text   # op 2 + mode 1 + 2 x 16
    assert "output [47:0] out__payload;" in text  # fp32 32 + fp16 16


def test_auto_library_falls_back_to_generic_with_a_note(monkeypatch, capsys):
    import hw.synth

    def unavailable():
        raise SaddleError("cannot fetch qflow-tech-osu018: offline")

    monkeypatch.setattr(hw.synth, "fetch_celllib", unavailable)
    assert hw.synth.resolve_library("auto") is None
    assert "falling back to yosys-generic" in capsys.readouterr().err
    assert hw.synth.resolve_library("generic") is None
    with pytest.raises(SaddleError, match="offline"):
        hw.synth.resolve_library("osu018")


def test_liberty_override_must_exist(monkeypatch, tmp_path):
    from hw.synth import cached_celllib

    monkeypatch.setenv("SADDLE_LIBERTY", str(tmp_path / "missing.lib"))
    with pytest.raises(SaddleError, match="SADDLE_LIBERTY=.*missing.lib: no such file"):
        cached_celllib()


def test_cli_names_unknown_blocks(capsys):
    from sim.cli import main

    assert main(["hw", "synth", "--block", "no_such_block"]) == 2
    err = capsys.readouterr().err
    assert "unknown block no_such_block; known:" in err and "bank_pe" in err
