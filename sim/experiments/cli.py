"""``saddle run [FILE]``."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from common.config import positive_int
from common.errors import SaddleError


def register(subparsers) -> None:
    run = subparsers.add_parser("run", help="run an experiment (default: configs/experiments/default.yaml)")
    run.add_argument("file", nargs="?", help="experiment YAML file or name in configs/experiments/")
    run.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    run.add_argument("--timeline", metavar="FILE.json",
                     help="write a Perfetto/Chrome trace of one run (chosen by --timeline-run; "
                          "default: the grid's first run)")
    run.add_argument("--timeline-run", metavar="FIELD=VALUE,...", type=_run_filter,
                     help="the run --timeline records, by system (or label), pair, batch, "
                          "draft_length, sequence_length; e.g. system=saddle,batch=64; it must "
                          "match exactly one run")
    run.add_argument("--trace", metavar="FILE", help="replay this trace file instead of the pair's default")
    run.add_argument("--requests", type=_requests, metavar="N|all",
                     help="replace the experiment's workload.requests (all: the whole split)")
    run.add_argument("--out", metavar="DIR",
                     help="results folder, relative to the current directory (default: "
                          "results/<name>/ in the current directory, or $SADDLE_RESULTS/<name>/)")
    run.add_argument("--no-plot", action="store_true", help="skip the plot")
    run.add_argument("--readme", action="store_true",
                     help="write the experiment's compare table into its block of sim/README.md "
                          "(the shipped workload only)")
    run.add_argument("--jobs", "-j", type=positive_int, metavar="N",
                     help="runs simulated at once, in worker processes (default: the CPUs, at most 8)")
    add_backend_args(run)
    run.set_defaults(func=run_handler)


def add_backend_args(parser) -> None:
    """``--backend`` and ``--address`` (``saddle run`` and ``saddle sweep``)."""
    from sim.experiments.backends import BACKENDS
    parser.add_argument("--backend", choices=sorted(BACKENDS), default="local",
                        help="where runs are simulated: local worker processes (default) or Ray "
                             "tasks (sim/experiments/backends.py)")
    parser.add_argument("--address", metavar="ADDR",
                        help="Ray cluster to join (ray://HOST:10001 or HOST:6379; default: start "
                             "a local one of --jobs CPUs and stop it at the end)")


def _requests(text: str) -> int | str:
    if text == "all":
        return text
    if text.isdigit() and int(text) > 0:
        return int(text)
    raise argparse.ArgumentTypeError(f"expected a positive integer or 'all', found {text!r}")


def _run_filter(text: str) -> dict:
    """``system=saddle,batch=64`` -> {"system": "saddle", "batch": 64}."""
    from sim.experiments.grid import RUN_FIELDS
    rule = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise argparse.ArgumentTypeError(f"expected FIELD=VALUE[,FIELD=VALUE...], found {text!r}")
        if key not in RUN_FIELDS:
            raise argparse.ArgumentTypeError(f"unknown field {key!r}; expected one of {', '.join(RUN_FIELDS)}")
        rule[key] = int(value) if value.isdigit() else (None if value in ("none", "null") else value)
    return rule


def run_handler(args) -> int:
    from common.paths import check_output, results_dir
    from common.progress import announce
    from report import readme
    from sim.experiments.grid import load_experiment, resolve_path
    from sim.experiments.runner import claim_folder, default_jobs, execute, table, write_results

    path = resolve_path(args.file)
    if args.timeline_run and not args.timeline:
        raise SaddleError("--timeline-run chooses the run of --timeline FILE.json; give --timeline too")
    with announce(f"checking {path}: keys, names, values, every trace a run reads, memory"):
        experiment, runs = load_experiment(path, trace=args.trace, requests=args.requests)
    for warning in experiment.get("warnings", []):
        print(f"saddle: warning: {warning}", file=sys.stderr)
    if args.readme:
        readme.check_compare_run(experiment, overrides=bool(args.requests or args.trace or args.json))
    out = Path(args.out) if args.out else results_dir() / experiment["name"]
    check_output(out, "--out" if args.out else "results folder", folder=True)
    claim_folder(out, "experiment", experiment["name"], str(path))
    timeline = Path(args.timeline) if args.timeline else None
    chosen = timeline_run(runs, args.timeline_run, str(path)) if timeline else 0
    if timeline is not None:
        check_output(timeline, "--timeline", folder=False)
    records = execute(experiment["name"], runs, out, progress=not args.json,
                      timeline=timeline, timeline_run=chosen, jobs=args.jobs or default_jobs(),
                      backend=args.backend, address=args.address)
    write_results(out, experiment, runs, records)
    notes = []
    if timeline is not None:
        p = runs[chosen]
        notes.append(f"timeline: {timeline} (run {chosen + 1} of {len(runs)}: {p.label or p.system}, "
                     f"{p.pair}, batch {p.batch}"
                     + (f", d={p.draft_length}" if p.draft_length is not None else "")
                     + (f", L={p.sequence_length}" if p.sequence_length is not None else "") + ")")
    from report.plots import plot_all
    plots = [] if args.no_plot else plot_all(out, experiment, records)
    if args.json:
        print(json.dumps({"experiment": experiment["name"], "runs": records}, sort_keys=True))
        for note in notes:          # stdout is the JSON object alone
            print(note, file=sys.stderr)
    else:
        print(table(records))
        if "published" in experiment:
            from report import published
            claims = experiment["published"]
            print("\n" + published.table(claims, published.compare(claims, records)))
        if "compare" in experiment:
            from report import compare
            spec = experiment["compare"]
            print("\n" + compare.text(spec, compare.rows(spec, records)))
        if args.readme:
            readme.write_compare_block(experiment, records)
            notes.append(f"rewrote the {experiment['name']} table of {readme.README}")
        print(f"\nresults: {out}/results.json, results.csv, config.yaml"
              + "".join(f"\nplot: {p}" for p in plots) + "".join(f"\n{n}" for n in notes))
    return 0


def timeline_run(runs: list, rule: dict | None, source: str) -> int:
    """Index of the run ``--timeline-run`` names (the first run without a rule)."""
    from sim.experiments.grid import matches
    if not rule:
        return 0
    found = [i for i, p in enumerate(runs) if matches(p, rule)]
    if len(found) == 1:
        return found[0]
    shown = "; ".join(_describe(p) for p in (runs if not found else [runs[i] for i in found])[:8])
    what = "no run" if not found else f"{len(found)} runs"
    more = "" if len(found or runs) <= 8 else f"; and {len(found or runs) - 8} more"
    given = ",".join(f"{k}={v}" for k, v in rule.items())
    raise SaddleError(f"--timeline-run {given}: {what} of {source} match"
                      f"{'es' if not found else ''}; {'runs' if not found else 'matching'}: "
                      f"{shown}{more} (add fields to name exactly one)")


def _describe(p) -> str:
    fields = dict(system=p.label or p.system, pair=p.pair, batch=p.batch,
                  draft_length=p.draft_length, sequence_length=p.sequence_length)
    return ",".join(f"{k}={v}" for k, v in fields.items() if v is not None)
