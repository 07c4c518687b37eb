"""Run an experiment's grid, resumably, and write its results.

Layout of ``results/<name>/``: ``runs/<key>.json`` (one per run, written when it ends),
``results.json`` (``{"experiment": NAME, "runs": [...]}``), ``results.csv``, ``config.yaml``
(the experiment as resolved: every run's parameters, tau and trace included) and the plot.
"""
from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import os
import signal
import traceback
from functools import lru_cache
from pathlib import Path

import yaml

from sim.errors import SaddleError
from sim.experiments.grid import run_key
from sim.paths import ROOT
from sim.systems.run import RunParams, default_trace, load_tau, simulate
from sim.systems.spec import load_system

MAX_DEFAULT_JOBS = 8
MAX_FAILURES_SHOWN = 5
CSV_FIELDS = ("system", "pair", "batch", "draft_length", "sequence_length", "tokens_per_s",
              "tokens_per_joule", "time_s", "energy_j", "acceptance_rate", "pim_op_fraction",
              "utilization.gpu", "utilization.pim", "verification_comm_share",
              "tokens.generated", "tokens.drafted", "tokens.accepted", "tokens.rejected",
              "tokens.discarded", "request_latency_s.p50", "request_latency_s.p99",
              "latency_breakdown.prediction", "latency_breakdown.verification",
              "latency_breakdown.monitoring", "latency_breakdown.decision_making",
              "latency_breakdown.overlap", "latency_breakdown.idle")


@lru_cache(maxsize=None)
def _file_digest(path: str) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    except OSError as exc:      # load_experiment checked it: the file went away since
        raise SaddleError(f"{path}: cannot read the trace ({exc.strerror})") from None


def portable(path: str | Path) -> str:
    """A path as saved results store it: relative to the project when inside it (so a results
    folder, its cache included, moves to another checkout or machine), else absolute. Runs
    are matched by the trace's content digest, never by this path."""
    path = Path(path).resolve()
    try:
        return path.relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


def _saved_params(p: RunParams) -> dict:
    """What a run file stores under ``params`` (and config.yaml under ``resolved_runs``)."""
    return dataclasses.asdict(p) | {"source": None, "trace": portable(p.trace),
                                    "trace_sha256": _file_digest(p.trace)}


def _same_run(saved: dict | None, params: dict) -> bool:
    """A saved run is this run: same parameters and trace content, wherever the trace is."""
    if not isinstance(saved, dict):
        return False
    drop = ("trace",)
    return ({k: v for k, v in saved.items() if k not in drop}
            == {k: v for k, v in params.items() if k not in drop})


def resolved(p: RunParams) -> RunParams:
    """Fill in what the files decide (tau, trace), so a changed config is a new run."""
    spec = load_system(p.system)
    tau = p.tau
    if tau is None and spec.stop == "threshold":
        tau = load_tau(p.pair)
    return dataclasses.replace(p, tau=tau, trace=str(p.trace or default_trace(p.pair, p.sequence_length)))


def default_jobs() -> int:
    """Worker processes of a grid by default: the CPUs this process may use, at most
    ``MAX_DEFAULT_JOBS`` (a grid's runs are independent and single-threaded)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:          # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_DEFAULT_JOBS))


def execute(name: str, runs: list[RunParams], out: Path, *, progress: bool = True,
            timeline: Path | None = None, timeline_run: int = 0, jobs: int = 1) -> list[dict]:
    """Simulate every run of the grid not already in ``out/runs/`` and return the records in
    grid order. ``jobs`` > 1 spreads the runs over that many worker processes (spawned, one
    run at a time each); the records, the run files and everything written from them are the
    same bytes as with ``jobs`` = 1. A failing run does not stop the others: when all are done,
    a ``SaddleError`` names every failed run (the finished ones are saved, so a rerun resumes;
    an error all failed runs share is said once). ``timeline``: write a Perfetto trace of run
    number ``timeline_run`` (an index into ``runs``) there; that run is simulated again even
    when saved."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise SaddleError(f"jobs must be a positive integer, found {jobs!r}")
    runs_dir = out / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    todo = [resolved(p) for p in runs]
    records: list[dict | None] = [None] * len(todo)
    pending = []
    for i, p in enumerate(todo):
        params = _saved_params(p)
        path = runs_dir / f"{run_key(dataclasses.replace(p, trace=params['trace_sha256']))}.json"
        recorded = timeline is not None and i == timeline_run
        if path.is_file() and not recorded:
            try:
                saved = json.loads(path.read_text())
            except (OSError, ValueError):       # a damaged run file: run it again
                saved = {}
            if isinstance(saved, dict) and _same_run(saved.get("params"), params) \
                    and isinstance(saved.get("result"), dict):
                records[i] = saved["result"]
                continue
        pending.append(_Task(i, p, params, str(path), str(timeline) if recorded else None))
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=len(todo), initial=len(todo) - len(pending), desc=name, unit="run",
                   leave=False)
    failures: list[tuple[int, str]] = []

    def done(index: int, record: dict | None, error: str | None) -> None:
        records[index] = record
        if error is not None:
            failures.append((index, error))
        if bar:
            bar.update(1)

    # The timeline needs the run's interval log: that run stays in this process.
    away = [t for t in pending if not t.timeline]
    if jobs == 1 or len(away) < 2:
        away = []
    for task in pending:
        if task.timeline or not away:
            done(*_run_task(task))
    if away:
        # Manager-driven runs take several times longer than the others: they start first,
        # so short runs fill the workers at the end (the order changes no result).
        away.sort(key=lambda t: load_system(t.params.system).verify != "shared_pool")
        import multiprocessing
        ctx = multiprocessing.get_context("spawn")
        # Workers start with Ctrl-C ignored (inherited through exec), so one that is still
        # starting cannot print a KeyboardInterrupt of its own; the parent alone reports it.
        import threading
        main_thread = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main_thread else None
        try:
            pool = ctx.Pool(min(jobs, len(away)), initializer=_worker_init)
        finally:
            if main_thread:
                signal.signal(signal.SIGINT, previous)
        with pool:
            for result in pool.imap_unordered(_run_task, away):
                done(*result)
    if bar:
        bar.close()
    if failures:
        raise SaddleError(_failure_message(name, todo, failures, runs_dir))
    return records


def _failure_message(name: str, todo: list[RunParams], failures: list[tuple[int, str]],
                     runs_dir: Path) -> str:
    failures = sorted(failures)
    finished = len(todo) - len(failures)
    kept = (f"the {finished} finished run{'s are' if finished > 1 else ' is'} saved in "
            f"{runs_dir}; a rerun resumes" if finished else "no run finished")
    head = f"{name}: {len(failures)} of {len(todo)} runs failed ({kept})"
    errors = list(dict.fromkeys(error for _, error in failures))
    if len(errors) == 1 and len(failures) > 1:      # one cause: said once
        return f"{head}, all with: {errors[0]}"
    shown = [f"run {i + 1} ({todo[i].key()}): {error}" for i, error in failures[:MAX_FAILURES_SHOWN]]
    more = len(failures) - len(shown)
    return f"{head}: " + "; ".join(shown) + (f"; and {more} more" if more else "")


@dataclasses.dataclass(frozen=True)
class _Task:
    index: int
    params: RunParams
    record_params: dict        # what the run file stores under "params" (resume compares it)
    path: str
    timeline: str | None


def _worker_init() -> None:
    # Ctrl-C goes to the whole process group: let the parent alone stop the pool.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run_task(task: _Task) -> tuple[int, dict | None, str | None]:
    """Simulate one run and write its file; errors come back as text naming what failed
    (internal errors with their traceback), so one run cannot take the others down."""
    p = task.params
    try:
        metrics, run = simulate(p)
    except SaddleError as exc:
        return task.index, None, str(exc)
    except Exception:
        return task.index, None, "internal error:\n" + traceback.format_exc()
    record = metrics.to_dict() | {"sequence_length": p.sequence_length}
    path = Path(task.path)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"params": task.record_params, "result": record}, sort_keys=True))
    tmp.replace(path)
    if task.timeline:
        from sim.engine.timeline import write_timeline
        write_timeline(Path(task.timeline), run.log, run.n_devices)
    return task.index, record, None


def _flat(record: dict, key: str):
    value = record
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def write_results(out: Path, experiment: dict, runs: list[RunParams], records: list[dict]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    summary = {"experiment": experiment["name"], "runs": records}
    if "published" in experiment:
        from sim.experiments import published
        rows = published.compare(experiment["published"], records)
        summary["published"] = {"source": experiment["published"]["source"], "claims": rows}
        published.write(out, rows)
    (out / "results.json").write_text(json.dumps(summary, indent=1, sort_keys=True))
    with (out / "results.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_FIELDS)
        for r in records:
            w.writerow([_flat(r, k) for k in CSV_FIELDS])
    resolved_cfg = dict(experiment)
    resolved_cfg["resolved_runs"] = [_saved_params(resolved(p)) for p in runs]
    (out / "config.yaml").write_text(yaml.safe_dump(resolved_cfg, sort_keys=False))


def table(records: list[dict]) -> str:
    head = f"{'system':<11} {'pair':<28} {'batch':>5} {'d':>6} {'tok/s':>9} {'tok/J':>7} " \
           f"{'accept':>6} {'PIM ops':>7} {'GPU':>5} {'PIM':>5} {'p50 s':>7} {'p99 s':>7}"
    lines = [head, "-" * len(head)]
    for r in records:
        d = "adapt" if r["draft_length"] is None and r["tokens"]["drafted"] else (r["draft_length"] or "-")
        lines.append(f"{r['system']:<11} {r['pair']:<28} {r['batch']:>5} {str(d):>6} "
                     f"{r['tokens_per_s']:>9.0f} {r['tokens_per_joule']:>7.2f} "
                     f"{r['acceptance_rate']:>6.2f} {r['pim_op_fraction']:>7.2f} "
                     f"{r['utilization']['gpu']:>5.2f} {r['utilization']['pim']:>5.2f} "
                     f"{r['request_latency_s']['p50']:>7.2f} {r['request_latency_s']['p99']:>7.2f}")
    return "\n".join(lines)
