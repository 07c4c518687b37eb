"""Autoregressive decoding (GPU-AD, PIM-AD, SpecPIM-AD): a lock-step round with no draft
tokens, so every pass verifies one query per request and commits the TLM's token."""
from __future__ import annotations

from functools import partial

from sim.cost.step import StepPrice
from sim.systems.lockstep import LockstepLive, LockstepRun


class AutoregressiveRun(LockstepRun):
    def proceed(self) -> None:
        """Until the first request finishes the batch does not change and each pass is the
        previous one with every context one longer: those passes are priced together, as the
        steps of a draft round (step s: every request at its context + s, one query), and run
        back to back; each request commits their tokens after the last."""
        live, m = self.live, self.setup.mapping
        batch = [live[slot] for slot in sorted(live)]
        left = min(request.remaining for request in batch)
        passes = self.costs.price_round(
            "tlm", [request.context(0) for request in batch], [left] * len(batch), m["tlm_fc"],
            m["tlm_attention"], self.n_devices)
        passes.reverse()
        self.next_pass(batch, passes, left)

    def next_pass(self, batch: list[LockstepLive], passes: list[StepPrice], left: int) -> None:
        if passes:
            self.devices.start_foreground("TLM", self.book_tlm(passes.pop()),
                                          partial(self.next_pass, batch, passes, left))
        else:
            self.verified(batch, left)
