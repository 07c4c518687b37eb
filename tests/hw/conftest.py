"""Shared fixtures of the RTL tests (tests/hw/*): Verilator models built once per session.

`verilator_design(name, factory)` returns a built `hw.flow.verilator_runner.VerilatorDesign`; the same
name within one pytest session returns the same compiled model, so several tests share one
Verilator build. Give each distinct parameterization its own name (e.g. ``bank_pe_l4``).
See hw/flow/verilator_runner.py for an example and for waveforms (SADDLE_WAVES=1).
"""
from __future__ import annotations

import pytest

from hw.flow.verilator_runner import VerilatorDesign


@pytest.fixture(scope="session")
def verilator_design():
    built: dict[str, VerilatorDesign] = {}

    def get(name: str, factory) -> VerilatorDesign:
        if name not in built:
            built[name] = VerilatorDesign(name, factory).build()
        return built[name]

    return get
