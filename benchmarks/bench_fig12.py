"""Wall time of the whole fig12 grid (3 pairs x 4 batch sizes x 5 systems), run fresh into a
temporary folder (no resumed runs). Prints runs, and seconds."""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from sim.experiments.grid import load_experiment, resolve_path
from sim.experiments.runner import execute


def main() -> int:
    experiment, runs = load_experiment(resolve_path("fig12"))
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        execute(experiment["name"], runs, Path(tmp), progress=sys.stderr.isatty())
        seconds = time.perf_counter() - start
    print(f"fig12 grid: {len(runs)} runs in {seconds:.1f} s ({seconds / len(runs):.2f} s per run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
