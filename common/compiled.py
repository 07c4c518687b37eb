"""Whether sim/'s compiled hot path runs. ``build_compiled.py`` compiles some of sim/'s modules
(and one of traces/) with mypyc from the same .py files, in place (an extension module beside
each source), and writes a manifest (``sim/_compiled.json``) with a digest of the sources it was
built from. ``import sim`` and ``import traces`` call :func:`install`: the extension modules run
only if the digest still matches and ``SADDLE_PURE_PYTHON`` is not set; otherwise a finder put
first on ``sys.meta_path`` loads every module of those packages from its .py file. All or none:
compiled modules call each other natively, and may have inlined constants of the modules they
import, so every source they can read is hashed and a changed one (a stale build) runs
interpreted, with one warning, until the build is redone."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import threading
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib.machinery import EXTENSION_SUFFIXES, ExtensionFileLoader, ModuleSpec, PathFinder
from importlib.util import spec_from_file_location
from pathlib import Path
from types import ModuleType

ENV = "SADDLE_PURE_PYTHON"
ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "sim" / "_compiled.json"
HASHED = ("sim", "common", "traces")     # what a compiled module can import
COMPILED = ("sim", "traces")             # the packages with compiled modules (build_compiled.py)


def sources_digest() -> str:
    """sha256 over the path and bytes of every .py file of the packages in ``HASHED``."""
    h = hashlib.sha256()
    for path in sorted(p for d in HASHED for p in (ROOT / d).rglob("*.py")):
        h.update(f"{path.relative_to(ROOT).as_posix()}\0".encode() + path.read_bytes() + b"\0")
    return h.hexdigest()


def extension_path(module: str) -> Path:
    """Where this interpreter loads ``module``'s extension from."""
    return ROOT / (module.replace(".", "/") + EXTENSION_SUFFIXES[0])


def stale_reason() -> str | None:
    """Why a build present in the tree may not run (None: it may, or nothing is built)."""
    if not MANIFEST.exists():
        return None
    manifest = json.loads(MANIFEST.read_text())
    if manifest["digest"] != sources_digest():
        return "sources changed since the build"
    if not all(extension_path(m).exists() for m in manifest["modules"]):
        return f"not built for this Python ({sys.version.split()[0]})"
    return None


def active() -> bool:
    """True when sim's compiled modules are the ones imported."""
    return not os.environ.get(ENV) and MANIFEST.exists() and stale_reason() is None


class Interpreted:
    """A meta-path finder: a module's .py file, never an extension module beside it (the
    packages in ``COMPILED``)."""

    @staticmethod
    def find_spec(name: str, path: Sequence[str] | None, target: ModuleType | None = None
                  ) -> ModuleSpec | None:
        if name.partition(".")[0] not in COMPILED or path is None:
            return None
        spec = PathFinder.find_spec(name, path)
        if spec is None or not isinstance(spec.loader, ExtensionFileLoader) or not spec.origin:
            return None
        source = Path(spec.origin).with_name(Path(spec.origin).name.split(".")[0] + ".py")
        return spec_from_file_location(name, source) if source.exists() else None


def install() -> None:
    """Called by ``import sim`` and ``import traces``: keep the compiled modules, or load every
    module of theirs from source (warning if a build is there but stale)."""
    if active():
        return
    if not os.environ.get(ENV) and (reason := stale_reason()):
        warnings.warn(f"sim's compiled modules are stale ({reason}): running pure Python; "
                      "`make compiled` rebuilds them", RuntimeWarning, stacklevel=2)
    if Interpreted not in sys.meta_path:
        sys.meta_path.insert(0, Interpreted)


@contextmanager
def interrupt_after() -> Iterator[None]:
    """Run the block with Ctrl-C noted, not raised, and raise KeyboardInterrupt once it ends
    (also SIGTERM and SIGHUP where, as in ``saddle``, they stop like Ctrl-C). Compiled code
    cannot be interrupted safely: CPython checks for signals inside the arithmetic of large
    ints, and mypyc's runtime takes the failed operation for a lack of memory and aborts the
    process ("fatal: out of memory"). Outside the main thread, and for a signal with another
    handler than Python's (a worker ignores them), nothing changes."""
    main = threading.current_thread() is threading.main_thread()
    stops = [s for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
             if main and signal.getsignal(s) is signal.default_int_handler]
    caught: list[int] = []
    previous = {s: signal.signal(s, lambda signum, frame: caught.append(signum)) for s in stops}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if caught:
        raise KeyboardInterrupt
