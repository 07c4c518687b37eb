"""One Verilog module per distinct submodule: identical instances share one definition.

Amaranth writes one Verilog module per submodule *instance* (`shared_pool.e0` ..
`shared_pool.e511`), so a hierarchical synthesis maps 512 copies of the same CAM entry. The
copies differ only in names: the module's own and the escaped identifiers Amaranth numbers
across the whole design (`\\port$3752$0`, `\\$160`, `\\pos$19`). `share_identical_modules`
renames those identifiers canonically (in order of first appearance) and sorts the
declarations, bottom-up so that a parent's text already names its children's representatives,
and keeps one module per canonical text; the other instances point at it with their port
connections renamed to match.

Two modules with the same canonical text are the same circuit up to a renaming of wires, so the
mapped representative is a valid netlist of every copy and Yosys' `stat` counts its instances.
The totals agree with mapping every copy up to ABC's tie-breaking, which depends on what Yosys
created before (0.1 % on a small Manager; `tests/hw/flow/test_unique_modules.py`). Modules that
differ in anything else (widths, constants, Python-chosen names) stay distinct: the sharing can
only be too cautious, never wrong.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# `module name(` or `module \\escaped.name (`
_MODULE = re.compile(r"^module (\\\S+|\w+) ?\(", re.M)
# Escaped identifiers (`\\name `, ended by white space), except a port name in a connection
# (`.\\port$1$0 (wire)`): that names the child's port, not a wire of this module, and stays.
_OWN_ESCAPED = re.compile(r"(?<!\.)\\\S+(?=\s)")
# An instance line of a module body: `  <module name>  <instance name> (`
_INSTANCE = re.compile(r"^  (\S+)\s+(\S+) \($")
_CONNECTION = re.compile(r"^    \.(\\\S+ |\w+)\(")
# Canonical names (only compared, never written out) and the placeholder of a module's own name.
_CANONICAL = "\\~{}"
_SELF = "\\~self"


@dataclass(frozen=True)
class SharedVerilog:
    text: str                    # the Verilog with one module per distinct submodule
    representative: dict[str, str]  # every module name of the input -> the module that stands for it
    modules: int                 # modules in the input
    distinct: int                # modules in `text`
    top_children: list[str]      # the modules the top instantiates directly (input names)


def _split(text: str) -> tuple[str, list[tuple[str, str]]]:
    """The text before the first module's attributes, and (name, text) of each module (its
    attribute lines included)."""
    starts = [m.start() for m in _MODULE.finditer(text)]
    if not starts:
        raise ValueError("no module in the Verilog text")
    # Attribute lines `(* ... *)` right above a module belong to it.
    cuts = []
    for start in starts:
        cut = start
        while cut > 0:
            prev = text.rfind("\n", 0, cut - 1) + 1
            if not text.startswith("(*", prev):
                break
            cut = prev
        cuts.append(cut)
    chunks = [text[a:b] for a, b in zip(cuts, cuts[1:] + [len(text)])]
    return text[:cuts[0]], [(_MODULE.search(chunk).group(1), chunk) for chunk in chunks]


def _canonical(text: str, keep: set[str]) -> tuple[str, dict[str, str]]:
    """`text` with this module's escaped identifiers that carry a `$` (Amaranth's design-wide
    numbering) renamed in order of first appearance, and the renaming. Names in `keep` (module
    names) and the children's port names stay: they say which circuit is connected where."""
    names: dict[str, str] = {}
    for token in _OWN_ESCAPED.findall(text):
        if "$" in token and token not in names and token not in keep:
            names[token] = _CANONICAL.format(len(names))
    return _sorted_declarations(_OWN_ESCAPED.sub(lambda m: names.get(m.group(0), m.group(0)), text)), names


_DECLARATION = re.compile(r"^  (input|output|inout|wire|reg)\b.*;$")


def _sorted_declarations(text: str) -> str:
    """`text` with its declarations (one line each, with the attribute lines above them) in sorted
    order. Amaranth sorts them by name, so instances whose design-wide numbers differ in digit
    count (`port$738` vs `port$1059`) list the same declarations in another order; the order of
    declarations means nothing in Verilog."""
    lines = text.split("\n")
    declarations, pending, rest = [], [], []
    for line in lines:
        if line.startswith("  (*") and line.endswith("*)"):
            pending.append(line)
        elif _DECLARATION.match(line):
            declarations.append("\n".join(pending + [line]))
            pending = []
        else:
            rest.extend(pending + [line])
            pending = []
    rest.extend(pending)
    return "\n".join(rest[:1] + sorted(declarations) + rest[1:])


def share_identical_modules(verilog: str, top: str) -> SharedVerilog:
    """`verilog` (Amaranth output, top module `top`) with identical submodules merged."""
    preamble, modules = _split(verilog)
    by_name = dict(modules)
    module_names = set(by_name)
    if top not in by_name:
        raise ValueError(f"no module {top} in the Verilog text")
    children = {name: [m.group(1) for line in chunk.splitlines()
                       if (m := _INSTANCE.match(line)) and m.group(1) in by_name]
                for name, chunk in modules}
    representative: dict[str, str] = {}
    port_names: dict[str, dict[str, str]] = {}  # module -> its names -> the representative's
    classes: dict[str, tuple[str, dict[str, str]]] = {}  # canonical text -> representative, its names
    output: dict[str, str] = {}  # module -> its text, representatives only
    done: set[str] = set()

    def visit(name: str) -> None:
        if name in done:
            return
        for child in children[name]:
            visit(child)
        text = _point_at_representatives(by_name[name], representative, port_names)
        if name != top:
            header = _MODULE.search(text)
            canonical = text[:header.start(1)] + _SELF + text[header.end(1):]
            canonical, names = _canonical(canonical, module_names)
            if canonical not in classes:
                # The representative keeps its own names: Yosys and ABC order some work by name,
                # so a renamed module can map to a different (equally valid) netlist.
                classes[canonical] = (name, {new: old for old, new in names.items()})
            rep, rep_names = classes[canonical]
            representative[name] = rep
            port_names[name] = {old: rep_names[new] for old, new in names.items()}
            if rep != name:
                done.add(name)
                return
        output[name] = text
        done.add(name)

    visit(top)
    representative[top] = top
    # In the input's order: Yosys numbers what it creates across the design, so the order of the
    # modules can change how a module maps (ties broken by name), even one that is not shared.
    text = "".join(output[name] for name, _ in modules if name in output)
    return SharedVerilog(preamble + text, representative, len(modules), len(output), sorted(set(children[top])))


def _point_at_representatives(chunk: str, representative: dict[str, str],
                              port_names: dict[str, dict[str, str]]) -> str:
    """`chunk` with each instance of an already-visited module turned into an instance of its
    representative, its port connections renamed to the representative's port names."""
    lines = chunk.split("\n")
    child = None
    for i, line in enumerate(lines):
        if (m := _INSTANCE.match(line)) and m.group(1) in representative:
            child = m.group(1)
            lines[i] = f"  {representative[child]}  {m.group(2)} ("
        elif child is not None:
            if line == "  );":
                child = None
            elif m := _CONNECTION.match(line):
                port = m.group(1).rstrip()
                renamed = port_names[child].get(port, port)
                sep = " " if renamed.startswith("\\") else ""
                lines[i] = f"    .{renamed}{sep}(" + line[m.end():]
    return "\n".join(lines)
