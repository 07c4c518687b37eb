"""Where the repository's data lives. The package is installed editable (see README), so the
shipped configs and traces are found beside the code."""
from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs"
TRACE_DATA = ROOT / "traces" / "data"
BUILD = ROOT / "build"
_UMASK = os.umask(0)    # read once, at import: os.umask can only be read by setting it
os.umask(_UMASK)


def write_whole(path: Path, content: str | Callable[[Path], None], suffix: str = ".tmp") -> None:
    """``content`` (text, or a function that writes the file it is given) at ``path`` whole or
    not at all: written to a temporary file of this call beside it (named ``suffix``), then
    renamed. A rerun resumes from what is there, a reader never sees half a file, and processes
    writing the same file never mix their bytes or rename each other's temporary file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    try:
        if isinstance(content, str):
            with os.fdopen(fd, "w") as f:
                f.write(content)
        else:
            os.close(fd)
            content(Path(tmp))
        os.chmod(tmp, 0o666 & ~_UMASK)      # as open() would have made it (mkstemp: 0600)
        os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise


def results_dir() -> Path:
    """Default output folder of experiments: ``results/`` in the current directory (override
    with SADDLE_RESULTS)."""
    return Path(os.environ.get("SADDLE_RESULTS", "results"))


def check_output(path: Path, what: str, *, folder: bool) -> None:
    """Refuse, before any work, an output that cannot be written: ``path`` (a folder if
    ``folder``, else a file) must exist as that kind and be writable, or be creatable in the
    nearest folder that exists. ``what`` names the option (``--out``)."""
    from common.errors import SaddleError
    if path.exists() and path.is_dir() != folder:
        kind = "a folder" if folder else "a file"
        raise SaddleError(f"{what} {path}: exists and is not {kind}")
    probe = path if folder and path.is_dir() else path.parent
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise SaddleError(f"{what} {path}: {probe} is a file, not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise SaddleError(f"{what} {path}: {probe} is not writable")
