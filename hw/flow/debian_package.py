"""Files out of a Debian package without installing it: `apt-get download` + `dpkg-deb -x`.

How `saddle hw fetch-lib` takes the osu018 cell library (``qflow-tech-osu018``, without qflow's
dependencies) and `saddle hw timing` takes OpenSTA (``opensta``) when it is not on PATH: no root
and no system-wide install needed, only apt's package lists (refreshed with `apt-get update`
when running as root and the download fails, as on a fresh container).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from common.errors import SaddleError


def extract_package(package: str, dest: Path, hint: str) -> Path:
    """Download `package` and unpack its files under `dest` (the package's own tree: usr/...).
    Returns `dest`. SaddleError says why when impossible, followed by `hint` (what to do instead)."""
    for tool in ("apt-get", "dpkg-deb"):
        if shutil.which(tool) is None:
            raise SaddleError(f"cannot fetch {package}: `{tool}` not found (Debian/Ubuntu only); {hint}")
    with tempfile.TemporaryDirectory() as tmp:
        download = ["apt-get", "download", package]
        proc = subprocess.run(download, cwd=tmp, capture_output=True, text=True)
        if proc.returncode != 0 and os.geteuid() == 0:
            # A fresh machine may have no package lists yet.
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True, text=True)
            proc = subprocess.run(download, cwd=tmp, capture_output=True, text=True)
        debs = list(Path(tmp).glob(f"{package}_*.deb"))
        if proc.returncode != 0 or not debs:
            raise SaddleError(f"cannot fetch {package} with apt-get download: "
                              f"{(proc.stderr or proc.stdout).strip().splitlines()[-1:]}; {hint}")
        Path(dest).mkdir(parents=True, exist_ok=True)
        subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(dest)], check=True)
    return Path(dest)
