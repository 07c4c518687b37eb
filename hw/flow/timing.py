"""Static timing of mapped netlists with OpenSTA: critical path, fmax, depth in FO4 delays.

`saddle hw synth` (osu018) writes each block's mapped netlist (`mapped.v`); OpenSTA reads it
with the same liberty and reports the worst path under the constraint of
configs/synth/timing.yaml. The path's delay is also expressed in FO4 delays measured on the same
liberty (`measure_fo4`), which carries it to another node: depth in FO4 x the node's FO4 delay
(the scaling rule of timing.yaml).

OpenSTA is Debian's ``opensta``: `sta` on PATH, `SADDLE_STA=path`, or fetched like the cell
library (`apt-get download` + `dpkg-deb -x` into build/opensta/; it needs libtcl8.6 and
readline on the machine, which `fetch_opensta` checks with ldd).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from common.config import config_path, get, load_yaml
from common.errors import SaddleError
from common.paths import BUILD
from hw.flow.debian_package import extract_package

STA_PACKAGE = "opensta"
STA_DIR = BUILD / "opensta"
_HINT = "install it (`apt-get install opensta`) or set SADDLE_STA to an OpenSTA `sta` binary"


def _usable(sta: Path) -> Path:
    """`sta` if it runs; SaddleError naming the missing shared libraries (an unpacked package
    brings none of its dependencies) or the failure otherwise."""
    if shutil.which("ldd"):
        proc = subprocess.run(["ldd", str(sta)], capture_output=True, text=True)
        missing = [line.split()[0] for line in proc.stdout.splitlines() if "not found" in line]
        if missing:
            raise SaddleError(f"{sta}: shared libraries not found: {', '.join(missing)} "
                              f"(Debian: libtcl8.6, libreadline8); {_HINT}")
    try:
        proc = subprocess.run([str(sta), "-version"], capture_output=True, text=True, timeout=60)
    except OSError as exc:
        raise SaddleError(f"{sta} does not run: {exc}; {_HINT}") from None
    if proc.returncode != 0:
        raise SaddleError(f"{sta} -version failed: {(proc.stderr or proc.stdout).strip()[-200:]}; {_HINT}")
    return sta


def fetch_opensta(dest: Path = STA_DIR) -> Path:
    """The OpenSTA binary: SADDLE_STA, `sta` on PATH, or Debian's package unpacked into `dest`."""
    if override := os.environ.get("SADDLE_STA"):
        if not Path(override).is_file():
            raise SaddleError(f"SADDLE_STA={override}: no such file")
        return _usable(Path(override))
    if on_path := shutil.which("sta"):
        return _usable(Path(on_path))
    sta = Path(dest) / "usr" / "bin" / "sta"
    if not sta.is_file():
        extract_package(STA_PACKAGE, Path(dest), _HINT)
        if not sta.is_file():
            raise SaddleError(f"{STA_PACKAGE} holds no usr/bin/sta")
    return _usable(sta)


def run_sta(sta: Path, script: str, work_dir: Path, name: str = "sta") -> str:
    """Run a Tcl script with OpenSTA in `work_dir` (kept as NAME.tcl, output in NAME.log)."""
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    (work_dir / f"{name}.tcl").write_text(script)
    proc = subprocess.run([str(sta), "-no_init", "-no_splash", "-exit", f"{name}.tcl"],
                          cwd=work_dir, capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    (work_dir / f"{name}.log").write_text(out)
    # OpenSTA exits 0 after most Tcl errors; its messages start with "Error".
    if proc.returncode != 0 or re.search(r"^Error", out, re.M):
        tail = "\n".join(out.strip().splitlines()[-5:])
        raise SaddleError(f"OpenSTA failed (log {work_dir / (name + '.log')}): {tail}")
    return out


@dataclass(frozen=True)
class TimingConfig:
    clock_period_ns: float
    fo4_chains: tuple[int, int]
    fo4_ps_per_nm: float
    target_node_nm: float
    target_clock_ghz: float           # the Manager's clock_ghz (configs/timing/manager.yaml)
    max_fanout: int                   # the buffered netlist's fanout bound
    buffer_cell: tuple[str, str, str]  # (cell, input pin, output pin) of its buffer trees
    fo4_ps_per_nm_typical: float = 0.36   # the rule's typical-corner variant (fo4_ps_per_nm: worst case)

    @property
    def target_fo4_ns(self) -> float:
        return self.fo4_ps_per_nm * self.target_node_nm / 1000.0

    @property
    def target_fo4_typical_ns(self) -> float:
        return self.fo4_ps_per_nm_typical * self.target_node_nm / 1000.0


def load_timing_config(path: Path | None = None) -> TimingConfig:
    path = path or config_path("synth", "timing")
    data = load_yaml(path)
    chains = get(data, "fo4_chains", list, source=path)
    if len(chains) != 2 or not all(isinstance(n, int) and n > 0 for n in chains) or chains[0] >= chains[1]:
        raise SaddleError(f"{path}: fo4_chains: expected two stage counts, shorter first, found {chains!r}")
    scaling = get(data, "scaling", dict, source=path)
    num = lambda sec, key, prefix="": float(get(sec, key, float, source=path, prefix=prefix, positive=True))  # noqa: E731
    buffering = get(data, "buffering", dict, source=path)
    max_fanout = get(buffering, "max_fanout", int, source=path, prefix="buffering")
    if max_fanout < 2:
        raise SaddleError(f"{path}: buffering.max_fanout: expected at least 2, found {max_fanout}")
    cell = get(buffering, "cell", list, source=path, prefix="buffering")
    if len(cell) != 3 or not all(isinstance(x, str) for x in cell):
        raise SaddleError(f"{path}: buffering.cell: expected [cell, input pin, output pin], found {cell!r}")
    # One clock for the cycle costs the simulator charges and for this check of the RTL.
    from sim.manager.timing import load_manager_timing
    return TimingConfig(num(data, "clock_period_ns"), (chains[0], chains[1]),
                        num(scaling, "fo4_ps_per_nm", "scaling"), num(scaling, "target_node_nm", "scaling"),
                        load_manager_timing().clock_ghz, max_fanout, (cell[0], cell[1], cell[2]),
                        num(scaling, "fo4_ps_per_nm_typical", "scaling"))


def _constrain(top: str, liberty: Path, netlist: Path, has_clock: bool, period: float) -> str:
    clock = (f"create_clock -name clk -period {period} [get_ports clk]\n"
             "set inputs [delete_from_list [all_inputs] [get_ports clk]]\n" if has_clock else
             f"create_clock -name clk -period {period}\nset inputs [all_inputs]\n")
    return (f"read_liberty {liberty}\nread_verilog {netlist}\nlink_design {top}\n{clock}"
            "set_input_delay 0 -clock clk $inputs\nset_output_delay 0 -clock clk [all_outputs]\n")


@dataclass(frozen=True)
class CriticalPath:
    startpoint: str
    endpoint: str
    stages: int           # cells on the path (a flip-flop's clock-to-output is one)
    arrival_ns: float     # data arrival at the endpoint
    min_period_ns: float  # arrival + the endpoint's setup time (or output delay)
    cells: tuple[str, ...]  # the library cell of each stage, in order


_PIN_ROW = re.compile(r"^\s+(-?[\d.]+)\s+(-?[\d.]+) [\^v] (\S+) \((\S+)\)$")


def parse_path(report: str, period: float) -> CriticalPath:
    """The first path of `report_checks -path_delay max` output."""
    start = re.search(r"^Startpoint: (\S+)", report, re.M)
    end = re.search(r"^Endpoint: (\S+)", report, re.M)
    arrival = re.search(r"^\s+(-?[\d.]+)\s+data arrival time", report, re.M)
    slack = re.search(r"^\s+(-?[\d.]+)\s+slack", report, re.M)
    if not (start and end and arrival and slack):
        raise SaddleError("OpenSTA reported no constrained path (a design without inputs, outputs or registers?)")
    path_text = report[start.end():arrival.start()]
    # Rows: the start pin (a clock pin or an input port), one output pin per stage, the end pin.
    rows = [m.groups() for line in path_text.splitlines() if (m := _PIN_ROW.match(line))]
    return CriticalPath(startpoint=start.group(1), endpoint=end.group(1), stages=len(rows) - 2,
                        arrival_ns=float(arrival.group(1)),
                        min_period_ns=round(period - float(slack.group(1)), 4),
                        cells=tuple(cell for *_, cell in rows[1:-1]))


# OpenSTA's Verilog reader takes no `assign` with a concatenation on its left (Yosys writes them
# for wires joined inside a module) and no undefined bits: each connection becomes a buffer and
# undefined bits zeros. Only the netlist OpenSTA reads changes, never the area report.
STA_BUFFER = ("BUFX2", "A", "Y")  # an osu018 cell


def sta_netlist(mapped: Path, top: str, liberty: Path, work_dir: Path) -> Path:
    """`mapped` (Yosys' mapped netlist) rewritten for OpenSTA as WORK_DIR/sta.v (kept while newer)."""
    return _rewrite_for_sta(mapped, top, liberty, Path(work_dir) / "sta.v", "")


def _rewrite_for_sta(mapped: Path, top: str, liberty: Path, out: Path, passes: str) -> Path:
    """`mapped` after the Yosys `passes`, with undefined bits zeros and wire-to-wire connections
    buffered, as `out` (kept while newer than `mapped`)."""
    from hw.flow.synth import run_yosys, yosys_path

    if out.is_file() and out.stat().st_mtime > Path(mapped).stat().st_mtime:
        return out
    cell, a, y = STA_BUFFER
    run_yosys(f"read_liberty -lib {yosys_path(liberty, out.parent)}; "
              f"read_verilog {yosys_path(mapped, out.parent)}; hierarchy -top {top}; {passes}setundef -zero; "
              f"insbuf -buf {cell} {a} {y}; write_verilog -noattr {out.name}",
              cwd=out.parent, log=out.with_name(f"{out.stem}_netlist.log"))
    return out


def buffered_netlist(mapped: Path, top: str, liberty: Path, work_dir: Path,
                     config: TimingConfig) -> tuple[Path, Buffering]:
    """`mapped` flattened (aliased wires merged, so the hierarchy's port connections cost no
    buffer), then every net's fanout bounded by `buffer_fanout`: WORK_DIR/sta_buffered.v."""
    from hw.flow.synth import parse_liberty

    flat = _rewrite_for_sta(mapped, top, liberty, Path(work_dir) / "sta_flat.v", "flatten; opt_clean -purge; ")
    text, buffering = buffer_fanout(flat.read_text(), parse_liberty(liberty).outputs, config.max_fanout,
                                    config.buffer_cell)
    out = Path(work_dir) / "sta_buffered.v"
    out.write_text(text)
    return out, buffering


# A Yosys `write_verilog -noattr` cell instance, one pin connection per line; liberty cells have
# one-bit pins, so each connection is one bit: a name, a bit of a name, or a constant. Escaped
# names (the flattened hierarchy's `\e0._190_ `) end with a space, kept as part of the name.
_INSTANCE = re.compile(r"^  (\S+) (\\\S+ |\S+) \(\n((?:    \.\w+\([^()\n]*\),?\n)*)  \);\n", re.M)
_CONNECTION = re.compile(r"    \.(\w+)\(([^()\n]*)\),?\n")


@dataclass(frozen=True)
class Buffering:
    nets: int      # nets that got a buffer tree
    buffers: int   # buffers inserted
    levels: int    # the deepest tree


def buffer_fanout(text: str, outputs: dict[str, frozenset[str]], max_fanout: int,
                  buffer: tuple[str, str, str]) -> tuple[str, Buffering]:
    """A flat netlist (Yosys' `write_verilog -noattr` of one module of liberty cells) with every
    net that drives more than ``max_fanout`` cell inputs split by a tree of ``buffer`` cells
    (name, input pin, output pin): the loads in groups of at most ``max_fanout``, each group
    behind one buffer, the buffers grouped the same way, until the net drives at most
    ``max_fanout``. Every load of a net is behind the same number of buffers. Ports keep their
    nets (an output port is not a cell input); constant connections are not nets."""
    cell, a, y = buffer
    matches = list(_INSTANCE.finditer(text))
    headers = len(re.findall(r"^  \S+ .+ \($", text, re.M))
    if headers != len(matches):
        raise SaddleError(f"buffer_fanout: {headers - len(matches)} of {headers} cell instances not in the "
                          "expected layout (write_verilog -noattr, one connection per line)")
    instances = []
    loads: dict[str, list] = {}
    for no, m in enumerate(matches):
        kind, pins = m.group(1), _CONNECTION.findall(m.group(3))
        if kind not in outputs:
            raise SaddleError(f"buffer_fanout: cell {kind} ({m.group(2)}) has no output pin in the liberty")
        instances.append((kind, m.group(2), dict(pins)))
        for pin, net in pins:
            if pin not in outputs[kind] and not re.fullmatch(r"\d+'[hbd][0-9a-fA-FxXzZ]+", net):
                loads.setdefault(net, []).append((no, pin))
    changed, added, decls = set(), [], []
    nets = levels = 0
    for net, sinks in loads.items():
        if len(sinks) <= max_fanout:
            continue
        nets += 1
        depth = 0
        while len(sinks) > max_fanout:
            groups = -(-len(sinks) // max_fanout)
            parents = []
            for g in range(groups):
                name = f"\\fanout${len(added)} "
                decls.append(f"  wire {name};\n")
                added.append([f"\\fanout_buf${len(added)} ", None, name])
                for sink in sinks[g * len(sinks) // groups:(g + 1) * len(sinks) // groups]:
                    _connect(sink, name, instances, added, changed)
                parents.append(("buffer", len(added) - 1))
            sinks, depth = parents, depth + 1
        for sink in sinks:
            _connect(sink, net, instances, added, changed)
        levels = max(levels, depth)
    if not added:
        return text, Buffering(0, 0, 0)
    parts = [text[:matches[0].start()], *decls]
    for no, m in enumerate(matches):
        if no:
            parts.append(text[matches[no - 1].end():m.start()])
        if no in changed:
            kind, name, pins = instances[no]
            parts.append(f"  {kind} {name} (\n" + ",\n".join(f"    .{p}({n})" for p, n in pins.items()) + "\n  );\n")
        else:
            parts.append(m.group(0))
    parts += [f"  {cell} {name} (\n    .{a}({src}),\n    .{y}({dst})\n  );\n" for name, src, dst in added]
    parts.append(text[matches[-1].end():])
    return "".join(parts), Buffering(nets, len(added), levels)


def _connect(sink, net: str, instances: list, added: list, changed: set) -> None:
    """Connect a load (a cell pin, or a new buffer's input) to `net`."""
    if sink[0] == "buffer":
        added[sink[1]][1] = net
    else:
        no, pin = sink
        instances[no][2][pin] = net
        changed.add(no)


def critical_path(sta: Path, netlist: Path, top: str, liberty: Path, work_dir: Path,
                  period: float, name: str = "sta") -> CriticalPath:
    """The worst setup path of `top` in the mapped `netlist` (OpenSTA's script and log: NAME.tcl, NAME.log)."""
    # The top's port list (it may span several lines: Yosys wraps long ones) names clk or not.
    ports = re.search(rf"^module {re.escape(top)}\(([^;]*)\);", Path(netlist).read_text(), re.M)
    has_clock = ports is not None and re.search(r"\bclk\b", ports.group(1)) is not None
    script = (_constrain(top, Path(liberty).resolve(), Path(netlist).resolve(), has_clock, period)
              + "report_checks -path_delay max -digits 4\n")
    return parse_path(run_sta(sta, script, work_dir, name), period)


def fo4_chain_netlist(stages: int) -> str:
    """A chain of `stages` INVX1 from port `a` to port `y`, each loaded by four INVX1 inputs: the
    next stage and three more (the last stage: four more)."""
    lines = [f"module fo4_{stages}(a, y);", "  input a;", "  output y;"]
    nets = ["a"] + [f"n{i}" for i in range(1, stages)] + ["y"]
    lines += [f"  wire {n};" for n in nets[1:-1]]
    for i in range(stages):
        lines.append(f"  INVX1 s{i} (.A({nets[i]}), .Y({nets[i + 1]}));")
        lines += [f"  INVX1 l{i}_{k} (.A({nets[i + 1]}), .Y());" for k in range(3 if i + 1 < stages else 4)]
    return "\n".join(lines + ["endmodule", ""])


def measure_fo4(sta: Path, liberty: Path, work_dir: Path, chains: tuple[int, int]) -> float:
    """The FO4 delay of `liberty` in ns: (delay of the long chain - the short one) / the stages
    between them, so the chains' ends (ideal input, the last stage) cancel."""
    delays = []
    for stages in chains:
        netlist = Path(work_dir) / f"fo4_{stages}.v"
        Path(work_dir).mkdir(parents=True, exist_ok=True)
        netlist.write_text(fo4_chain_netlist(stages))
        path = critical_path(sta, netlist, f"fo4_{stages}", liberty, work_dir, 100.0)
        delays.append(path.arrival_ns)
    return round((delays[1] - delays[0]) / (chains[1] - chains[0]), 5)


@dataclass(frozen=True)
class TimingResult:
    block: str
    mapping: str               # ABC's goal: "area" or "delay" (hw/flow/synth.py)
    netlist_kind: str          # "mapped" (as synthesized) or "buffered" (flattened, fanout bounded)
    startpoint: str
    endpoint: str
    stages: int
    arrival_ns: float
    min_period_ns: float
    fmax_mhz: float
    fo4_ns: float              # the library's FO4 delay (measured)
    depth_fo4: float           # min_period / FO4
    target_node_nm: float
    target_period_ps: float    # depth_fo4 x FO4 at the target node (the scaling rule)
    target_fmax_ghz: float
    meets_target_clock: bool   # target_fmax >= the target clock
    target_period_typical_ps: float   # the same with the rule's typical variant
    meets_target_clock_typical: bool
    library: str
    netlist: str
    buffering: Buffering | None = None   # the buffered netlist's trees

    def to_dict(self) -> dict:
        return asdict(self)


def block_timing(block: str, path: CriticalPath, fo4_ns: float, config: TimingConfig,
                 library: str, netlist: str, buffering: Buffering | None = None,
                 mapping: str = "area") -> TimingResult:
    """The figures of one block's critical path, carried to the target node (`buffering`: of the
    buffered netlist, None for the netlist as mapped)."""
    depth = path.min_period_ns / fo4_ns
    target_ps = depth * config.target_fo4_ns * 1000.0
    return TimingResult(block=block, mapping=mapping, netlist_kind="mapped" if buffering is None else "buffered",
                        buffering=buffering, startpoint=path.startpoint, endpoint=path.endpoint, stages=path.stages,
                        arrival_ns=path.arrival_ns, min_period_ns=path.min_period_ns,
                        fmax_mhz=round(1000.0 / path.min_period_ns, 1), fo4_ns=fo4_ns, depth_fo4=round(depth, 1),
                        target_node_nm=config.target_node_nm, target_period_ps=round(target_ps, 1),
                        target_fmax_ghz=round(1000.0 / target_ps, 2),
                        meets_target_clock=1000.0 / target_ps >= config.target_clock_ghz,
                        target_period_typical_ps=round(depth * config.target_fo4_typical_ns * 1000.0, 1),
                        meets_target_clock_typical=1000.0 / (depth * config.target_fo4_typical_ns * 1000.0)
                        >= config.target_clock_ghz,
                        library=library, netlist=netlist)
