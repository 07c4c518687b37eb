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
import traceback
from functools import cache
from pathlib import Path

import yaml

from common.errors import SaddleError
from common.paths import CONFIGS, ROOT
from sim.experiments.backends import Backend, make
from sim.experiments.grid import params_dict, run_key
from sim.metrics import CSV_FIELDS
from sim.systems.registry import STOP_RULES, reads_tau
from sim.systems.run import RunParams, load_stop_param, load_tau, simulate
from sim.systems.spec import load_system

MAX_DEFAULT_JOBS = 8
MAX_FAILURES_SHOWN = 5


@cache
def _file_digest(path: str) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    except OSError as exc:      # load_experiment checked it: the file went away since
        raise SaddleError(f"{path}: cannot read the trace ({exc.strerror})") from None


def portable(path: str | Path) -> str:
    """A path as saved results store it: relative to the project when inside it (a results
    folder moves to another checkout), else absolute. Runs are matched by the trace's digest."""
    path = Path(path).resolve()
    try:
        return path.relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


# Config folders every run reads (system, hardware, model and Manager timing files): a saved run
# whose files changed since is simulated again. The code is not part of the key (sim/README.md).
RUN_CONFIGS = ("systems", "hardware", "models", "timing")


@cache
def _configs_digest(manager: str | None) -> str:
    from sim.manager.config import DEFAULT_PATH
    files = sorted(f for kind in RUN_CONFIGS for f in (CONFIGS / kind).glob("*.yaml"))
    files.append(Path(manager) if manager else DEFAULT_PATH)
    h = hashlib.sha256()
    for f in files:
        h.update(f"{portable(f)}\0".encode() + f.read_bytes())
    return h.hexdigest()[:16]


def _saved_params(p: RunParams) -> dict:
    """What a run file stores under ``params`` (and config.yaml under ``resolved_runs``)."""
    return params_dict(p) | {"trace": portable(p.trace), "trace_sha256": _file_digest(p.trace),
                             "configs_sha256": _configs_digest(p.manager)}


def resolved(p: RunParams) -> RunParams:
    """Fill in what the files decide (tau, a stop rule's parameter, trace), so a changed config
    is a new run."""
    rule = p.stop_rule()
    tau, param = p.tau, p.stop_param
    if tau is None and reads_tau(rule):
        tau = load_tau(p.pair)
    if param is None and p.stop is not None and STOP_RULES[rule].param_name is not None:
        param = load_stop_param(p.pair, rule)
    return dataclasses.replace(p, tau=tau, stop_param=param, trace=p.trace_path())


def default_jobs() -> int:
    """Worker processes of a grid by default: the CPUs this process may use, at most
    ``MAX_DEFAULT_JOBS``."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:          # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_DEFAULT_JOBS))


def execute(name: str, runs: list[RunParams], out: Path, *, progress: bool = True,
            timeline: Path | None = None, timeline_run: int = 0, jobs: int = 1,
            backend: str = "local", address: str | None = None) -> list[dict]:
    """Simulate every run of the grid not already in ``out/runs/`` and return the records in
    grid order, the same bytes whatever ``jobs``, ``backend`` and ``address``
    (sim/experiments/backends.py). A failing run does not stop the others: when all are done,
    a ``SaddleError`` names every failed run (the finished ones are saved; an error all share
    is said once). ``timeline``: write a Perfetto trace of run number ``timeline_run`` there
    (simulated again even when saved)."""
    runner = make(backend, jobs, address)
    todo, records, pending = plan(runs, out, timeline, timeline_run)
    failures: list[tuple[int, str]] = []

    def done(task: _Task, record: dict | None, error: str | None) -> None:
        records[task.index] = record
        if error is not None:
            failures.append((task.index, error))

    dispatch(name, pending, len(todo), done, runner, progress=progress)
    if failures:
        raise SaddleError(_failure_message(name, todo, failures, out / "runs"))
    return records


def run_file(p: RunParams) -> tuple[dict, str]:
    """What the resolved run's file stores under ``params``, and the file's name."""
    params = _saved_params(p)
    return params, f"{run_key(dataclasses.replace(p, trace=params['trace_sha256']))}.json"


def plan(runs: list[RunParams], out: Path, timeline: Path | None = None,
         timeline_run: int = 0) -> tuple[list[RunParams], list[dict | None], list[_Task]]:
    """``(resolved runs, records, tasks)``: each run resolved (tau, trace), its record when
    ``out/runs/`` holds it (else None), and a task for every run still to simulate."""
    runs_dir = out / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    todo = [resolved(p) for p in runs]
    records: list[dict | None] = [None] * len(todo)
    pending = []
    for i, p in enumerate(todo):
        params, name = run_file(p)
        path = runs_dir / name
        recorded = timeline is not None and i == timeline_run
        if path.is_file() and not recorded:
            try:
                saved = json.loads(path.read_text())
            except (OSError, ValueError):       # a damaged run file: run it again
                saved = {}
            # The same parameters and trace content, wherever the trace is.
            same = isinstance(saved, dict) and isinstance(saved.get("params"), dict) \
                and saved["params"] | {"trace": None} == params | {"trace": None}
            if same and isinstance(saved.get("result"), dict):
                records[i] = saved["result"]
                continue
        pending.append(_Task(i, p, params, str(path), str(timeline) if recorded else None))
    return todo, records, pending


def dispatch(name: str, pending: list[_Task], total: int, done, runner: Backend, *,
             progress: bool = True) -> None:
    """Simulate ``pending`` (``total`` runs in all, the others saved) on ``runner``; each run's
    file is written here as soon as it ends, then ``done(task, record, error)`` is called. A
    progress bar shows runs done and failed and the time left."""
    bar = None
    if progress:
        from tqdm import tqdm
        # No monitor thread: the local backend forks its workers only from a single thread.
        tqdm.monitor_interval = 0
        # Redrawn at every run's end (a run takes far longer than a redraw), failures included.
        bar = tqdm(total=total, initial=total - len(pending), desc=name, unit="run", leave=False,
                   mininterval=0)
    failed = 0

    def finish(task: _Task, record: dict | None, error: str | None) -> None:
        nonlocal failed
        if record is not None:
            write_whole(Path(task.path), json.dumps({"params": task.record_params, "result": record},
                                                    sort_keys=True))
        done(task, record, error)
        if bar:
            failed += error is not None
            if failed:
                bar.set_postfix(failed=failed, refresh=False)
            bar.update(1)

    try:
        # The timeline needs the run's interval log: that run stays in this process.
        away = [t for t in pending if not t.timeline]
        for task in pending:
            if task.timeline:
                finish(task, *_run_task(task))
        # Longest first, so short runs fill the workers at the end: Manager-driven runs take
        # several times longer than the others, and a run's time grows with its batch (the
        # order changes no result).
        away.sort(key=lambda t: (load_system(t.params.system, configs=t.params.configs()).verify
                                 != "shared_pool",
                                 -t.params.batch))
        for task, value, lost in runner.map(_run_task, away):
            finish(task, *(value if lost is None else (None, lost)))
    finally:
        if bar:
            bar.close()


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


def _run_task(task: _Task) -> tuple[dict | None, str | None]:
    """Simulate one run: ``(record, None)``, or ``(None, error)`` naming what failed (internal
    errors with their traceback), so one run cannot take the others down."""
    p = task.params
    try:
        metrics, run = simulate(p)
    except SaddleError as exc:
        return None, str(exc)
    except Exception:
        return None, "internal error:\n" + traceback.format_exc()
    if task.timeline:
        from sim.engine.timeline import write_timeline
        write_timeline(Path(task.timeline), run.log, run.n_devices)
    return metrics.to_dict() | {"sequence_length": p.sequence_length}, None


def write_whole(path: Path, text: str) -> None:
    """``text`` written whole or not at all: a rerun resumes from what is there."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def flat(record: dict, prefix: str = "") -> dict:
    """``record`` with nested mappings as dotted keys."""
    out = {}
    for key, value in record.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def write_results(out: Path, experiment: dict, runs: list[RunParams], records: list[dict]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    summary = {"experiment": experiment["name"], "runs": records}
    if "published" in experiment:
        from sim.experiments import published
        rows = published.compare(experiment["published"], records)
        summary["published"] = {"source": experiment["published"]["source"], "claims": rows}
        published.write(out, rows)
    if "compare" in experiment:
        from sim.experiments import compare
        rows = compare.rows(experiment["compare"], records)
        summary["compare"] = {"spec": experiment["compare"], "rows": rows,
                              "summary": compare.summary(experiment["compare"], rows)}
    (out / "results.json").write_text(json.dumps(summary, indent=1, sort_keys=True))
    with (out / "results.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_FIELDS)
        w.writerows([row.get(k) for k in CSV_FIELDS] for row in map(flat, records))
    resolved_cfg = dict(experiment)
    resolved_cfg["resolved_runs"] = [_saved_params(resolved(p)) for p in runs]
    (out / "config.yaml").write_text(yaml.safe_dump(resolved_cfg, sort_keys=False))


def table(records: list[dict]) -> str:
    head = f"{'system':<16} {'pair':<28} {'batch':>5} {'d':>6} {'tok/s':>9} {'tok/J':>7} " \
           f"{'accept':>6} {'PIM ops':>7} {'GPU':>5} {'PIM':>5} {'p50 s':>7} {'p99 s':>7} {'max s':>7} {'Jain':>5}"
    lines = [head, "-" * len(head)]
    for r in records:
        d = "adapt" if r["draft_length"] is None and r["tokens"]["drafted"] else (r["draft_length"] or "-")
        name = r["system"] + (f" K={r['aging_passes']}" if r.get("aging_passes") else "")
        lines.append(f"{name:<16} {r['pair']:<28} {r['batch']:>5} {str(d):>6} "
                     f"{r['tokens_per_s']:>9.0f} {r['tokens_per_joule']:>7.2f} "
                     f"{r['acceptance_rate']:>6.2f} {r['pim_op_fraction']:>7.2f} "
                     f"{r['utilization']['gpu']:>5.2f} {r['utilization']['pim']:>5.2f} "
                     f"{r['request_latency_s']['p50']:>7.2f} {r['request_latency_s']['p99']:>7.2f} "
                     f"{r['request_latency_s']['max']:>7.2f} {r['request_rate_jain']:>5.3f}")
    return "\n".join(lines)
