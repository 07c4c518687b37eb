"""SADDLE with a fixed cap on the draft length: every round of every request ends after at
most ``CAP`` draft tokens, whatever H says (the Controller's H < tau rule still ends it
earlier). Everything else is SADDLE's: the Shared and Eager Pools, the Scheduler, the issue
rule. The Manager keeps its own maximum (configs/manager.yaml); a round the cap ends is
closed with an ``EndRound`` transaction, as the end of a request's output is."""
from __future__ import annotations

from sim.systems.base import RunSetup
from sim.systems.pooled import PooledRun

CAP = 4


class SaddleCapRun(PooledRun):
    def __init__(self, setup: RunSetup) -> None:
        super().__init__(setup)
        # The most draft tokens a round takes (PooledRun.new_round caps each round at it).
        self.max_draft_len = min(self.max_draft_len, CAP)
