"""Static timing (hw/flow/timing.py): the report parser on a known report, and OpenSTA on a
hand-built netlist whose critical path is known, on the FO4 measurement and on a synthesized
block. The OpenSTA tests skip, saying why, where OpenSTA or the osu018 library cannot be had."""
import json

import pytest

from hw.flow.timing import (block_timing, critical_path, fetch_opensta, fo4_chain_netlist,
                            load_timing_config, measure_fo4, parse_path)
from sim.errors import SaddleError

REPORT = """Startpoint: r0 (rising edge-triggered flip-flop clocked by clk)
Endpoint: r1 (rising edge-triggered flip-flop clocked by clk)
Path Group: clk
Path Type: max

    Delay      Time   Description
-------------------------------------------------------------
   0.0000    0.0000   clock clk (rise edge)
   0.0000    0.0000   clock network delay (ideal)
   0.0000    0.0000 ^ r0/CLK (DFFPOSX1)
   0.2205    0.2205 v r0/Q (DFFPOSX1)
   0.1853    0.4058 ^ g0/Y (INVX1)
   0.1117    0.5175 v g1/Y (NAND2X1)
   0.0000    0.5175 v r1/D (DFFPOSX1)
             0.5175   data arrival time

 100.0000  100.0000   clock clk (rise edge)
  -0.1841   99.8159   library setup time
            99.8159   data required time
-------------------------------------------------------------
            99.8159   data required time
            -0.5175   data arrival time
-------------------------------------------------------------
            99.2984   slack (MET)
"""


def test_parse_path_counts_the_stages_between_start_and_end():
    path = parse_path(REPORT, 100.0)
    assert (path.startpoint, path.endpoint, path.stages) == ("r0", "r1", 3)
    assert path.cells == ("DFFPOSX1", "INVX1", "NAND2X1")
    assert path.arrival_ns == 0.5175
    assert path.min_period_ns == pytest.approx(0.5175 + 0.1841)   # arrival + setup
    with pytest.raises(SaddleError, match="no constrained path"):
        parse_path("nothing here", 100.0)


def test_fo4_chain_loads_every_stage_with_four_inverters():
    text = fo4_chain_netlist(3)
    assert text.count("INVX1 s") == 3 and text.count("INVX1 l") == 3 + 3 + 4
    for net in ("n1", "n2", "y"):
        assert text.count(f".A({net})") == 4


def test_scaling_to_the_target_node():
    config = load_timing_config()
    path = parse_path(REPORT, 100.0)
    result = block_timing("x", path, 0.1, config, "lib", "x.v")
    assert result.depth_fo4 == pytest.approx(path.min_period_ns / 0.1, abs=0.05)
    assert result.target_period_ps == pytest.approx(result.depth_fo4 * config.target_fo4_ns * 1000, rel=1e-2)
    assert result.meets_target_clock == (result.target_fmax_ghz >= config.target_clock_ghz)


@pytest.fixture(scope="module")
def tools():
    from hw.flow.synth import fetch_celllib
    try:
        return fetch_opensta(), fetch_celllib()
    except SaddleError as exc:
        pytest.skip(f"OpenSTA or the osu018 library not available here: {exc}")


PIPE = """module pipe(clk, d, q);
  input clk; input d; output q;
  wire a, b, c, x;
  DFFPOSX1 r0 (.CLK(clk), .D(d), .Q(a));
  INVX1 g0 (.A(a), .Y(b));
  INVX1 g1 (.A(b), .Y(c));
  NAND2X1 g2 (.A(c), .B(a), .Y(x));
  DFFPOSX1 r1 (.CLK(clk), .D(x), .Q(q));
endmodule
"""


def test_critical_path_of_a_hand_built_pipeline(tools, tmp_path):
    """r0 -> two inverters -> NAND2 -> r1 is the only register-to-register path and longer than
    d -> r0 (no gate) or r1 -> q (clock to output): 4 stages, start r0, end r1."""
    sta, liberty = tools
    netlist = tmp_path / "pipe.v"
    netlist.write_text(PIPE)
    path = critical_path(sta, netlist, "pipe", liberty, tmp_path, 100.0)
    assert (path.startpoint, path.endpoint, path.stages) == ("r0", "r1", 4)
    assert path.cells == ("DFFPOSX1", "INVX1", "INVX1", "NAND2X1")
    assert 0.2 < path.arrival_ns < path.min_period_ns < 1.5


def test_fo4_of_osu018_is_near_the_scaling_rule(tools, tmp_path):
    """The measured FO4 of the 0.18 um library lies within 30 % of the rule's 0.5 ps/nm x 180 nm."""
    sta, liberty = tools
    config = load_timing_config()
    fo4 = measure_fo4(sta, liberty, tmp_path, config.fo4_chains)
    assert abs(fo4 - config.fo4_ps_per_nm * 180 / 1000) < 0.3 * 0.09


def test_cli_timing_of_a_synthesized_block(tools, tmp_path, capsys):
    from sim.cli import main

    assert main(["hw", "timing", "--block", "scheduler", "--json", "--out", str(tmp_path)]) == 0
    report = json.loads(capsys.readouterr().out)
    block = report["blocks"][0]
    assert block["block"] == "scheduler" and block["stages"] > 5
    assert block["fmax_mhz"] == pytest.approx(1000 / block["min_period_ns"], abs=0.1)
    assert (tmp_path / "scheduler" / "mapped.v").is_file()


def test_opensta_override_must_exist_and_run(monkeypatch, tmp_path):
    monkeypatch.setenv("SADDLE_STA", str(tmp_path / "missing"))
    with pytest.raises(SaddleError, match="SADDLE_STA=.*missing: no such file"):
        fetch_opensta()
    broken = tmp_path / "sta"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    monkeypatch.setenv("SADDLE_STA", str(broken))
    with pytest.raises(SaddleError, match="-version failed"):
        fetch_opensta()
