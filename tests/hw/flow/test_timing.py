"""Static timing (hw/flow/timing.py): the report parser on a known report, and OpenSTA on a
hand-built netlist whose critical path is known, on the FO4 measurement and on a synthesized
block. The OpenSTA tests skip, saying why, where OpenSTA or the osu018 library cannot be had."""
import json

import pytest
from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from common.errors import SaddleError
from hw.flow.timing import (
    Buffering,
    block_timing,
    buffer_fanout,
    critical_path,
    fetch_opensta,
    fo4_chain_netlist,
    load_timing_config,
    measure_fo4,
    parse_path,
    sta_netlist,
)

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


OUTPUTS = {"INVX1": frozenset({"Y"}), "NAND2X1": frozenset({"Y"}), "DFFPOSX1": frozenset({"Q"}),
           "BUFX4": frozenset({"Y"})}
BUFFER = ("BUFX4", "A", "Y")


def fanout_netlist(loads: int, cell: str = "NAND2X1", pin: str = "A") -> str:
    """Yosys' layout: an INVX1 driving net n to `loads` cells (pin B of a NAND2 tied to 0) and to
    the output port; q0..q{loads-1} are outputs too. The loads have escaped names (`\\u.l0 `,
    as in a flattened hierarchy)."""
    ports = ", ".join(f"q{i}" for i in range(loads))
    lines = [f"module fan(clk, a, n, {ports});", "  input clk;", "  input a;", "  output n;",
             *(f"  output q{i};" for i in range(loads)),
             "  INVX1 drv (\n    .A(a),\n    .Y(n)\n  );"]
    for i in range(loads):
        other = "    .B(1'h0),\n" if cell == "NAND2X1" else "    .CLK(clk),\n"
        out = "Y" if cell == "NAND2X1" else "Q"
        lines.append(f"  {cell} \\u.l{i}  (\n    .{pin}(n),\n{other}    .{out}(q{i})\n  );")
    return "\n".join(lines + ["endmodule", ""])


def _depths(text: str, loads: int) -> set[int]:
    """Buffers between n and each load (following the rewritten connections back to n)."""
    import re
    driver = {m.group(2): m.group(1) for m in re.finditer(r"\.A\((.*)\),\n    \.Y\((.*)\)\n", text)}
    pins = dict(re.findall(r"  NAND2X1 \\u\.l(\d+)  \(\n    \.A\((.*)\),", text))
    depths = set()
    for i in range(loads):
        net, depth = pins[str(i)], 0
        while net != "n":
            net, depth = driver[net], depth + 1
        depths.add(depth)
    return depths


def test_buffer_fanout_splits_large_nets_into_balanced_trees():
    """20 loads, at most 8 per net: 3 buffers (7, 7, 6 loads) on n; 100 loads: 13 then 2
    buffers, every load behind two; 8 loads stay as they are; constants and the port are not loads."""
    text, trees = buffer_fanout(fanout_netlist(20), OUTPUTS, 8, BUFFER)
    assert trees == Buffering(nets=1, buffers=3, levels=1)
    assert text.count(".A(n)") == 3 and text.count("BUFX4") == 3 and _depths(text, 20) == {1}
    assert sorted(text.count(f".A(\\fanout${k} )") for k in range(3)) == [6, 7, 7]
    assert "output n;" in text and text.count(".B(1'h0)") == 20
    text, trees = buffer_fanout(fanout_netlist(100), OUTPUTS, 8, BUFFER)
    assert trees == Buffering(nets=1, buffers=15, levels=2) and _depths(text, 100) == {2}
    assert text.count(".A(n)") == 2
    same = fanout_netlist(8)
    assert buffer_fanout(same, OUTPUTS, 8, BUFFER) == (same, Buffering(0, 0, 0))
    with pytest.raises(SaddleError, match="cell NAND2X1 .* no output pin"):
        buffer_fanout(same, {"INVX1": frozenset({"Y"})}, 8, BUFFER)
    with pytest.raises(SaddleError, match="1 of 9 cell instances not in the expected layout"):
        buffer_fanout(same.replace("  INVX1 drv (\n    .A(a),", "  INVX1 drv (\n    .A(a), .B(c),"), OUTPUTS, 8,
                      BUFFER)


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


def test_buffer_tree_shortens_a_high_fanout_path(tools, tmp_path):
    """An INVX1 driving 64 flip-flops: buffered (8 BUFX4 of 8 loads) the path gains one stage
    and loses most of its delay, the one X1 gate no longer charging 64 inputs. The clock net
    gets its tree too (the clock is ideal: it costs the path nothing)."""
    sta, liberty = tools
    plain = tmp_path / "plain.v"
    plain.write_text(fanout_netlist(64, "DFFPOSX1", "D"))
    text, trees = buffer_fanout(plain.read_text(), OUTPUTS, 8, BUFFER)
    assert trees == Buffering(nets=2, buffers=16, levels=1)
    buffered = tmp_path / "buffered.v"
    buffered.write_text(text)
    slow = critical_path(sta, plain, "fan", liberty, tmp_path, 100.0, "plain")
    fast = critical_path(sta, buffered, "fan", liberty, tmp_path, 100.0, "buffered")
    assert (slow.stages, fast.stages) == (1, 2)   # a -> drv -> flip-flop; a -> drv -> BUFX4 -> flip-flop
    assert fast.cells == ("INVX1", "BUFX4")
    assert fast.min_period_ns < 0.5 * slow.min_period_ns


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
    # The delay mapping by default, and the verdict from its buffered netlist.
    assert [(b["block"], b["mapping"], b["netlist_kind"]) for b in report["blocks"]] == [
        ("scheduler_delay", "delay", "mapped"), ("scheduler_delay", "delay", "buffered")]
    for block in report["blocks"]:
        assert block["stages"] > 5
        assert block["fmax_mhz"] == pytest.approx(1000 / block["min_period_ns"], abs=0.1)
    assert report["blocks"][1]["buffering"]["buffers"] > 0
    assert (tmp_path / "scheduler_delay" / "mapped.v").is_file()
    verdict = report["verdict"]["blocks"]["scheduler_delay"]
    assert verdict["target_period_ps"] == report["blocks"][1]["target_period_ps"]
    assert report["verdict"]["all_meet"] == verdict["meets_both"] == (
        verdict["meets_target_clock"] and verdict["meets_target_clock_typical"])
    assert main(["hw", "timing", "--block", "scheduler", "--mapping", "area", "--json", "--out", str(tmp_path)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"] is None and report["blocks"][0]["mapping"] == "area"
    # The report's cache holds both: `saddle hw report` would not synthesize or time them again.
    from hw.flow.report import Blocks, StaContext, synth_entry, timing_entry

    sta_context = StaContext(tmp_path)
    for mapping in ("delay", "area"):
        assert synth_entry(Blocks(tmp_path), "scheduler", sta_context.liberty, mapping, run=False) is not None
        assert timing_entry(Blocks(tmp_path), "scheduler", sta_context, mapping, run=False) is not None


class SramPort(wiring.Component):
    """An SRAM macro between ports: inputs to its pins, its read data straight out."""

    def __init__(self):
        super().__init__({"addr": In(4), "w_en": In(1), "w_data": In(8), "r_en": In(1), "q": Out(8)})

    def elaborate(self, platform):
        from hw.manager.sram import Sram

        m = Module()
        m.submodules.sram = sram = Sram(16, 8)
        m.d.comb += [sram.addr.eq(self.addr), sram.w_en.eq(self.w_en), sram.w_data.eq(self.w_data),
                     sram.r_en.eq(self.r_en), self.q.eq(sram.r_data)]
        return m


def test_sram_macro_is_timed_by_its_access_time(tools, tmp_path):
    """The macro's read data leaves it the access time of configs/synth/sram.yaml after the
    clock edge (in FO4 of the library): the whole path to the output port."""
    from hw.flow.export import write_verilog
    from hw.flow.sram_macro import block_liberty, load_sram_model
    from hw.flow.synth import parse_liberty, synthesize

    sta, liberty = tools
    config = load_timing_config()
    fo4 = measure_fo4(sta, liberty, tmp_path / "fo4", config.fo4_chains)
    verilog = write_verilog(SramPort(), "sram_port", tmp_path)
    synthesize(verilog, "sram_port", liberty=liberty, work_dir=tmp_path, hierarchy="flat")
    timed = block_liberty(tmp_path, liberty, fo4, parse_liberty(liberty).nand2_area)
    path = critical_path(sta, sta_netlist(tmp_path / "mapped.v", "sram_port", timed, tmp_path), "sram_port",
                         timed, tmp_path, 10.0)
    assert path.startpoint == "sram" and path.cells[0] == "SADDLE_SRAM_16x8_0"
    assert path.arrival_ns == pytest.approx(load_sram_model().access_fo4 * fo4, abs=0.05)


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


class WideAccumulator(wiring.Component):
    """A registered 64-bit accumulator: its adder is the whole path."""

    def __init__(self):
        super().__init__({"d": In(64), "q": Out(64)})

    def elaborate(self, platform):
        m = Module()
        d = Signal(64)
        m.d.sync += [d.eq(self.d), self.q.eq(self.q + d)]
        return m


def test_delay_mapping_keeps_the_carries_log_depth(tools, tmp_path):
    """The area mapping's 64-bit adder ripples; the delay mapping's Kogge-Stone carries survive
    ABC (no area rewriting before the delay mapping): a few stages per doubling of the width."""
    from hw.flow.export import write_verilog
    from hw.flow.synth import synthesize

    sta, liberty = tools
    verilog = write_verilog(WideAccumulator(), "wide", tmp_path)
    stages = {}
    for goal in ("area", "delay"):
        work = tmp_path / goal
        synthesize(verilog, "wide", liberty=liberty, work_dir=work, goal=goal)
        netlist = sta_netlist(work / "mapped.v", "wide", liberty, work)
        stages[goal] = critical_path(sta, netlist, "wide", liberty, work, 100.0).stages
    assert stages["delay"] <= 16 < 40 <= stages["area"], stages
