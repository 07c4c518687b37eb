"""The SADDLE Manager's latency as the simulator charges it: the RTL's cycle counts
(``configs/timing/manager.yaml``, written by ``saddle hw cycles --write`` from a simulation of
hw/manager/) at the one parameter not measured, the clock ``clock_ghz``.

* Monitoring (after a prediction step): the softmax unit streams each drafting request's
  logits, ``softmax_lanes`` per cycle, ceil(vocab / lanes) + ``softmax_vector_cycles`` cycles a
  vector, then ``decide_cycles`` (the last DraftLogits' multiply, compare and event beats).
* Decision (before a verification): an Issue of k tokens takes
  ``select_token_cycles`` x k + ``select_fixed_cycles`` cycles.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from common.config import config_path, get
from sim.config import BASE, Configs

# The keys ``saddle hw cycles`` measures (all but clock_ghz), in the order it writes them.
MEASURED_KEYS = ("softmax_lanes", "softmax_vector_cycles", "decide_cycles",
                 "select_token_cycles", "select_fixed_cycles")


@dataclass(frozen=True)
class ManagerTiming:
    clock_ghz: float
    softmax_lanes: int
    softmax_vector_cycles: int
    decide_cycles: int
    select_token_cycles: int
    select_fixed_cycles: int

    def _ps(self, cycles: int) -> int:
        return math.ceil(cycles * 1000 / self.clock_ghz)

    def monitoring_cycles(self, n_requests: int, vocab: int) -> int:
        """Softmax over each drafting request's logits, one vector after the other, then the
        last request's multiply, compare and event beats."""
        beats = -(-vocab // self.softmax_lanes)
        return n_requests * (beats + self.softmax_vector_cycles) + self.decide_cycles

    def monitoring_ps(self, n_requests: int, vocab: int) -> int:
        return self._ps(self.monitoring_cycles(n_requests, vocab))

    def decision_cycles(self, n_selected: int) -> int:
        """An Issue that selects ``n_selected`` tokens."""
        return self.select_token_cycles * n_selected + self.select_fixed_cycles

    def decision_ps(self, n_selected: int) -> int:
        return self._ps(self.decision_cycles(n_selected))

    def measured(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in MEASURED_KEYS}


def load_manager_timing(name: str = "manager", *, configs: Configs = BASE) -> ManagerTiming:
    path = config_path("timing", name)
    data = configs.yaml(path)
    src = str(path)
    return ManagerTiming(clock_ghz=get(data, "clock_ghz", float, source=src, positive=True),
                         softmax_lanes=get(data, "softmax_lanes", int, source=src, positive=True),
                         **{k: get(data, k, int, source=src) for k in MEASURED_KEYS[1:]})
