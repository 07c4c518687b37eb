"""Which class simulates a system. A system named here gets its class by name (a new system:
its module, its ``configs/systems/NAME.yaml`` and one line in ``BY_NAME``); any other by what
its spec says it is (``run_class``)."""
from __future__ import annotations

from sim.systems.autoregressive import AutoregressiveRun
from sim.systems.base import BaseRun
from sim.systems.planned import PlannedRun
from sim.systems.pooled import PooledRun
from sim.systems.registry import StopRule
from sim.systems.saddle_d import SaddleDRun
from sim.systems.spec import SystemSpec, Verify

BY_NAME: dict[str, type[BaseRun]] = {}


def run_class(spec: SystemSpec, stop: StopRule | None) -> type[BaseRun]:
    if spec.name in BY_NAME:
        return BY_NAME[spec.name]
    if not spec.speculative or stop is None:
        return AutoregressiveRun
    if spec.verify is Verify.SHARED_POOL:
        return PooledRun      # SADDLE, SADDLE-p, SADDLE-s and the oracle: configurations of it
    return SaddleDRun if stop.planned_by_controller else PlannedRun
