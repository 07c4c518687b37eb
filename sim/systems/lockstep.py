"""Lock-step decoding, the round every lock-step system shares (GPU/PIM/SpecPIM-AD and -SD,
SADDLE-d): every micro-batch drafts on its own device (DLM steps for the requests still
drafting, each followed by the Controller's monitoring latency on Manager hardware), then one
TLM pass verifies every request with its draft tokens + 1 queries. Nothing else runs while the
micro-batches draft, so each one's steps run back to back without an event each. A subclass
says how a round is drafted (``new_round``, ``draft``).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from mypy_extensions import mypyc_attr

from sim.systems.base import BaseRun, Live


@dataclass(slots=True)
class LockstepLive(Live):
    drafted: int = 0      # draft tokens of the round in progress
    accepted: int = 0     # how many of them the pass accepts (at most ``drafted``)


@mypyc_attr(allow_interpreted_subclasses=True)
class LockstepRun(BaseRun):
    live_type = LockstepLive
    live: dict[int, LockstepLive]    # type: ignore[assignment]

    def new_round(self, batch: list[LockstepLive]) -> None:
        """Every request of ``batch`` (slot order) starts a round."""

    def draft(self, mb: int, lives: list[LockstepLive], start: int) -> int:
        """Micro-batch ``mb``'s prediction steps of this round (``lives``: its requests, in slot
        order) from ``start``; returns when the last is done (``start`` when it drafts
        nothing)."""
        return start

    def proceed(self) -> None:
        live = self.live
        batch = [live[slot] for slot in sorted(live)]
        self.new_round(batch)
        by_mb: list[list[LockstepLive]] = [[] for _ in range(self.n_devices)]
        for request in batch:
            by_mb[request.mb].append(request)
        now = self.queue.now
        end = max([self.draft(mb, lives, now) for mb, lives in enumerate(by_mb)])
        self.queue.at(end, partial(self.verify, batch))

    def verify(self, batch: list[LockstepLive]) -> None:
        work = self.price_tlm([(live.context(live.drafted), live.drafted + 1) for live in batch])
        self.devices.start_foreground("TLM", work, partial(self.verified, batch))

    def verified(self, batch: list[LockstepLive], passes: int = 1) -> None:
        """The pass is done (an autoregressive run: its last ``passes``): each request commits
        its accepted tokens and the TLM's token of each pass."""
        entering = []
        rejections = wasted = 0
        for live in batch:
            if live.accepted < live.drafted:
                rejections += 1
                wasted += live.drafted - live.accepted - 1
            if self.commit(live, live.accepted, passes):
                entering += self.refill()
        self.reject(rejections, wasted)
        self.settle_window()
        self.join(entering)
        if self.live:
            self.proceed()
