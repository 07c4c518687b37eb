"""Stopping rules: when does a request's round of drafting end? One class per rule.

A rule either fixes the round's length before drafting starts (``planned`` returns a count) or
leaves it to the Manager's Controller (``planned`` returns None: stop when H < tau or at
``max_draft_len``). The Controller is always given ``controller_tau``; a rule that plans its
own length gives 0, so the Controller's H rule never fires first. The token that trips a rule
is drafted (and verified). Rules beyond the paper read only what the DLM shows, on the
Manager's integer formats: ``calibrated`` runs on the Controller (its multiplier reads an
acceptance table); ``confidence`` and ``entropy`` have no Controller datapath, so they plan
the round from its draft window (the DLM's own path), which ends it where deciding token by
token would. Their parameter (``param_name``) is tuned on the validation split
(``saddle tune-stop``, configs/stopping/).

To add a rule: subclass ``StopRule``, set ``name``, decorate with ``@register`` (walkthrough:
docs/extending.md).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from common.errors import ConfigError
from sim.manager.controller import ACCEPTANCE_BINS
from sim.manager.formats import ENTROPY, quantize_prob
from traces.format import RequestTrace

STOP_RULES: dict[str, type[StopRule]] = {}


def register(cls: type[StopRule]) -> type[StopRule]:
    if not cls.name or cls.name in STOP_RULES:
        raise ValueError(f"stop rule {cls.__name__}: empty or duplicate name {cls.name!r}")
    STOP_RULES[cls.name] = cls
    return cls


class StopRule:
    name: ClassVar[str] = ""
    param_name: ClassVar[str | None] = None    # the tuned parameter, a number in [0, 1]
    needs_entropy: ClassVar[bool] = False      # reads the trace's entropy fields
    needs_calibration: ClassVar[bool] = False  # needs ``calibration_table`` of the validation split
    planned_by_controller: ClassVar[bool] = False   # the Controller's H rule ends the round
    reads_tau: ClassVar[bool] = False          # compares H with tau (configs/tau/<pair>.yaml)
    # The table the Controller's multiplier reads instead of p (None: p itself).
    acceptance_table: tuple[int, ...] | None = None

    def __init__(self, *, draft_length: int | None, tau_raw: int, max_draft_len: int,
                 param: float | None = None, calibration: Sequence[int] | None = None):
        self.draft_length = draft_length
        self.max_draft_len = max_draft_len
        if self.param_name is not None:
            if isinstance(param, bool) or not isinstance(param, (int, float)) or not 0 <= param <= 1:
                raise ConfigError(f"stop rule {self.name!r} needs its parameter {self.param_name} "
                                  f"in [0, 1], found {param!r}")
        elif param is not None:
            raise ConfigError(f"stop rule {self.name!r} takes no parameter (found {param!r})")
        self.param: float = 0.0 if param is None else param     # (rules without one ignore it)
        self.controller_tau = tau_raw if self.reads_tau else 0   # the Controller's H threshold

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

    def planned(self, trace, t, remaining):
        return min(self.draft_length, remaining)


def reads_tau(rule: str | None) -> bool:
    """Whether the stop rule named ``rule`` compares H with the pair's tau."""
    return rule in STOP_RULES and STOP_RULES[rule].reads_tau


@register
class Threshold(StopRule):
    """SADDLE's rule: the Controller stops when H < tau or at the maximum draft length."""
    name = "threshold"
    planned_by_controller = True
    reads_tau = True

    def planned(self, trace, t, remaining):
        return None


@register
class Oracle(StopRule):
    """Knows the trace: the round ends at the first draft token that will be rejected (drafted,
    as the token that makes H < tau is), or at the maximum draft length: an upper bound for any
    stopping rule."""
    name = "oracle"

    def planned(self, trace, t, remaining):
        cap = min(self.max_draft_len, remaining)
        return min(trace.leading_accepted(t, cap) + 1, cap)


class TokenRule(StopRule):
    """A rule that looks at each drafted token in turn: ``stops_after`` over the round's window
    says after which tokens it would stop; the round ends at the first (or at the cap, or the
    output's end)."""

    def planned(self, trace, t, remaining):
        cap = min(self.max_draft_len, remaining)
        stop = self.stops_after(trace, t, cap)
        hit = np.flatnonzero(stop)
        return int(hit[0]) + 1 if len(hit) else len(stop)   # the window ends at the output's end

    def stops_after(self, trace: RequestTrace, t: int, cap: int) -> np.ndarray:
        raise NotImplementedError

    @staticmethod
    def raw_probs(trace: RequestTrace, t: int, cap: int) -> list[int]:
        return [quantize_prob(x) for x in trace.draft_prob_list(t, cap)[0]]


@register
class Confidence(TokenRule):
    """Per-token confidence: stop after the newest token when its probability p_t < c
    (UQ1.16, one comparator)."""
    name = "confidence"
    param_name = "c"

    def stops_after(self, trace, t, cap):
        c = quantize_prob(self.param)
        return np.array([p < c for p in self.raw_probs(trace, t, cap)])


CALIBRATION_BINS = ACCEPTANCE_BINS   # the Controller's acceptance table (sim/manager/controller.py)


def calibration_table(requests: Sequence[RequestTrace], bins: int = CALIBRATION_BINS) -> tuple[int, ...]:
    """P(accept | p) per equal-width bin of the DLM's on-path probability (the traces'
    reliability table, ``traces.stats.reliability_table``) as raw UQ1.16 entries; a bin with
    no token takes its midpoint (no evidence either way: the DLM's own word)."""
    from traces.stats import reliability_table

    rows = reliability_table(requests, bins)["bins"]
    return tuple(quantize_prob(row["acceptance"] if row["positions"] else (row["low"] + row["high"]) / 2)
                 for row in rows)


@register
class Calibrated(Threshold):
    """Calibrated acceptance (after SpecDec++): stop when A_t = prod a(p_i) < 1 - h, the
    estimated probability that some token of the round is rejected above h, with a(p) the
    acceptance table of the validation split (``calibration_table``). The Controller computes
    it as SADDLE's rule with a(p_t) for p_t in its multiplier and tau = 1 - h."""
    name = "calibrated"
    param_name = "h"
    needs_calibration = True
    reads_tau = False          # its tau is 1 - h

    def __init__(self, *, calibration: Sequence[int] | None = None, **kw):
        super().__init__(calibration=calibration, **kw)
        if calibration is None or len(calibration) != CALIBRATION_BINS:
            raise ConfigError(f"stop rule 'calibrated' needs an acceptance table of "
                              f"{CALIBRATION_BINS} entries, found {calibration!r}")
        self.acceptance_table = tuple(calibration)
        self.controller_tau = quantize_prob(1.0 - self.param)


# AdaEDL's scale gamma, fixed (only (1 - lambda)^2 / gamma matters; lambda is tuned): 1/4 lets
# lambda in [0, 1] reach bounds up to 4 nats (real DLM entropies: traces/CAPTURE.md).
ENTROPY_GAMMA = 0.25


@register
class Entropy(TokenRule):
    """Entropy-based (after AdaEDL): stop when the lower bound on the newest token's acceptance,
    1 - sqrt(gamma * E_t), falls below lambda, E_t the DLM's entropy (nats) at that token; i.e.
    when E_t > (1 - lambda)^2 / gamma, compared in UQ4.12 (one comparator, no square root).
    Needs a trace with ``entropy`` and ``offpath_entropy``."""
    name = "entropy"
    param_name = "lambda"
    needs_entropy = True

    def stops_after(self, trace, t, cap):
        bound = ENTROPY.from_float((1.0 - self.param) ** 2 / ENTROPY_GAMMA)
        return np.array([ENTROPY.from_float(e) > bound for e in trace.draft_entropy(t, cap).tolist()])


def check_entropy(requests: Sequence[RequestTrace], trace: str) -> None:
    """Every request carries the entropy the entropy rule reads, else one error naming the
    trace, the request and the field."""
    for r in requests:
        for key in ("entropy", "offpath_entropy"):
            if key not in r.extra:
                raise ConfigError(
                    f"{trace}: request {r.id} has no {key!r} field: stop rule 'entropy' needs the "
                    "DLM's entropy at every drafted token (on-path 'entropy' and off-path "
                    "'offpath_entropy', traces/README.md): capture with `saddle trace capture`, "
                    "or synthesize with `saddle trace synth --entropy`")
