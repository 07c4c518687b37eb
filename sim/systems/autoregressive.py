"""Autoregressive decoding (GPU-AD, PIM-AD, SpecPIM-AD): a lock-step round with no draft
tokens, so every pass verifies one query per request and commits the TLM's token."""
from __future__ import annotations

from sim.engine.costs import Priced
from sim.systems.lockstep import LockstepLive, LockstepRun


class AutoregressiveRun(LockstepRun):
    def __init__(self, setup) -> None:
        super().__init__(setup)
        self._ahead: list[Priced] = []    # passes priced ahead, last first

    def price_pass(self, batch: list[LockstepLive]) -> Priced:
        """Until the first request finishes the batch does not change and each pass is the
        previous one with every context one longer: those passes are priced together, as the
        steps of a draft round (step s: every request at its context + s, one query). The last
        of them is the one after which the batch changes."""
        if not self._ahead:
            m = self.setup.mapping
            left = min(live.remaining for live in batch)
            self._ahead = self.costs.price_round(
                "tlm", [live.context(0) for live in batch], [left] * len(batch),
                m["tlm_fc"], m["tlm_attention"], self.n_devices)
            self._ahead.reverse()
        return self.book_tlm(self._ahead.pop())
