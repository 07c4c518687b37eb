"""Token conservation: every drafted token ends accepted, rejected, or discarded with a reason.

The ``Ledger`` gives each token a serial when a pool takes it and records one fate per serial;
``check`` compares the open serials with the tokens the pools hold, so a token lost or
double-counted anywhere in the Manager is caught, not just a mismatch of totals.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Final

from common.errors import SaddleError
from sim.manager.transactions import MANAGER_DISCARDS

ACCEPTED: Final = "accepted"
REJECTED: Final = "rejected"


class ConservationError(SaddleError):
    """A drafted token has no fate, two fates, or is unaccounted for."""


@dataclass
class Conservation:
    """Totals of one Manager run. ``drafted == accepted + rejected + sum(discarded) + pending``."""
    drafted: int
    accepted: int
    rejected: int
    discarded: dict[str, int]
    pending: int

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class Ledger:
    _next: int = 0
    _open: set[int] = field(default_factory=set)
    _fates: dict[str, int] = field(default_factory=dict)    # a plain dict: faster compiled than Counter

    def open(self) -> int:
        serial = self._next
        self._next += 1
        self._open.add(serial)
        return serial

    def close(self, serial: int, fate: str) -> None:
        if serial not in self._open:
            raise ConservationError(f"token #{serial} closed twice or never drafted (fate {fate})")
        self._open.remove(serial)
        self._fates[fate] = self._fates.get(fate, 0) + 1

    def close_all(self, serials: list[int], fate: str) -> None:
        """``close(serial, fate)`` for each of ``serials``, in one set operation."""
        if not serials:
            return
        open_ = self._open
        before = len(open_)
        open_.difference_update(serials)
        if len(open_) != before - len(serials):
            raise ConservationError(f"a token of {serials} closed twice or never drafted (fate {fate})")
        self._fates[fate] = self._fates.get(fate, 0) + len(serials)

    def totals(self) -> Conservation:
        fates = self._fates
        discarded = {r.value: fates.get(r.value, 0) for r in MANAGER_DISCARDS}
        return Conservation(self._next, fates.get(ACCEPTED, 0), fates.get(REJECTED, 0), discarded,
                            len(self._open))

    def check(self, held: set[int], final: bool = False) -> Conservation:
        """``held``: serials of the tokens in pools or in flight. With ``final`` none may remain."""
        if held != self._open:
            lost = sorted(self._open - held)[:5]
            ghost = sorted(held - self._open)[:5]
            raise ConservationError(f"pools and ledger disagree: open but not held {lost}, "
                                    f"held but not open {ghost}")
        totals = self.totals()
        closed = totals.accepted + totals.rejected + sum(totals.discarded.values())
        if closed + totals.pending != totals.drafted:
            raise ConservationError(f"drafted {totals.drafted} != closed {closed} + pending {totals.pending}")
        if final and totals.pending:
            raise ConservationError(f"{totals.pending} drafted token(s) never verified nor discarded")
        return totals
