"""Points per second of a small sweep on both backends, and Ray's overhead per point.

The sweep: PIM-AD on the OPT-66B pair, 8 requests of the shipped trace, batch 2 / 4 x four
NVLink step latencies x two PIM MAC spacings = 16 points of a fraction of a second each, so
what is measured is mostly the backends' own cost. Each backend runs it into an empty folder
(nothing reused) with ``--jobs`` workers: the local backend's worker processes (started for the
sweep: their start is counted), then a local Ray cluster of as many CPUs, started before the
clock starts (its start-up is printed apart; its workers may be up already) and stopped after.
The overhead of Ray over local per point is measured apart, on tasks that do nothing
(``NOOPS`` of them through each backend's ``map``, the marginal cost of one): what each point
costs a backend beyond its simulation. Also prints the load average before and after (the
machine is shared: a loaded machine is slower)."""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from sim.experiments.backends import make
from sim.experiments.runner import default_jobs
from sim.sweeps.run import run_sweep
from sim.sweeps.spec import load_sweep

BASE = """
name: bench-base
pairs: [opt-66b+opt-1.3b]
batches: [2]
systems: [{system: pim-ad}]
workload: {split: test, requests: 8, seed: 0}
"""
SWEEP = """
name: bench-sweep
experiment: {base}
grid:
  batch: [2, 4]
  hardware.links.nvlink.step_latency_ns: [700, 2000, 6060, 12000]
  hardware.hbm3_pim.pim.mac_spacing: [4, 8]
"""


NOOPS = 200


def noop(i: int) -> int:
    return i


def _per_task(backend, jobs: int) -> float:
    """Marginal seconds per do-nothing task through the backend: (time of NOOPS tasks - time of
    2 x jobs tasks) / the difference, so what a call costs once (the local pool's start) is
    left out."""
    runner = make(backend, jobs)

    def timed(n: int) -> float:
        start = time.perf_counter()
        done = list(runner.map(noop, list(range(n))))
        assert sorted(v for _, v, _ in done) == list(range(n))
        return time.perf_counter() - start
    few = 2 * jobs
    timed(few)                                  # Ray starts its workers on first use
    return (timed(NOOPS) - timed(few)) / (NOOPS - few)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _time(sweep, out: Path, backend: str, jobs: int) -> tuple[float, list[dict]]:
    start = time.perf_counter()
    summary, rows = run_sweep(sweep, out, make(backend, jobs), progress=False)
    wall = time.perf_counter() - start
    assert summary.succeeded == summary.runs, summary
    return wall, rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=default_jobs(),
                        help="workers of each backend (default: %(default)s on this machine)")
    args = parser.parse_args()
    load_before = _load()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "base.yaml").write_text(BASE)
        (tmp / "sweep.yaml").write_text(SWEEP.format(base=tmp / "base.yaml"))
        sweep = load_sweep(tmp / "sweep.yaml")
        n = len(sweep.runs)
        local, local_rows = _time(sweep, tmp / "local", "local", args.jobs)

        import ray
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        start = time.perf_counter()
        ray.init(num_cpus=args.jobs, include_dashboard=False, log_to_driver=False,
                 logging_level="ERROR")
        startup = time.perf_counter() - start
        try:
            on_ray, ray_rows = _time(sweep, tmp / "ray", "ray", args.jobs)
            ray_task = _per_task("ray", args.jobs)
        finally:
            ray.shutdown()
        local_task = _per_task("local", args.jobs)
    assert ray_rows == local_rows, "the backends' rows differ"
    print(f"sweep: {n} points (PIM-AD, 8 requests each), jobs {args.jobs}")
    print(f"local: {local:6.2f} s wall, {n / local:6.2f} points/s")
    print(f"ray:   {on_ray:6.2f} s wall, {n / on_ray:6.2f} points/s "
          f"(local cluster start-up {startup:.1f} s, not counted)")
    print("rows identical on both backends")
    print(f"per do-nothing task (marginal, {NOOPS}): local {local_task * 1000:.2f} ms, "
          f"ray {ray_task * 1000:.2f} ms; "
          f"Ray over local: {(ray_task - local_task) * 1000:+.2f} ms per point")
    print(f"load average before: {load_before}; after: {_load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
