"""Shared fixtures of the RTL tests (tests/hw/*): Verilator models built once per session.

`verilator_design(name, factory)` returns a built `hw.flow.verilator_runner.VerilatorDesign`; the same
name within one pytest session returns the same compiled model, so several tests share one
Verilator build (`hw.flow.verilator_runner.built`, which `saddle hw coverify` also uses; a build
folder whose RTL digest matches is reused across sessions without elaborating the design). Give
each distinct parameterization its own name (e.g. ``bank_pe_l4``). See
hw/flow/verilator_runner.py for an example and for waveforms (SADDLE_WAVES=1).

Long builds in the background: a test marked ``@pytest.mark.verilator_prebuild("module:function")``
(the function returns the design's (name, factory), e.g. ``hw.flow.coverify:shipped_design``)
runs at the end of the session, and the session starts that build in a separate process as soon
as collection is done. The suite runs one test at a time, so the build (the shipped Manager:
about 140 s of CPU) uses the second core while the other tests run; the marked test then finds
the model current (the build folder's lock makes it wait if the build is still running, and
builds it itself if the background build failed). The background build's output is in
``build/cocotb/prebuild.log``; it is stopped if the session ends first.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from common.paths import ROOT
from hw.flow.verilator_runner import COCOTB_BUILD, VerilatorDesign, built

PREBUILD = "verilator_prebuild"
_background: list[subprocess.Popen] = []


@pytest.fixture(scope="session")
def verilator_design():
    def get(name: str, factory) -> VerilatorDesign:
        return built(name, factory)

    return get


def pytest_configure(config):
    config.addinivalue_line("markers", f"{PREBUILD}(spec): the Verilator build `spec` ('module:function' returning "
                                       "(name, factory)) starts in the background; the test runs last")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    marked = [item for item in items if item.get_closest_marker(PREBUILD)]
    if marked:
        items[:] = [item for item in items if not item.get_closest_marker(PREBUILD)] + marked


def pytest_collection_finish(session):
    specs = sorted({mark.args[0] for item in session.items for mark in item.iter_markers(PREBUILD)})
    if not specs or session.config.option.collectonly:
        return
    COCOTB_BUILD.mkdir(parents=True, exist_ok=True)
    with open(COCOTB_BUILD / "prebuild.log", "w") as log:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        _background.append(subprocess.Popen([sys.executable, "-m", "hw.flow.verilator_runner", *specs], cwd=ROOT,
                                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))


def pytest_sessionfinish(session):
    for proc in _background:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)        # its own process group: Verilator, make, g++
            proc.wait()
    _background.clear()
