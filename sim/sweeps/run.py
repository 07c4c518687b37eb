"""Run a sweep, resumably, on a backend, and write its rows.

Layout of ``results/sweeps/<name>/``: ``runs/<key>.json`` (the experiment runner's run files:
the cache a rerun resumes from), ``rows/<key>.json`` (one row per run, written whole as the run
ends, a failed run's with its error), and at the end ``rows.json``, ``rows.csv`` (the rows in
point order), ``summary.json``, ``sweep.yaml`` (the sweep with every point) and the plots.

A row: ``point`` (every axis value), ``run`` (the run's system, pair, batch, d, L), ``digest``
(sha256 of the run's resolved parameters: tau, the trace's content and the overrides included;
the run file's name carries its first 10 digits), ``status`` (``ok`` or ``failed``), ``error``
and ``metrics`` (every field of the run's record, nested ones dotted: ``utilization.gpu``).
Rows hold nothing about where or when they ran, so every backend writes the same bytes.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from common.paths import write_whole
from sim.experiments.backends import Backend, make
from sim.experiments.runner import csv_text, dispatch, flat, plan, run_file
from sim.sweeps.spec import Sweep

RUN_FIELDS = ("system", "pair", "batch", "draft_length", "sequence_length")


@dataclass
class Summary:
    sweep: str
    points: int
    runs: int
    succeeded: int = 0
    failed: int = 0
    reused: int = 0

    def to_dict(self) -> dict:
        return dict(vars(self))


def digest(saved_params: dict) -> str:
    """The resolved run's digest: its parameters as saved, wherever the trace lies."""
    text = json.dumps({k: v for k, v in saved_params.items() if k != "trace"}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def row(point: dict, params: dict, record: dict | None, error: str | None) -> dict:
    label = params["label"] or params["system"]
    return {"point": point,
            "run": {k: (label if k == "system" else params[k]) for k in RUN_FIELDS},
            "digest": digest(params), "status": "ok" if error is None else "failed",
            "error": error, "metrics": flat(record) if record is not None else {}}


def run_sweep(sweep: Sweep, out: Path, runner: Backend | None = None, *,
              progress: bool = True) -> tuple[Summary, list[dict]]:
    """Simulate every run of the sweep not already saved in ``out`` on ``runner`` (default: in
    this process) and return the summary and the rows in point order. A failed run is a row
    with its error (the others go on; a rerun tries it again)."""
    runner = runner or make("local", 1)
    todo, records, pending = plan([p for _, p in sweep.runs], out)
    rows_dir = out / "rows"
    rows_dir.mkdir(exist_ok=True)
    summary = Summary(sweep.name, len(sweep.points), len(todo), reused=len(todo) - len(pending))
    rows: list[dict | None] = [None] * len(todo)

    def put(index: int, params: dict, record: dict | None, error: str | None) -> None:
        rows[index] = row(sweep.points[sweep.runs[index][0]], params, record, error)
        path = rows_dir / run_file(todo[index])[1]
        try:
            same = json.loads(path.read_text()) == rows[index]
        except (OSError, ValueError):       # missing or damaged
            same = False
        if not same:
            write_whole(path, json.dumps(rows[index], sort_keys=True, indent=1))

    for i, p in enumerate(todo):
        if records[i] is not None:          # saved: its row, written if it is missing
            put(i, run_file(p)[0], records[i], None)

    def done(task, record, error) -> None:
        summary.succeeded += error is None
        summary.failed += error is not None
        put(task.index, task.record_params, record, error)

    dispatch(sweep.name, pending, len(todo), done, runner, progress=progress)
    return summary, rows


def write_outputs(sweep: Sweep, out: Path, summary: Summary, rows: list[dict]) -> None:
    """``rows.json``, ``rows.csv``, ``summary.json`` and ``sweep.yaml``."""
    write_whole(out / "rows.json", json.dumps({"sweep": sweep.name, "rows": rows},
                                              sort_keys=True, indent=1))
    # An axis is a column once; the run's parameters are run.*, its record's fields follow
    # (a searched d: run.draft_length is "search", draft_length the d chosen).
    metrics = sorted({k for r in rows for k in r["metrics"]} - set(sweep.axes))
    fields = [k for k in RUN_FIELDS if k not in sweep.axes]
    write_whole(out / "rows.csv", csv_text(
        list(sweep.axes) + [f"run.{k}" for k in fields] + ["digest", "status"] + metrics + ["error"],
        [[r["point"].get(a) for a in sweep.axes] + [r["run"][k] for k in fields]
         + [r["digest"], r["status"]] + [r["metrics"].get(m) for m in metrics] + [r["error"]]
         for r in rows]))
    write_whole(out / "summary.json", json.dumps(summary.to_dict(), sort_keys=True, indent=1))
    resolved = {"name": sweep.name, "source": sweep.source, "experiment": str(sweep.experiment),
                "axes": list(sweep.axes), "points": list(sweep.points), "plot": sweep.plot}
    write_whole(out / "sweep.yaml", yaml.safe_dump(resolved, sort_keys=False))
