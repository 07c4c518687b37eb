"""Wall time of the whole fig12 grid (3 pairs x 4 batch sizes x 7 systems), every run
simulated (nothing resumed): into a temporary folder, or into ``--out DIR`` after emptying its
``runs/`` (then ``saddle run fig12 --out DIR`` only re-plots). Runs in ``--jobs N`` worker
processes (default: as ``saddle run``). Prints runs, jobs, wall seconds, CPU seconds of this
process and its workers (a figure that depends less on what else the machine runs), and the
load average before and after (the machine is shared: a loaded machine is slower). The
experiment's check (every trace read and validated, about 2 s) runs before the clock starts;
forked workers start with what it read."""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from sim.experiments.grid import load_experiment, resolve_path
from sim.experiments.runner import default_jobs, execute


def _cpu_s() -> float:
    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                  resource.getrusage(resource.RUSAGE_CHILDREN)))


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", help="results folder to fill (its runs/ is emptied first)")
    parser.add_argument("--jobs", type=int, default=default_jobs(),
                        help="worker processes (default: %(default)s on this machine)")
    args = parser.parse_args()
    experiment, runs = load_experiment(resolve_path("fig12"))
    load_before = _load()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out) if args.out else Path(tmp)
        shutil.rmtree(out / "runs", ignore_errors=True)
        start, cpu = time.perf_counter(), _cpu_s()
        execute(experiment["name"], runs, out, progress=sys.stderr.isatty(), jobs=args.jobs)
        seconds, cpu = time.perf_counter() - start, _cpu_s() - cpu
    print(f"fig12 grid: {len(runs)} runs, jobs {args.jobs}, in {seconds:.1f} s "
          f"({seconds / len(runs):.2f} s per run), {cpu:.1f} CPU s; load average (1, 5, 15 min) before "
          f"{load_before}, after {_load()}; {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
