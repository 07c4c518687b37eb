"""SADDLE-d: lock-step rounds whose length the Manager's Controller decides token by token
(``sim.manager.controller``), on the trace's probabilities quantized to UQ1.16: a request stops
drafting when H < tau or at the maximum draft length."""
from __future__ import annotations

from dataclasses import dataclass, field

from sim.manager.controller import Controller
from sim.manager.formats import quantize_prob
from sim.systems.lockstep import LockstepLive, LockstepRun


@dataclass(slots=True)
class ControlledLive(LockstepLive):
    cap: int = 0                     # the round's most draft tokens (max length, output end)
    probs: list[float] = field(default_factory=list)    # the DLM's, along its own path
    drafting: bool = False


class SaddleDRun(LockstepRun):
    live_type = ControlledLive
    live: dict[int, ControlledLive]    # type: ignore[assignment]

    def __init__(self, setup) -> None:
        super().__init__(setup)
        cfg, rule = setup.manager_config, setup.stop
        self.controller = Controller(cfg.max_requests, cfg.max_draft_len, rule.controller_tau,
                                     cfg.acceptance_table)

    def enter(self, lives) -> None:
        for live in lives:
            self.controller.admit(live.slot, live.mb)

    def on_finish(self, live) -> None:
        self.controller.retire(live.slot)

    def new_round(self, batch) -> None:
        rule, max_len = self.setup.stop, self.setup.manager_config.max_draft_len
        assert rule is not None
        for live in batch:
            live.drafted = 0
            plan = rule.planned(live.trace, live.t, live.remaining)
            live.cap = cap = plan if plan is not None else min(max_len, live.remaining)
            if cap:
                live.probs, live.accepted = live.trace.draft_prob_list(live.t, cap)
            else:
                live.accepted = 0
            live.drafting = cap > 0
            self.controller.slots[live.slot].new_round()

    def draft(self, mb, lives, start) -> int:
        """One step for the requests still drafting, each token to the Controller, until none
        is."""
        t = start
        while True:
            drafting = [live for live in lives if live.drafting]
            if not drafting:
                return t
            work = self.price_dlm(tuple([live.context(live.drafted) for live in drafting]))
            for live in drafting:
                k = live.drafted = live.drafted + 1
                slot = self.controller.expect_draft(live.slot, live.mb, k)
                stop = self.controller.advance(slot, quantize_prob(live.probs[k - 1]))
                if stop or k >= live.cap:
                    live.drafting = False
                    live.accepted = min(live.accepted, k)
            self.tokens.drafted += len(drafting)
            done = self.devices.run_alone(mb, self.dlm_lanes[mb], work, t)
            t = done + self.monitoring(mb, len(drafting), at=done)
