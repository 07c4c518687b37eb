"""One simulated run: ``simulate`` resolves a run's parameters into its full setup
(``sim/systems/resolve.py``) and builds the system's run class, which replays the workload into
a ``RunRecord``.
"""
from __future__ import annotations

import gc
from dataclasses import replace

from common.compiled import interrupt_after
from common.errors import ConfigError
from sim.metrics import RunRecord
from sim.systems.base import BaseRun
from sim.systems.catalog import run_class
from sim.systems.pooled import PooledRun
from sim.systems.resolve import RunParams, RunSetup, resolve


def simulate(p: RunParams, record: bool = False) -> tuple[RunRecord, BaseRun]:
    """Run ``p``; returns its record and the run object (its interval log feeds a timeline).
    ``record``: a Shared Pool system keeps every Manager transaction and its events in
    ``run.events`` (co-verification of the RTL, ``hw/flow/coverify.py``).

    A run allocates millions of short-lived objects beside large long-lived caches, which the
    cyclic collector would traverse again and again: it is off during the run, and what is
    still tracked after it (mostly the price caches) is frozen. The price: the run's own
    reference cycles (a few hundred objects) are kept."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        with interrupt_after():     # Ctrl-C: once the run ends (common/compiled.py says why)
            return execute(resolve(p), record)
    finally:
        if enabled:
            gc.freeze()
            gc.enable()


def execute(setup: RunSetup, record: bool = False) -> tuple[RunRecord, BaseRun]:
    """Build the run's system, run it and annotate its record with its setup."""
    p = setup.params
    run_type = run_class(setup.spec, setup.stop)
    if record and not issubclass(run_type, PooledRun):
        raise ConfigError(f"{p.source}: system {p.system} has no Manager to record (verify: shared_pool)")
    setup.record = record
    run = run_type(setup)
    out = run.execute()
    out.sequence_length = p.sequence_length
    if p.label is not None:
        out.system = p.label
    return replace(out, **setup.annotations()), run
