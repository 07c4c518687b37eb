"""Stopping rules: when does a request's round of drafting end? One class per rule.

A rule either fixes the round's length before drafting starts (``planned`` returns a count) or
leaves the decision to the Manager's Controller (``planned`` returns None: stop when H < tau or
at ``max_draft_len``). The Controller is always given ``controller_tau``; rules that plan their
own length give tau = 0, so the Controller's H rule never fires before theirs.

To add a rule: subclass ``StopRule``, set ``name``, decorate with ``@register``; systems name it
in ``configs/systems/*.yaml`` under ``stop:``.
"""
from __future__ import annotations

from typing import ClassVar

from sim.errors import ConfigError
from traces.format import RequestTrace

STOP_RULES: dict[str, type["StopRule"]] = {}


def register(cls: type["StopRule"]) -> type["StopRule"]:
    if not cls.name or cls.name in STOP_RULES:
        raise ValueError(f"stop rule {cls.__name__}: empty or duplicate name {cls.name!r}")
    STOP_RULES[cls.name] = cls
    return cls


class StopRule:
    name: ClassVar[str] = ""

    def __init__(self, *, draft_length: int | None, tau_raw: int, max_draft_len: int):
        self.draft_length = draft_length
        self.tau_raw = tau_raw
        self.max_draft_len = max_draft_len

    @property
    def controller_tau(self) -> int:
        return 0

    @property
    def adaptive(self) -> bool:
        return True

    @property
    def planned_by_controller(self) -> bool:
        return False

    def planned(self, trace: RequestTrace, t: int, remaining: int) -> int | None:
        """Draft tokens of the round that starts at output position ``t`` with ``remaining``
        positions left, or None to let the Controller decide token by token."""
        raise NotImplementedError


@register
class FixedLength(StopRule):
    """Every round drafts d tokens (fewer only at the end of the output)."""
    name = "fixed"

    def __init__(self, **kw):
        super().__init__(**kw)
        if not isinstance(self.draft_length, int) or self.draft_length < 1:
            raise ConfigError(f"stop rule 'fixed' needs draft_length >= 1, found {self.draft_length!r}")

    @property
    def adaptive(self) -> bool:
        return False

    def planned(self, trace, t, remaining):
        return min(self.draft_length, remaining)


@register
class Threshold(StopRule):
    """SADDLE's rule: the Controller stops when H < tau or at the maximum draft length."""
    name = "threshold"

    @property
    def controller_tau(self) -> int:
        return self.tau_raw

    @property
    def planned_by_controller(self) -> bool:
        return True

    def planned(self, trace, t, remaining):
        return None


@register
class Oracle(StopRule):
    """Knows the trace: the round ends exactly at the first draft token that will be rejected
    (that token is drafted, as the Controller drafts the token that makes H < tau, so the TLM
    pass that corrects it is the one verifying the accepted ones), or at the maximum draft
    length: an upper bound for any stopping rule."""
    name = "oracle"

    def planned(self, trace, t, remaining):
        cap = min(self.max_draft_len, remaining)
        return min(trace.leading_accepted(t, cap) + 1, cap)
