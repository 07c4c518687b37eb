"""Is a change faster? One fig12 run timed in this checkout (A) and in another (B, ``OTHER``: a
git worktree or clone, its compiled build current) side by side:

    .venv/bin/python benchmarks/bench_ab.py OTHER [--run SYSTEM:PAIR:BATCH] [--rounds 3] [--reps 3]

Each round starts both at once, one process per checkout, each on a core of its own (the two
swap cores every round), and each simulates the run ``--reps`` times in a row (CPU seconds of
each; the first also prices on cold caches). On this project's virtual machine one process alone
varied 2.3-3.6 CPU s on the same SADDLE run, while two at once stayed within 2.3-2.6: what slows
one slows both. Prints each round, then A's and B's best and median of all repetitions but
each round's first, B / A, and whether the two checkouts' records are identical (a refactor
that should not move a result: they must be). Both run in this interpreter; with fewer than two
CPUs the two take turns (and the figures are only as good as a lone run's)."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from common.paths import ROOT

CHILD = """
import hashlib, json, sys, time
from common import compiled
from sim.experiments.grid import load_experiment, resolve_path
from sim.systems.run import simulate
system, pair, batch, reps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
_, runs = load_experiment(resolve_path("fig12"))
chosen = [p for p in runs if p.system == system and p.pair.startswith(pair) and p.batch == batch]
if not chosen:
    sys.exit(f"fig12 has no run {system}:{pair}:{batch}")
seconds = []
for _ in range(reps):
    start = time.process_time()
    record = simulate(chosen[0])[0]
    seconds.append(time.process_time() - start)
digest = hashlib.sha256(json.dumps(record.to_dict(), sort_keys=True).encode()).hexdigest()[:16]
print(json.dumps({"seconds": seconds, "digest": digest, "compiled": compiled.active()}))
"""


def launch(checkout: Path, cpu: int | None, args: argparse.Namespace) -> subprocess.Popen:
    system, pair, batch = args.run.split(":")
    env = os.environ | {"PYTHONPATH": str(checkout)}
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, system, pair, batch, str(args.reps)], cwd=checkout, env=env,
        stdout=subprocess.PIPE, text=True,
        preexec_fn=None if cpu is None else (lambda: os.sched_setaffinity(0, {cpu})))


def collect(process: subprocess.Popen, checkout: Path) -> dict:
    out, _ = process.communicate()
    if process.returncode:
        raise SystemExit(f"{checkout}: the run failed (exit {process.returncode}; its error is above)")
    return json.loads(out.splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("other", type=Path, help="the other checkout (B)")
    parser.add_argument("--run", default="saddle:opt-66b:64", help="SYSTEM:PAIR:BATCH of fig12 (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default: %(default)s)")
    parser.add_argument("--reps", type=int, default=3, help="runs per process, at least 2 (default: %(default)s)")
    args = parser.parse_args()
    other = args.other.resolve()
    if not (other / "sim" / "systems" / "run.py").is_file():
        parser.error(f"{other} is not a checkout of this project (no sim/systems/run.py)")
    if args.run.count(":") != 2 or args.reps < 2 or args.rounds < 1:
        parser.error("--run is SYSTEM:PAIR:BATCH, --reps at least 2, --rounds at least 1")
    cpus = sorted(os.sched_getaffinity(0))
    checkouts = {"A": ROOT, "B": other}
    times: dict[str, list[float]] = {"A": [], "B": []}
    digests, modes = {}, {}
    print(f"A {ROOT}\nB {other}\n{args.run}, {args.rounds} rounds of {args.reps} runs each")
    for r in range(args.rounds):
        order = ("A", "B") if r % 2 == 0 else ("B", "A")
        if len(cpus) >= 2:
            running = {name: launch(checkouts[name], cpu, args) for name, cpu in zip(order, cpus)}
            got = {name: collect(p, checkouts[name]) for name, p in running.items()}
        else:
            got = {name: collect(launch(checkouts[name], None, args), checkouts[name]) for name in order}
        for name in ("A", "B"):
            times[name] += got[name]["seconds"][1:]
            digests.setdefault(name, set()).add(got[name]["digest"])
            modes[name] = "compiled" if got[name]["compiled"] else "pure Python"
        print(f"round {r + 1}: " + " | ".join(
            f"{name} {' '.join(f'{s:.3f}' for s in got[name]['seconds'])} s" for name in ("A", "B")))
    for name in ("A", "B"):
        print(f"{name} ({modes[name]}): best {min(times[name]):.3f} s, median {statistics.median(times[name]):.3f} s")
    if modes["A"] != modes["B"]:
        print(f"note: A ran {modes['A']}, B {modes['B']} (`make compiled` in each, or SADDLE_PURE_PYTHON=1 for both)")
    ratio = statistics.median(times["B"]) / statistics.median(times["A"])
    same = len(digests["A"] | digests["B"]) == 1
    print(f"B / A (medians): {ratio:.3f}; records {'identical' if same else 'DIFFER'} "
          f"({', '.join(sorted(digests['A'] | digests['B']))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
