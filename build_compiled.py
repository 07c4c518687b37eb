"""Compile sim/'s per-token hot path with mypyc, from the same .py files, in place: an extension
module beside each source, their shared library ``sim/_compiled__mypyc*.so``, and last the
manifest ``sim/_compiled.json`` (``common/compiled.py`` reads it at ``import sim``). ``make
compiled`` runs this (``make run`` and ``make test`` call it). Nothing to do when the manifest
matches the sources. Needs mypy (the ``test`` extra), setuptools and a C compiler; if the build
fails it says so in one line (the log is in ``build/mypyc/build.log``), removes what it made, and
exits 0: sim/ then runs as pure Python."""
from __future__ import annotations

import json
import subprocess
import sys

from common.compiled import COMPILED, MANIFEST, ROOT, extension_path, sources_digest, stale_reason

GROUP = "sim._compiled"     # the shared library: sim/_compiled__mypyc.<abi>.so
BUILD = ROOT / "build" / "mypyc"
# What runs per token: the event queue, the devices, the price lookups, the run loops, the
# Manager model's per-token parts, the trace's drafting path (traces/path.py, every round), and
# what those call per step or per token (the GPU and energy models, the token counts of
# sim/metrics.py). The rest of sim/ runs once per run and stays interpreted, and so do the Manager's transaction
# and config types (sim/manager/transactions.py, config.py: logged, compared and built field by
# field by hw/flow), the stop rules (sim/systems/registry.py: interpreted classes subclass them,
# docs/extending.md) and the rest of traces/ (numpy-bound). A compiled Manager cannot be
# deep-copied (native classes), so hw/flow builds twins by replaying instead.
MODULES = [
    "sim.engine.events", "sim.engine.devices", "sim.engine.costs",
    "sim.systems.base", "sim.systems.pooled", "sim.systems.lockstep", "sim.systems.autoregressive",
    "sim.systems.planned", "sim.systems.saddle_d",
    "sim.cost.step", "sim.cost.attention", "sim.cost.pim", "sim.cost.value", "sim.cost.gpu",
    "sim.cost.energy", "sim.metrics",
    "sim.manager.manager", "sim.manager.controller", "sim.manager.shared_pool", "sim.manager.eager_pool",
    "sim.manager.conservation", "sim.manager.scheduler", "sim.manager.planner", "sim.manager.recording",
    "traces.path",
]


def clean() -> None:
    MANIFEST.unlink(missing_ok=True)
    for path in (p for package in COMPILED for p in (ROOT / package).rglob("*.so")):
        path.unlink()


def setup() -> None:
    """The setuptools build (run in a subprocess, its output to the log)."""
    from mypyc.build import mypycify
    from setuptools import setup as run_setup
    sources = [m.replace(".", "/") + ".py" for m in MODULES]
    extensions = mypycify(sources, group_name=GROUP, target_dir=str(BUILD / "c"), multi_file=True)
    for extension in extensions:    # the group's headers go to a folder of its package
        extension.include_dirs.append(str(BUILD / "c" / GROUP.rpartition(".")[0]))
    run_setup(name="saddle-compiled", ext_modules=extensions,
              script_args=["build_ext", "--inplace", "--build-temp", str(BUILD / "temp"),
                           "--build-lib", str(BUILD / "lib")])


def mypyc_version() -> str | None:
    try:
        from mypy.version import __version__
    except ImportError:
        return None
    return __version__


def built_as_now(mypyc: str) -> bool:
    """A build of these modules, by this mypyc, from the sources as they are."""
    if not MANIFEST.exists():
        return False
    manifest = json.loads(MANIFEST.read_text())
    return (manifest["modules"] == MODULES and manifest.get("mypyc") == mypyc
            and stale_reason() is None)


def failed(why: str) -> int:
    clean()
    print(f"sim: the mypyc build failed ({why}): sim/ runs as pure Python", file=sys.stderr)
    return 0


def build() -> int:
    mypyc = mypyc_version()
    if mypyc is None:
        return failed("no mypy in this Python: pip install -e '.[test]'")
    if built_as_now(mypyc):
        print("sim: compiled modules up to date")
        return 0
    clean()
    BUILD.mkdir(parents=True, exist_ok=True)
    log = BUILD / "build.log"
    digest = sources_digest()
    print(f"sim: compiling {len(MODULES)} modules with mypyc (about a minute; log {log})", flush=True)
    with log.open("w") as out:
        done = subprocess.run([sys.executable, __file__, "--setup"], cwd=ROOT, stdout=out,
                              stderr=subprocess.STDOUT)
    if done.returncode or not all(extension_path(m).exists() for m in MODULES):
        lines = log.read_text().strip().splitlines() or ["no output"]
        last = next((line for line in reversed(lines) if "error" in line.lower()), lines[-1])
        return failed(f"{last[:160]}; full log {log.relative_to(ROOT)}")
    MANIFEST.write_text(json.dumps({"digest": digest, "modules": MODULES, "mypyc": mypyc}) + "\n")
    print(f"sim: compiled {len(MODULES)} modules")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--setup"]:
        setup()
    else:
        sys.exit(build())
