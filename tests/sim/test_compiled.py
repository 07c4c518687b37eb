"""sim/'s compiled hot path (``build_compiled.py``, ``common/compiled.py``): the same records
byte for byte as pure Python, on every system at two batches, each mode in its own process; the
pure-Python switch; a stale build never runs; a failed build says so and leaves pure Python.
Without a build the comparison is skipped, saying why (``SADDLE_REQUIRE_COMPILED=1``, as CI
sets, makes that a failure)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import sim.engine
from common import compiled

ROOT = Path(__file__).resolve().parents[2]
SYSTEMS = sorted(p.stem for p in (ROOT / "configs" / "systems").glob("*.yaml"))
OPT66 = "opt-66b+opt-1.3b"
FIXED_D = ("gpu-sd", "pim-sd", "specpim-sd")


def records() -> dict[str, str]:
    """Every system (fixed-d ones at d = 8, and searched) at batches 4 and 8, 10 requests each:
    each run's record as ``saddle run`` writes it, canonical JSON."""
    from sim.systems.run import RunParams
    from tests.sim.systems.test_speed_identical import _record
    runs = [RunParams(system=s, pair=OPT66, batch=b, draft_length=8 if s in FIXED_D else None,
                      requests=10) for s in SYSTEMS for b in (4, 8)]
    runs += [RunParams(system=s, pair=OPT66, batch=b, draft_length="search", label=f"{s}-best",
                       requests=10)
             for s in FIXED_D for b in (4, 8)]
    return {f"{p.label or p.system}|b{p.batch}": _record(p) for p in runs}


def _in_process(pure: bool, code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != compiled.ENV}
    env["PYTHONPATH"] = str(ROOT)
    if pure:
        env[compiled.ENV] = "1"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _require_build() -> None:
    if not compiled.active():
        why = compiled.stale_reason() or "not built (make compiled)"
        if os.environ.get("SADDLE_REQUIRE_COMPILED"):
            pytest.fail(f"no usable compiled build: {why}")
        pytest.skip(f"no usable compiled build: {why}")


def test_compiled_and_pure_python_records_are_byte_identical():
    _require_build()
    code = ("import json, sim.engine.events as e; from tests.sim.test_compiled import records; "
            "print(json.dumps([e.__file__, records()]))")
    (native, got), (source, want) = (json.loads(_in_process(pure, code)) for pure in (False, True))
    assert native.endswith(".so") and source.endswith(".py")
    assert len(want) == 2 * (len(SYSTEMS) + len(FIXED_D))
    assert got == want


def test_the_switch_loads_every_module_from_source():
    """A process that runs a simulation imports every compiled module: natively by default,
    from its .py file with the switch, and every other sim and traces module from source either
    way."""
    _require_build()
    code = ("import json, sys, sim.systems.run, sim.manager.recording; print(json.dumps({n: m.__file__ "
            "for n, m in sys.modules.items() if n.startswith(('sim.', 'traces.')) "
            "and getattr(m, '__file__', 0)}))")
    built = set(json.loads(compiled.MANIFEST.read_text())["modules"])
    native, source = (json.loads(_in_process(pure, code)) for pure in (False, True))
    assert built <= set(source) and set(native) - set(source) == {"sim._compiled__mypyc"}
    assert {n for n, f in native.items() if f.endswith(".so")} == built | {"sim._compiled__mypyc"}
    assert all(f.endswith(".py") for f in source.values())


def test_a_stale_build_runs_pure_python_with_a_warning(tmp_path, monkeypatch):
    manifest = tmp_path / "_compiled.json"
    manifest.write_text(json.dumps({"digest": "0" * 64, "modules": ["sim.engine.events"]}))
    monkeypatch.setattr(compiled, "MANIFEST", manifest)
    monkeypatch.delenv(compiled.ENV, raising=False)
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    assert compiled.stale_reason() == "sources changed since the build"
    assert not compiled.active()
    with pytest.warns(RuntimeWarning, match="stale .sources changed since the build.: running pure"):
        compiled.install()
    assert sys.meta_path[0] is compiled.Interpreted
    spec = compiled.Interpreted.find_spec("sim.engine.events", list(sim.engine.__path__))
    assert spec is None or spec.origin.endswith("events.py")    # None: nothing built to skip
    # The digest covers every source a compiled module can import, not only the compiled ones.
    monkeypatch.setattr(compiled, "ROOT", tmp_path)
    (tmp_path / "common").mkdir()
    (tmp_path / "common" / "x.py").write_text("A = 1\n")
    before = compiled.sources_digest()
    (tmp_path / "common" / "x.py").write_text("A = 2\n")
    assert compiled.sources_digest() != before


def test_no_build_is_pure_python_without_a_warning(tmp_path, monkeypatch):
    monkeypatch.setattr(compiled, "MANIFEST", tmp_path / "absent.json")
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled.install()
    assert not compiled.active() and compiled.Interpreted in sys.meta_path


@pytest.mark.slow
def test_a_failed_build_says_so_in_one_line_and_leaves_pure_python(tmp_path):
    """In a copy of the sources, with a C compiler that fails: one line on stderr, exit 0, no
    manifest and no extension module left, and the copy imports sim from source."""
    for name in ("sim", "common", "traces", "configs"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns(
            "*.so", "_compiled.json", "__pycache__", "data", "figures"))
    shutil.copy(ROOT / "build_compiled.py", tmp_path)
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    env = os.environ | {"CC": "false", "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "build_compiled.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("sim: the mypyc build failed (") and "pure Python" in done.stderr
    assert not (tmp_path / "sim" / "_compiled.json").exists()
    assert not list((tmp_path / "sim").rglob("*.so"))
    code = "import sim.engine.events as e; print(e.__file__)"
    where = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, check=True,
                           capture_output=True, text=True)
    assert where.stdout.strip() == str(tmp_path / "sim" / "engine" / "events.py"), where.stderr
