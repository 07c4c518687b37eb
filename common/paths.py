"""Where the repository's data lives. The package is installed editable (see README), so the
shipped configs and traces are found beside the code."""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs"
TRACE_DATA = ROOT / "traces" / "data"
BUILD = ROOT / "build"


def results_dir() -> Path:
    """Default output folder of experiments: ``results/`` in the current directory (override
    with SADDLE_RESULTS)."""
    return Path(os.environ.get("SADDLE_RESULTS", "results"))
