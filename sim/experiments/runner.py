"""Run an experiment's grid, resumably, and write its results.

Layout of ``results/<name>/``: ``runs/<key>.json`` (one per run, written when it ends),
``results.json`` (``{"experiment": NAME, "runs": [...]}``), ``results.csv``, ``config.yaml``
(the experiment as resolved: every run's parameters, tau and trace included) and the plot.
"""
from __future__ import annotations

import csv
import dataclasses
import fcntl
import hashlib
import io
import json
import os
import sys
import traceback
from collections.abc import Iterator
from contextlib import nullcontext
from functools import cache
from pathlib import Path

import yaml

from common.errors import SaddleError
from common.paths import CONFIGS, ROOT, write_whole
from common.progress import Progress, announce
from sim.experiments.backends import Backend, make
from sim.experiments.grid import params_dict, run_key
from sim.metrics import CSV_FIELDS, RunRecord
from sim.systems.registry import STOP_RULES, reads_tau
from sim.systems.resolve import load_stop_param, load_tau
from sim.systems.run import RunParams, simulate
from sim.systems.spec import load_system

MAX_DEFAULT_JOBS = 8
# The fields every record has (those without a default): a saved run lacking one is stale.
RECORD_FIELDS = frozenset(f.name for f in dataclasses.fields(RunRecord)
                          if f.default is dataclasses.MISSING)
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
    with announce(f"{name}: resolving {len(runs)} runs, looking for saved ones in {out / 'runs'}"):
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
        records[i] = None if recorded else saved_record(path, params)
        if records[i] is None:
            pending.append(_Task(i, p, params, str(path), str(timeline) if recorded else None))
    return todo, records, pending


def saved_record(path: Path, params: dict) -> dict | None:
    """The record ``path`` holds for ``params`` (the same parameters and trace content,
    wherever the trace is), or None (missing, damaged, another run's, or written before a
    field was added to RunRecord: simulated again)."""
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError):       # missing, or damaged: run it again
        return None
    same = isinstance(saved, dict) and isinstance(saved.get("params"), dict) \
        and saved["params"] | {"trace": None} == params | {"trace": None}
    result = saved.get("result") if same else None
    return result if isinstance(result, dict) and RECORD_FIELDS <= result.keys() else None


class RunLocks:
    """One POSIX lock per run file (``out/.locks/<run>.lock``): the process holding it
    simulates the run, another process sharing the results folder waits for its file.
    ``lockf`` locks belong to this process (forked workers do not inherit them) and go with
    it when it ends, however it ends."""

    def __init__(self, out: Path) -> None:
        self.dir = out / ".locks"
        self.held: dict[str, int] = {}

    def take(self, run_path: str, wait: bool) -> bool:
        self.dir.mkdir(exist_ok=True)
        fd = os.open(self.dir / (Path(run_path).stem + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except OSError:             # held by another process
            os.close(fd)
            return False
        self.held[run_path] = fd
        return True

    def release(self, run_path: str) -> None:
        fd = self.held.pop(run_path, None)
        if fd is not None:
            os.close(fd)

    def release_all(self) -> None:
        for path in list(self.held):
            self.release(path)


def dispatch(name: str, pending: list[_Task], total: int, done, runner: Backend, *,
             progress: bool = True) -> None:
    """Simulate ``pending`` (``total`` runs in all, the others saved) on ``runner``; each run's
    file is written here as soon as it ends, then ``done(task, record, error)`` is called. A
    run another process sharing the folder simulates is waited for and reused (``RunLocks``).
    ``progress``: a bar on a terminal, else a line every few seconds, then a summary line
    (common/progress.py)."""
    report = Progress(name, total, total - len(pending), bar=progress and sys.stderr.isatty())
    locks = RunLocks(Path(pending[0].path).parent.parent) if pending else None

    def finish(task: _Task, record: dict | None, error: str | None) -> None:
        try:
            if record is not None:
                write_whole(Path(task.path), json.dumps(
                    {"params": task.record_params, "result": record}, sort_keys=True))
        finally:
            if locks:
                locks.release(task.path)
        done(task, record, error)
        report.ended(error is not None)

    def reused(task: _Task, record: dict) -> None:
        done(task, record, None)
        report.ended(False, shared=True)

    try:
        with report.running() if progress else nullcontext():
            _run_all(pending, runner, locks, finish, reused)
    finally:
        if locks:
            locks.release_all()
    if progress:
        print(f"saddle: {report.summary()}", file=sys.stderr, flush=True)


def _run_all(pending: list[_Task], runner: Backend, locks: RunLocks | None, finish, reused) -> None:
    """Simulate every task this process can claim, each when a worker is free, longest first;
    then wait for each run another process holds, and reuse its file (or simulate it, when that
    process stopped without writing it)."""
    # The timeline needs the run's interval log: that run stays in this process.
    for task in pending:
        if task.timeline:
            finish(task, *_run_task(task))
    # Longest first, so short runs fill the workers at the end: Manager-driven runs take
    # several times longer than the others, and a run's time grows with its batch (the
    # order changes no result).
    todo = sorted((t for t in pending if not t.timeline),
                  key=lambda t: (load_system(t.params.system, configs=t.params.configs()).verify
                                 != "shared_pool", -t.params.batch))
    while todo:
        assert locks is not None
        theirs: list[_Task] = []
        for task, value, lost in runner.map(_run_task, _claimed(todo, locks, theirs, reused)):
            finish(task, *(value if lost is None else (None, lost)))
        if theirs:          # holding nothing, wait until the first is no longer worked on
            locks.take(theirs[0].path, wait=True)
            locks.release(theirs[0].path)
        todo = theirs


def _claimed(tasks: list[_Task], locks: RunLocks, theirs: list[_Task], reused) -> Iterator[_Task]:
    """The tasks this process takes, one at a time as the backend asks: its lock taken and its
    file still missing. A file written meanwhile is reused (``reused(task, record)``); a task
    another process holds goes to ``theirs``."""
    for task in tasks:
        if not locks.take(task.path, wait=False):
            theirs.append(task)
            continue
        record = saved_record(Path(task.path), task.record_params)
        if record is None:
            yield task
        else:
            locks.release(task.path)
            reused(task, record)


def claim_folder(out: Path, kind: str, name: str, source: str) -> None:
    """One results folder holds one experiment (or one sweep): the first to write ``out``
    marks it (``out/.experiment``); another experiment into it is a ``SaddleError`` naming
    both (its runs would mix in and its summary files replace the first's)."""
    out.mkdir(parents=True, exist_ok=True)
    locks = RunLocks(out)
    locks.take("folder", wait=True)
    try:
        marker = out / ".experiment"
        owner = _owner(marker, out)
        if owner is None:
            write_whole(marker, json.dumps({"kind": kind, "name": name, "source": source}) + "\n")
        elif (owner.get("kind"), owner.get("name")) != (kind, name):
            raise SaddleError(
                f"{out}: holds the results of {owner.get('kind')} {owner.get('name')!r}"
                + (f" ({owner['source']})" if owner.get("source") else "")
                + f"; {kind} {name!r} ({source}) would mix its runs in and replace its summary "
                "files: give another --out")
    finally:
        locks.release_all()


def _owner(marker: Path, out: Path) -> dict | None:
    """Who ``out`` belongs to: its marker, else its summary files (a folder written before the
    marker existed), else None."""
    for path, kind in ((marker, None), (out / "results.json", "experiment"),
                       (out / "rows.json", "sweep")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            if kind is None:
                return data
            if isinstance(data.get(kind), str):
                return {"kind": kind, "name": data[kind]}
    return None


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
        from report.timeline import write_timeline
        write_timeline(Path(task.timeline), run.log, run.n_devices)
    return metrics.to_dict() | {"sequence_length": p.sequence_length}, None


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
    if experiment.get("warnings"):      # memory_check: warn (sim/systems/memory.py)
        summary["warnings"] = experiment["warnings"]
    if "published" in experiment:
        from report import published
        rows = published.compare(experiment["published"], records)
        summary["published"] = {"source": experiment["published"]["source"], "claims": rows}
        published.write(out, rows)
    if "compare" in experiment:
        from report import compare
        rows = compare.rows(experiment["compare"], records)
        summary["compare"] = {"spec": experiment["compare"], "rows": rows,
                              "summary": compare.summary(experiment["compare"], rows)}
    write_whole(out / "results.json", json.dumps(summary, indent=1, sort_keys=True))
    write_whole(out / "results.csv", csv_text(CSV_FIELDS, [[row.get(k) for k in CSV_FIELDS]
                                                           for row in map(flat, records)]))
    resolved_runs = [_saved_params(resolved(p)) for p in runs]
    write_whole(out / "config.yaml", yaml.safe_dump(dict(experiment, resolved_runs=resolved_runs),
                                                    sort_keys=False))


def csv_text(header: list | tuple, rows: list[list]) -> str:
    buffer = io.StringIO(newline="")
    w = csv.writer(buffer)
    w.writerow(header)
    w.writerows(rows)
    return buffer.getvalue()


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
