"""``saddle sweep FILE``."""
from __future__ import annotations

import json
import sys
from pathlib import Path


def register(subparsers) -> None:
    from common.config import positive_int
    from sim.experiments.cli import add_backend_args
    sweep = subparsers.add_parser(
        "sweep", help="a design-space sweep: a base experiment over axes of any config key "
                      "(configs/sweeps/)")
    sweep.add_argument("file", help="sweep YAML file or name in configs/sweeps/")
    add_backend_args(sweep)
    sweep.add_argument("--jobs", "-j", type=positive_int, metavar="N",
                       help="runs at once: worker processes, or the local Ray cluster's CPUs "
                            "(default: the CPUs, at most 8)")
    sweep.add_argument("--out", metavar="DIR",
                       help="results folder (default: results/sweeps/<name>/ in the current "
                            "directory, or $SADDLE_RESULTS/sweeps/<name>/)")
    sweep.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    sweep.add_argument("--no-plot", action="store_true", help="skip the plots")
    sweep.set_defaults(func=sweep_handler)


def sweep_handler(args) -> int:
    from common.paths import check_output, results_dir
    from common.progress import announce
    from report.sweep_plots import plot_sweep
    from sim.experiments.backends import make
    from sim.experiments.grid import resolve_path
    from sim.experiments.runner import claim_folder, default_jobs
    from sim.sweeps.run import run_sweep, write_outputs
    from sim.sweeps.spec import load_sweep

    runner = make(args.backend, args.jobs or default_jobs(), args.address)
    path = resolve_path(args.file, "sweeps")
    with announce(f"checking {path}: every point as an experiment is checked"):
        sweep = load_sweep(path)
    for warning in sweep.warnings:
        print(f"saddle: warning: {warning}", file=sys.stderr)
    out = Path(args.out) if args.out else results_dir() / "sweeps" / sweep.name
    check_output(out, "--out" if args.out else "results folder", folder=True)
    claim_folder(out, "sweep", sweep.name, str(sweep.source))
    summary, rows = run_sweep(sweep, out, runner, progress=not args.json)
    write_outputs(sweep, out, summary, rows)
    plots = [] if args.no_plot else plot_sweep(out, sweep.name, sweep.plot, rows)
    if sweep.plot is None and not args.no_plot:
        print("no plot: more than three axes with several values; choose x, y and facet in "
              "the sweep's plot:", file=sys.stderr)
    if args.json:
        print(json.dumps(summary.to_dict() | {"out": str(out), "plots": [str(p) for p in plots]},
                         sort_keys=True))
    else:
        print(f"{sweep.name}: {summary.runs} runs at {summary.points} points: "
              f"{summary.succeeded} succeeded, {summary.failed} failed, {summary.reused} reused")
        for r in rows:
            if r["status"] == "failed":
                print(f"  failed: {_where(r)}: {r['error'].splitlines()[0]}")
        print(f"rows: {out}/rows.csv, rows.json" + "".join(f"\nplot: {p}" for p in plots))
    return 1 if summary.failed else 0


def _where(row: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in (row["point"] | {"system": row["run"]["system"]}).items())
