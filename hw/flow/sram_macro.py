"""SRAM macros in synthesis and static timing: the pools' SRAM storage (hw/manager/sram.py).

Each ``Sram`` is its own module in the exported Verilog, holding one memory array, which Yosys
infers as one ``$mem_v2`` cell (checked after the coarse stage: ``check_inferred``). Instead of
mapping it to flip-flops, the flow (hw/flow/synth.py) keeps that module out of flattening,
black-boxes it after the coarse stage and replaces each instance by a liberty cell with one pin
per bit (``SADDLE_SRAM_<depth>x<width>_<k>``, ``techmap`` with ``techmap_text``). The cells are
written after the osu018 cells into the block's own liberty (``WORK/cells.lib`` for the area
report, ``WORK/cells_sta.lib`` with timing arcs for OpenSTA, ``block_liberty``):

* area = bits x bit-cell area / array efficiency at the node of configs/synth/sram.yaml, in
  liberty units through NAND2-eq (the osu018 NAND2 scaled by (node / 180 nm)^2), so the macro
  adds to the logic's NAND2-eq like any cell;
* timing: a synchronous macro: every input pin has a setup time before the rising clock edge,
  every output is valid an access time after it (both in FO4 delays of the library, so the
  scaling rule carries them to 28 nm with the logic).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from common.config import config_path, get, load_yaml
from common.errors import SaddleError

# A memory array in Amaranth's Verilog: ``reg [W-1:0] mem [D-1:0];``
_MEMORY = re.compile(r"^\s*reg \[(\d+):0\] \S+ \[(\d+):0\];$", re.M)
_MODULE = re.compile(r"^module (\\\S+ |\S+)\s*\(.*?\);\n(.*?)^endmodule", re.M | re.S)
_PORT = re.compile(r"^\s*(input|output)\s+(?:\[(\d+):0\]\s+)?(\\\S+ |\S+);$", re.M)
REFERENCE_NODE_NM = 180.0     # osu018


@dataclass(frozen=True)
class SramModel:
    node_nm: float
    bitcell_um2: float
    array_efficiency: float
    access_fo4: float
    setup_fo4: float

    def nand2_eq_per_bit(self, nand2_area_um2: float) -> float:
        """A macro bit in NAND2-eq: its share of the macro's area over the NAND2 of the library
        (``nand2_area_um2`` at 180 nm) scaled to the macro's node."""
        nand2_at_node = nand2_area_um2 * (self.node_nm / REFERENCE_NODE_NM) ** 2
        return self.bitcell_um2 / self.array_efficiency / nand2_at_node


def load_sram_model(path: Path | None = None) -> SramModel:
    path = path or config_path("synth", "sram")
    data = load_yaml(path)
    area, timing = get(data, "area", dict, source=path), get(data, "timing", dict, source=path)
    num = lambda sec, name, key: float(get(sec, key, float, source=path, prefix=name, positive=True))  # noqa: E731
    model = SramModel(num(area, "area", "node_nm"), num(area, "area", "bitcell_um2"),
                      num(area, "area", "array_efficiency"), num(timing, "timing", "access_fo4"),
                      num(timing, "timing", "setup_fo4"))
    if model.array_efficiency > 1:
        raise SaddleError(f"{path}: area.array_efficiency: expected at most 1, found {model.array_efficiency}")
    return model


@dataclass(frozen=True)
class MacroModule:
    module: str                                  # the Verilog module, as written (escaped names keep their space)
    depth: int
    width: int
    ports: tuple[tuple[str, str, int], ...]      # (name as written, "input"/"output", bits)
    cell: str                                    # the liberty cell replacing its instances

    @property
    def name(self) -> str:
        """The module name as Yosys' commands take it."""
        return self.module.strip().lstrip("\\")

    def pins(self) -> list[tuple[str, str, str]]:
        """(liberty pin, direction, Verilog bit) of every port bit."""
        out = []
        for port, direction, bits in self.ports:
            base = re.sub(r"\W", "_", port.strip().lstrip("\\"))
            out += [(base if bits == 1 else f"{base}_{i}", direction, port if bits == 1 else f"{port}[{i}]")
                    for i in range(bits)]
        return out


def memory_modules(verilog: str) -> list[MacroModule]:
    """The modules of ``verilog`` that hold a memory array (one each: an ``Sram``)."""
    found = []
    for m in _MODULE.finditer(verilog):
        memories = _MEMORY.findall(m.group(2))
        if not memories:
            continue
        if len(memories) > 1:
            raise SaddleError(f"module {m.group(1).strip()}: {len(memories)} memories, an SRAM macro holds one")
        width, depth = (int(x) + 1 for x in memories[0])
        ports = tuple((name, direction, int(msb) + 1 if msb else 1)
                      for direction, msb, name in _PORT.findall(m.group(2)))
        found.append(MacroModule(m.group(1), depth, width, ports, f"SADDLE_SRAM_{depth}x{width}_{len(found)}"))
    return found


def check_inferred(stat: dict, macros: list[MacroModule]) -> int:
    """The memory bits Yosys inferred: each macro module holds exactly one ``$mem_v2`` cell
    (``stat``: a ``stat -json`` report after the coarse stage), else SaddleError."""
    modules = {name.lstrip("\\"): s["num_cells_by_type"] for name, s in stat["modules"].items()}
    for macro in macros:
        cells = modules.get(macro.name, {})
        if cells.get("$mem_v2") != 1:
            raise SaddleError(f"Yosys did not infer one memory in {macro.name}: cells {cells}")
    return sum(m.depth * m.width for m in macros)


def techmap_text(macros: list[MacroModule]) -> str:
    """A Yosys techmap file replacing each macro module's instances by its liberty cell."""
    out = []
    for macro in macros:
        names = ", ".join(port for port, _, _ in macro.ports)
        decls = [f"  {d} {f'[{bits - 1}:0] ' if bits > 1 else ''}{port};" for port, d, bits in macro.ports]
        pins = ",\n".join(f"    .{pin}({bit})" for pin, _, bit in macro.pins())
        out += [f"module {macro.module}({names});", *decls, f"  {macro.cell} _TECHMAP_REPLACE_ (", pins, "  );",
                "endmodule", ""]
    return "\n".join(out)


def liberty_cells(macros: list[MacroModule], model: SramModel, nand2_area: float, fo4_ns: float | None) -> str:
    """Liberty cells of ``macros`` (units of osu018: ns, pF, its area units); without
    ``fo4_ns`` (synthesis, before the library's FO4 is measured) pins without timing."""
    per_bit = model.nand2_eq_per_bit(nand2_area) * nand2_area

    def arc(kind: str, values: list[tuple[str, float]]) -> str:
        if fo4_ns is None:
            return ""
        groups = "".join(f'        {name} (scalar) {{ values ("{v * fo4_ns:.4f}"); }}\n' for name, v in values)
        return f'    timing () {{\n      related_pin : "clk";\n      timing_type : {kind};\n{groups}    }}\n'

    setup = arc("setup_rising", [("rise_constraint", model.setup_fo4), ("fall_constraint", model.setup_fo4)])
    access = arc("rising_edge", [("cell_rise", model.access_fo4), ("cell_fall", model.access_fo4),
                                 ("rise_transition", 2.0), ("fall_transition", 2.0)])
    out = []
    for macro in macros:
        text = (f"cell ({macro.cell}) {{\n  area : {macro.depth * macro.width * per_bit:.1f};\n"
                "  dont_use : true;\n  dont_touch : true;\n")
        for pin, direction, _ in macro.pins():
            text += f"  pin ({pin}) {{\n    direction : {direction};\n"
            if pin == "clk":
                text += "    capacitance : 0.03;\n    clock : true;\n"
            elif direction == "input":
                text += "    capacitance : 0.01;\n" + setup
            else:
                text += access
            text += "  }\n"
        out.append(text + "}\n")
    return "".join(out)


def write_libraries(liberty: Path, macros: list[MacroModule], work_dir: Path, nand2_area: float) -> tuple[Path, Path]:
    """The synthesis side, in ``work_dir``: ``macros.lib`` (the macro cells alone, which Yosys
    reads as black boxes), ``cells.lib`` (``liberty`` with them: the area report), ``sram_map.v``
    (``techmap_text``) and ``macros.json`` (what ``block_liberty`` rebuilds the cells from)."""
    import json

    cells = liberty_cells(macros, load_sram_model(), nand2_area, None)
    work_dir = Path(work_dir)
    (work_dir / "macros.lib").write_text("library(saddle_sram) {\n" + cells + "}\n")
    (work_dir / "cells.lib").write_text(_with_cells(liberty, cells))
    (work_dir / "sram_map.v").write_text(techmap_text(macros))
    (work_dir / "macros.json").write_text(json.dumps([m.__dict__ for m in macros], indent=1) + "\n")
    return work_dir / "macros.lib", work_dir / "cells.lib"


def _with_cells(liberty: Path, cells: str) -> str:
    text = Path(liberty).read_text()
    close = text.rstrip().rfind("}")
    if close < 0:
        raise SaddleError(f"{liberty}: not a liberty library")
    return text[:close] + cells + "}\n"


def clear_libraries(work_dir: Path) -> None:
    """Remove what ``write_libraries`` wrote (a block synthesized without macros)."""
    for name in ("macros.lib", "cells.lib", "sram_map.v", "macros.json", "cells_sta.lib"):
        (Path(work_dir) / name).unlink(missing_ok=True)


def block_liberty(work_dir: Path, liberty: Path, fo4_ns: float, nand2_area: float) -> Path:
    """The liberty a block's netlists are timed with: ``liberty`` with the block's SRAM macros
    (sized from ``nand2_area``, the library's NAND2 area) timed by the library's FO4
    (``WORK/cells_sta.lib``) when synthesis found macros, else ``liberty`` itself."""
    import json

    spec = Path(work_dir) / "macros.json"
    if not spec.is_file():
        return Path(liberty)
    macros = [MacroModule(**{**m, "ports": tuple(tuple(p) for p in m["ports"])}) for m in json.loads(spec.read_text())]
    cells = liberty_cells(macros, load_sram_model(), nand2_area, fo4_ns)
    out = Path(work_dir) / "cells_sta.lib"
    text = _with_cells(liberty, cells)
    if not out.is_file() or out.read_text() != text:
        out.write_text(text)
    return out
