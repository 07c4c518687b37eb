"""``saddle run [FILE]`` and ``saddle tune-tau --pair PAIR``."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def register(subparsers) -> None:
    run = subparsers.add_parser("run", help="run an experiment (default: configs/experiments/default.yaml)")
    run.add_argument("file", nargs="?", help="experiment YAML file or name in configs/experiments/")
    run.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    run.add_argument("--timeline", metavar="FILE.json", help="write a Perfetto/Chrome trace of the first run")
    run.add_argument("--trace", metavar="FILE", help="replay this trace file instead of the pair's default")
    run.add_argument("--requests", type=_requests, metavar="N|all",
                     help="replace the experiment's workload.requests (all: the whole split)")
    run.add_argument("--out", metavar="DIR", help="results folder (default: results/<name>/)")
    run.add_argument("--no-plot", action="store_true", help="skip the plot")
    run.add_argument("--jobs", "-j", type=_jobs, metavar="N",
                     help="runs simulated at once, in worker processes (default: the CPUs, at most 8)")
    run.set_defaults(func=run_handler)

    tune = subparsers.add_parser("tune-tau", help="choose SADDLE's tau on the validation split and store it")
    tune.add_argument("--pair", required=True)
    tune.add_argument("--config", default="tune-tau", help="tuning settings in configs/experiments/")
    tune.add_argument("--dry-run", action="store_true", help="print the choice, do not write configs/tau/")
    tune.add_argument("--from-log", metavar="FILE",
                      help="take the taus already evaluated from an earlier run's output")
    tune.set_defaults(func=tune_handler)

    cal = subparsers.add_parser("calibrate", help="fit a pair's synthetic acceptance to the fig3 shape")
    cal.add_argument("--pair", required=True)
    cal.add_argument("--write", action="store_true",
                     help="store the fit in configs/traces/PAIR.yaml and regenerate the shipped trace")
    cal.add_argument("--from-log", metavar="FILE",
                     help="take candidates already evaluated from an earlier run's output")
    cal.set_defaults(func=calibrate_handler)


def _requests(text: str) -> int | str:
    if text == "all":
        return text
    if text.isdigit() and int(text) > 0:
        return int(text)
    raise argparse.ArgumentTypeError(f"expected a positive integer or 'all', found {text!r}")


def _jobs(text: str) -> int:
    if text.isdigit() and int(text) > 0:
        return int(text)
    raise argparse.ArgumentTypeError(f"expected a positive integer, found {text!r}")


def run_handler(args) -> int:
    from sim.experiments.grid import load_experiment, resolve_path
    from sim.experiments.runner import default_jobs, execute, table, write_results
    from sim.paths import results_dir

    path = resolve_path(args.file)
    experiment, runs = load_experiment(path, trace=args.trace, requests=args.requests)
    out = Path(args.out) if args.out else results_dir() / experiment["name"]
    records = execute(experiment["name"], runs, out, progress=not args.json and sys.stderr.isatty(),
                      timeline=Path(args.timeline) if args.timeline else None,
                      jobs=args.jobs or default_jobs())
    write_results(out, experiment, runs, records)
    plots = []
    if not args.no_plot:
        from sim.experiments.plots import plot_all
        plots = plot_all(out, experiment, records)
    if args.json:
        print(json.dumps({"experiment": experiment["name"], "runs": records}, sort_keys=True))
    else:
        print(table(records))
        if "published" in experiment:
            from sim.experiments import published
            print()
            print(published.table(experiment["published"],
                                  published.compare(experiment["published"], records)))
        print(f"\nresults: {out}/results.json, results.csv, config.yaml"
              + "".join(f"\nplot: {p}" for p in plots))
    return 0


def tune_handler(args) -> int:
    from sim.experiments.tune import tune_tau
    tune_tau(args.pair, args.config, write=not args.dry_run, from_log=args.from_log)
    return 0


def calibrate_handler(args) -> int:
    from sim.experiments.calibrate import calibrate
    calibrate(args.pair, write=args.write, from_log=args.from_log)
    return 0
