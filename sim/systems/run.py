"""One simulated run: a system, a model pair, a batch size and a workload -> ``RunRecord``.

``simulate`` resolves the run's parameters into its full setup (``sim/systems/resolve.py``:
the files it reads, every check, the offline choices) and then builds the system's run class,
which replays the test split.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from common.errors import ConfigError
from sim.metrics import RunRecord
from sim.systems.base import RunSetup
from sim.systems.catalog import run_class
from sim.systems.pooled import PooledRun
from sim.systems.resolve import (  # noqa: F401  (the names runs have always been built from)
    Resolved,
    RunParams,
    adapter,
    check_stop,
    default_trace,
    load_stop_param,
    load_tau,
    resolve,
)
from sim.systems.spec import IssueRule, Kind


@contextmanager
def _without_cycle_collection():
    """A run allocates millions of short-lived objects next to large long-lived caches: the
    cyclic collector's passes over those caches cost a fifth of a run, and reference counting
    frees the run's garbage. After it, what is still tracked (mostly the price caches, about a
    million objects) is frozen (``gc.freeze``), else the next pass traverses it all (5 % of a
    run). The price: the run's own reference cycles (a few hundred objects) are kept."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.freeze()
            gc.enable()


def simulate(p: RunParams, timeline: bool = False, record: bool = False) -> tuple[RunRecord, object]:
    """Run ``p``; returns the metrics and the run object (its interval log feeds a timeline).
    ``record``: a Shared Pool system keeps every Manager transaction and its events in
    ``run.events`` (co-verification of the RTL, ``hw/flow/coverify.py``)."""
    with _without_cycle_collection():
        return execute(resolve(p), record)


def execute(r: Resolved, record: bool = False) -> tuple[RunRecord, object]:
    """Build the resolved run's system, run it and annotate its record with its setup."""
    p, spec = r.params, r.spec
    assert r.mapping is not None and r.manager is not None    # resolve sets both
    setup = RunSetup(spec=spec, pair=p.pair, workload=r.workload, batch=p.batch,
                     batching=p.batching, costs=r.costs, stop=r.stop,
                     mapping=r.mapping, timing=r.timing, manager_config=r.manager,
                     draft_length=r.draft_length if spec.stop == "fixed" else None,
                     capacity=r.capacity or 0,
                     issue_rule=IssueRule(r.issue_rule or IssueRule.DRAINED), record=record)
    run_type = run_class(spec, r.stop)
    if record and not issubclass(run_type, PooledRun):
        raise ConfigError(f"{p.source}: system {p.system} has no Manager to record (verify: shared_pool)")
    run = run_type(setup)
    metrics = run.execute()
    metrics.sequence_length = p.sequence_length
    if p.label is not None:
        metrics.system = p.label
    notes: dict[str, Any] = {key: str(value) if isinstance(value, Kind) else value
                             for key, value in r.annotations().items()}
    return replace(metrics, **notes), run
