"""The Manager's transaction-level interface: input transactions and output events.

Both are frozen dataclasses of plain integers, booleans, strings and tuples of them, so a run
can be logged as JSON (``to_dict`` / ``from_dict``: ``{"type": CLASS_NAME, field: value, ...}``),
replayed, and compared field by field with the RTL. ``request`` is a Controller slot,
``position`` the 1-based index of a draft token in its request's round, probabilities and H are
raw UQ1.16. README.md gives the semantics of each transaction.
"""
import dataclasses
from dataclasses import dataclass
from enum import Enum
from typing import Any

from common.errors import SaddleError


class ProtocolError(SaddleError):
    """An illegal input transaction (unknown request, wrong position, field out of range, ...);
    not back-pressure: a full pool is legal and answered with a ``Refused`` event."""


class Pool(str, Enum):
    SHARED = "shared"
    EAGER = "eager"


class Device(str, Enum):
    GPU = "gpu"
    PIM = "pim"


class Op(str, Enum):
    DLM_FC = "dlm_fc"
    TLM_ATTENTION = "tlm_attention"


class DiscardReason(str, Enum):
    """Why a drafted token left without being verified as accepted or rejected (README.md)."""

    REJECTED_PREFIX = "rejected_prefix"           # in the pass, after its request's rejected token
    SHARED_AFTER_REJECT = "shared_after_reject"   # waiting in the Shared Pool at that rejection
    EAGER_AFTER_REJECT = "eager_after_reject"     # in an Eager Pool at that rejection
    REQUEST_RETIRED = "request_retired"           # still pooled when its request was retired
    # Drafted by a prediction step that outlived its round: dropped by the simulator before it
    # reaches the Manager.
    STALE_CONTEXT = "stale_context"


# The reasons the Manager itself discards for (the RTL's codes).
MANAGER_DISCARDS = tuple(r for r in DiscardReason if r is not DiscardReason.STALE_CONTEXT)


class NotIssuedReason(str, Enum):
    LOCKED = "locked"                   # a verification is already in flight
    EMPTY = "empty"                     # the Shared Pool holds no token
    BELOW_CAPACITY = "below_capacity"   # fewer tokens than one TLM pass verifies, and TLM busy


# ----------------------------------------------------------------------------- inputs


@dataclass(frozen=True, slots=True)
class Admit:
    """Request ``request`` takes its Controller slot in ``microbatch``; its first round starts."""
    request: int
    microbatch: int


@dataclass(frozen=True, slots=True)
class DraftToken:
    """The DLM's ``token``, of probability ``prob`` (raw UQ1.16), at ``position`` of the round."""
    request: int
    microbatch: int
    position: int
    token: int
    prob: int


@dataclass(frozen=True, slots=True)
class DraftLogits:
    """A draft token as the DLM's logits (raw LOGIT, vocabulary order): the softmax unit
    (softmax.py) picks the greedy token and its probability, then it is a DraftToken."""
    request: int
    microbatch: int
    position: int
    logits: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class VerifyIssue:
    """May a verification start now? ``capacity`` = tokens one TLM pass verifies."""
    tlm_idle: bool
    capacity: int


@dataclass(frozen=True, slots=True)
class VerifyResult:
    """Outcome of the in-flight verification for one request: the first ``accepted`` of its
    tokens in the pass matched the TLM; ``corrected_token`` is the TLM's token at the next
    position (the correction after a rejection, the bonus token when all were accepted)."""
    request: int
    accepted: int
    corrected_token: int


@dataclass(frozen=True, slots=True)
class Unlock:
    """The verification pass is over (every request in it has its VerifyResult)."""


@dataclass(frozen=True, slots=True)
class SchedulerQuery:
    """After a prediction step of ``microbatch``: where does its next DLM FC run?"""
    microbatch: int


@dataclass(frozen=True, slots=True)
class EndRound:
    """The environment ends the request's drafting for this round (output length reached, or
    an external stopping rule such as the oracle), as if the Controller had said stop."""
    request: int


@dataclass(frozen=True, slots=True)
class Retire:
    """The request's output is complete; its slot is freed and its pooled tokens discarded."""
    request: int


INPUTS = (Admit, DraftToken, DraftLogits, VerifyIssue, VerifyResult, Unlock, SchedulerQuery, EndRound, Retire)

# ----------------------------------------------------------------------------- outputs


@dataclass(frozen=True, slots=True)
class Admitted:
    request: int
    microbatch: int


@dataclass(frozen=True, slots=True)
class Drafted:
    """The token went to ``pool``; the Controller's H after it and the continue/stop decision."""
    request: int
    position: int
    pool: Pool
    h: int
    stop: bool


@dataclass(frozen=True, slots=True)
class RoundEnded:
    """Answer to EndRound: drafting of the round stopped after ``position`` tokens, at ``h``."""
    request: int
    position: int
    h: int


@dataclass(frozen=True, slots=True)
class Refused:
    """Back-pressure: ``pool`` is full; the token was not taken (H unchanged), retry later."""
    request: int
    position: int
    pool: Pool


@dataclass(frozen=True, slots=True)
class NotIssued:
    reason: NotIssuedReason
    available: int


@dataclass(frozen=True, slots=True)
class SelectedToken:
    request: int
    position: int
    token: int
    h: int


@dataclass(frozen=True, slots=True)
class Issued:
    """Tokens sent to verification, in selection order (descending H, request, position)."""
    verification: int
    tokens: tuple[SelectedToken, ...]


@dataclass(frozen=True, slots=True)
class Locked:
    verification: int


@dataclass(frozen=True, slots=True)
class Mapping:
    """Scheduler decision: ``op`` runs on ``device``. The intensity estimate is
    ``numerator / denominator`` (see scheduler.py); ``microbatch`` is -1 for TLM attention."""
    op: Op
    device: Device
    numerator: int
    denominator: int
    microbatch: int


@dataclass(frozen=True, slots=True)
class Verified:
    """The request's in-flight tokens at positions ``first .. first+accepted-1`` were accepted;
    with ``rejected`` the token at ``first+accepted`` was rejected."""
    request: int
    first: int
    accepted: int
    rejected: bool


@dataclass(frozen=True, slots=True)
class Discarded:
    request: int
    positions: tuple[int, ...]
    reason: DiscardReason


@dataclass(frozen=True, slots=True)
class Unlocked:
    verification: int


@dataclass(frozen=True, slots=True)
class Moved:
    """Eager tokens of the request moved to the Shared Pool (ascending positions)."""
    request: int
    microbatch: int
    positions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Resumed:
    """A new speculation round of the request starts (H = 1.0, next position 1), drafting from
    ``start_token``; ``after_reject`` tells whether the previous round ended in a rejection."""
    request: int
    start_token: int
    after_reject: bool


@dataclass(frozen=True, slots=True)
class Retired:
    request: int


OUTPUTS = (Admitted, Drafted, RoundEnded, Refused, NotIssued, Issued, Locked, Mapping, Verified, Discarded,
           Unlocked, Moved, Resumed, Retired)

_TOP_LEVEL = {cls.__name__: cls for cls in INPUTS + OUTPUTS}

# ----------------------------------------------------------------------------- JSON


def to_dict(obj) -> dict[str, Any]:
    """``{"type": NAME, field: value}`` with enums as their strings and tuples as lists."""
    return {"type": type(obj).__name__} | _plain(obj)


def _plain(value):
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


def from_dict(data: dict, source: str = "transaction") -> Any:
    """Inverse of ``to_dict`` for inputs and outputs; errors name ``source`` and the key."""
    if not isinstance(data, dict):
        raise ProtocolError(f"{source}: expected a JSON object, found {type(data).__name__}")
    name = data.get("type")
    cls = _TOP_LEVEL.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ProtocolError(f"{source}: type: expected one of {', '.join(_TOP_LEVEL)}, found {name!r}")
    return _build(cls, {k: v for k, v in data.items() if k != "type"}, f"{source}: {name}")


def _build(cls, data: dict, where: str):
    fields = dataclasses.fields(cls)
    names = {f.name for f in fields}
    extra = sorted(set(data) - names)
    if extra:
        raise ProtocolError(f"{where}: unknown key(s) {', '.join(extra)}; expected {', '.join(sorted(names)) or 'none'}")
    values = {}
    for f in fields:
        if f.name not in data:
            raise ProtocolError(f"{where}: missing key {f.name!r}")
        values[f.name] = _convert(f.type, data[f.name], f"{where}.{f.name}")
    return cls(**values)


def _convert(kind, value, where: str):
    if kind is bool or kind is int:
        if type(value) is not kind:             # a bool is not an int here
            expected = "true or false" if kind is bool else "an integer"
            raise ProtocolError(f"{where}: expected {expected}, found {value!r}")
        return value
    if dataclasses.is_dataclass(kind):
        if not isinstance(value, dict):
            raise ProtocolError(f"{where}: expected an object, found {value!r}")
        return _build(kind, value, where)
    if isinstance(kind, type) and issubclass(kind, Enum):
        try:
            return kind(value)
        except ValueError:
            allowed = ", ".join(m.value for m in kind)
            raise ProtocolError(f"{where}: expected one of {allowed}, found {value!r}") from None
    if not isinstance(value, list):                                      # tuple[X, ...]
        raise ProtocolError(f"{where}: expected a list, found {value!r}")
    return tuple(_convert(kind.__args__[0], v, f"{where}[{i}]") for i, v in enumerate(value))
