"""Wall time of the whole fig12 grid (3 pairs x 4 batch sizes x 7 systems), every run
simulated (nothing resumed): into a temporary folder, or into ``--out DIR`` after emptying its
``runs/`` (then ``saddle run fig12 --out DIR`` only re-plots). Runs in ``--jobs N`` worker
processes (default: as ``saddle run``). Prints runs, jobs, wall seconds, CPU seconds of this
process and its workers (a figure that depends less on what else the machine runs) and how
many of them the kernel took (on a virtual machine, faulting in fresh memory; it varies with
the host), and the load average before and after (the machine is shared: a loaded machine is
slower). The experiment's check (every trace read and validated, about 2 s) runs before the
clock starts; forked workers start with what it read.

Then one SADDLE run per batch of ``--single`` (default 64 and 128, OPT-66B) in this process,
twice (cold price caches, then warm): CPU microseconds per generated token and simulated seconds
per CPU second, the figures that say how far the per-token path is from the interpreter's floor
(``--single`` with no batch skips).

All of it twice, each in a process of its own: with sim/'s compiled modules (``make compiled``;
left out, saying so, when there is no usable build) and in pure Python (``SADDLE_PURE_PYTHON=1``);
``--mode compiled|pure`` runs one of them. ``--readme`` (both modes, the default batches) then
writes the table of sim/README.md's "Speed" from what the two printed (``common/marked.py``):
the figures are this machine's at this load, so no test compares them; the command is how the
table changes."""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import compiled
from common.marked import write_marked
from common.paths import ROOT
from sim.experiments.grid import load_experiment, resolve_path
from sim.experiments.runner import default_jobs, execute


def _cpu_s() -> tuple[float, float]:
    """CPU seconds of this process and its workers: (all, of them in the kernel)."""
    both = (resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN))
    return sum(r.ru_utime + r.ru_stime for r in both), sum(r.ru_stime for r in both)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", help="results folder to fill (its runs/ is emptied first)")
    parser.add_argument("--jobs", type=int, default=default_jobs(),
                        help="worker processes (default: %(default)s on this machine)")
    parser.add_argument("--single", type=int, nargs="*", default=[64, 128], metavar="BATCH",
                        help="batches of the single SADDLE runs (default: %(default)s)")
    parser.add_argument("--mode", choices=["compiled", "pure"],
                        help="only this mode, in this process (default: both, one process each)")
    parser.add_argument("--readme", action="store_true",
                        help="both modes, then write sim/README.md's speed table")
    parser.add_argument("--json", type=Path, help=argparse.SUPPRESS)   # a mode's figures, for --readme
    args = parser.parse_args()
    if args.readme and (args.mode or args.single != [64, 128]):
        parser.error("--readme runs both modes at the default --single batches")
    if args.mode is None:
        return both_modes(args.readme)
    if (args.mode == "compiled") != compiled.active():
        raise SystemExit(f"--mode {args.mode}: this process runs "
                         f"{'compiled' if compiled.active() else 'pure Python'} "
                         f"(SADDLE_PURE_PYTHON, make compiled)")
    print(f"== {args.mode}", flush=True)
    experiment, runs = load_experiment(resolve_path("fig12"))
    load_before = _load()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out) if args.out else Path(tmp)
        shutil.rmtree(out / "runs", ignore_errors=True)
        start, (cpu, kernel) = time.perf_counter(), _cpu_s()
        execute(experiment["name"], runs, out, progress=sys.stderr.isatty(), jobs=args.jobs)
        seconds, (cpu_end, kernel_end) = time.perf_counter() - start, _cpu_s()
        cpu, kernel = cpu_end - cpu, kernel_end - kernel
    load_after = _load()
    print(f"fig12 grid: {len(runs)} runs, jobs {args.jobs}, in {seconds:.1f} s "
          f"({seconds / len(runs):.2f} s per run), {cpu:.1f} CPU s ({kernel:.1f} in the kernel); "
          f"load average (1, 5, 15 min) before "
          f"{load_before}, after {load_after}; {os.cpu_count()} CPUs")
    figures = {"wall_s": seconds, "cpu_s": cpu, "kernel_s": kernel, "jobs": args.jobs, "runs": len(runs),
               "load": [load_before.split()[0], load_after.split()[0]],
               "single": {batch: single(runs, batch) for batch in args.single}}
    if args.json:
        args.json.write_text(json.dumps(figures))
    return 0


def both_modes(readme: bool) -> int:
    """This script again with ``--mode compiled`` (if there is a usable build) and ``--mode
    pure``, one process each, the same other arguments; with ``readme``, then the table."""
    argv = [sys.executable, __file__, *[a for a in sys.argv[1:] if a != "--readme"]]
    env = {k: v for k, v in os.environ.items() if k != compiled.ENV}
    if not compiled.active():
        if readme:
            raise SystemExit(f"--readme needs both modes: no usable compiled build "
                             f"({compiled.stale_reason() or 'make compiled'})")
        print(f"== compiled: left out, no usable build "
              f"({compiled.stale_reason() or 'make compiled'})", flush=True)
    figures = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode, pure in (("compiled", False), ("pure", True)):
            if mode == "compiled" and not compiled.active():
                continue
            out = Path(tmp) / f"{mode}.json"
            subprocess.run([*argv, "--mode", mode, "--json", str(out)],
                           env=env | ({compiled.ENV: "1"} if pure else {}), check=True)
            figures[mode] = json.loads(out.read_text())
    if readme:
        write_marked(README, COMMAND, {"speed": speed_table(figures)})
        print(f"wrote the speed table of {README.relative_to(ROOT)}")
    return 0


README = ROOT / "sim" / "README.md"
COMMAND = "python benchmarks/bench_fig12.py --readme"


def speed_table(figures: dict) -> str:
    """sim/README.md's speed table from both modes' figures (``--json``)."""
    def run(f: dict, batch: str) -> str:
        cold, warm = f["single"][batch]["cold"], f["single"][batch]["warm"]
        return (f"{cold['us_per_token']:.1f} / {warm['us_per_token']:.1f} us, "
                f"{cold['sim_s_per_cpu_s']:.1f} / {warm['sim_s_per_cpu_s']:.1f} s")
    lines = [f"| mode (load) | fig12 grid, {figures['pure']['runs']} runs, {figures['pure']['jobs']} jobs: wall, CPU (kernel) "
             "| SADDLE OPT-66B b64: CPU per token, simulated per CPU s | b128 |", "|---|---:|---:|---:|"]
    for mode, name in (("compiled", "compiled"), ("pure", "pure Python")):
        f = figures[mode]
        lines.append(f"| {name} ({f['load'][0]}-{f['load'][1]}) | {f['wall_s']:.1f} s, {f['cpu_s']:.1f} s ({f['kernel_s']:.1f} s) | "
                     f"{run(f, '64')} | {run(f, '128')} |")
    return "\n".join(lines) + "\n"


def single(runs: list, batch: int, pair: str = "opt-66b+opt-1.3b") -> dict:
    """One fig12 SADDLE run, timed in this process (CPU time, so other load inflates it less),
    twice: first on cold price caches (as a lone run), then again on the caches as the first
    left them (as most runs of a sweep, whose points share step prices; each table keeps at
    most 2^14 entries, so the second run still prices the steps its predecessor forgot)."""
    from sim.systems.run import simulate
    p = next((r for r in runs if r.system == "saddle" and r.pair == pair and r.batch == batch), None)
    if p is None:
        raise SystemExit(f"--single: fig12 has no SADDLE run of {pair} at batch {batch}")
    out = {}
    for caches in ("cold", "warm"):
        start = time.process_time()
        record = simulate(p)[0]
        cpu = time.process_time() - start
        out[caches] = {"us_per_token": cpu / record.tokens.generated * 1e6, "sim_s_per_cpu_s": record.time_s / cpu}
        print(f"SADDLE {pair} batch {batch}, {caches} price caches: {cpu:.2f} CPU s, "
              f"{out[caches]['us_per_token']:.1f} us per generated token, "
              f"{out[caches]['sim_s_per_cpu_s']:.1f} simulated s per CPU s")
    return out


if __name__ == "__main__":
    sys.exit(main())
