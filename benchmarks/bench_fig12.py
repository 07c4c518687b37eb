"""Wall time of the whole fig12 grid (3 pairs x 4 batch sizes x 5 systems), every run
simulated (nothing resumed): into a temporary folder, or into ``--out DIR`` after emptying its
``runs/`` (then ``saddle run fig12 --out DIR`` only re-plots). Prints runs and seconds."""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from sim.experiments.grid import load_experiment, resolve_path
from sim.experiments.runner import execute


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", help="results folder to fill (its runs/ is emptied first)")
    args = parser.parse_args()
    experiment, runs = load_experiment(resolve_path("fig12"))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out) if args.out else Path(tmp)
        shutil.rmtree(out / "runs", ignore_errors=True)
        start = time.perf_counter()
        execute(experiment["name"], runs, out, progress=sys.stderr.isatty())
        seconds = time.perf_counter() - start
    print(f"fig12 grid: {len(runs)} runs in {seconds:.1f} s ({seconds / len(runs):.2f} s per run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
