"""Metrics of one simulated run: throughput, energy efficiency, latency breakdown, device
utilization, PIM operation share, token accounting (conserved, checked) and request latency.

Latency breakdown: every instant is charged to one category, so the parts add up to the run
time: ``overlap`` (a TLM pass and a DLM step at once), ``verification`` (TLM only),
``prediction`` (DLM only), ``monitoring`` (only the Controller), ``decision_making`` (only the
Shared Pool's selection before a pass), ``idle``.

``tokens_per_s`` and ``tokens_per_joule`` are measured over the full-batch window: from the
start until a request finishes with no request left to take its slot (sim/README.md, "Steady
state"); ``run_tokens_per_s`` / ``run_tokens_per_joule`` over the whole run.

Per request: end-to-end latency L (admission to its last committed token) and output length n
give its time per output token L / n and token rate n / L. Records carry p50, p99 and max of L
and of L / n (``numpy.percentile``) and Jain's index of the token rates, (sum x)^2 / (N sum x^2).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

import numpy as np

from common.errors import SaddleError
from sim.engine.devices import IntervalLog
from sim.manager.transactions import DiscardReason

PS_PER_S = 10 ** 12
BREAKDOWN_ORDER = ("prediction", "verification", "monitoring", "decision_making", "overlap", "idle")


class ConservationError(SaddleError):
    """Token accounting of a run does not balance: a simulator bug, never a user error."""


@dataclass
class TokenCounts:
    generated: int = 0     # tokens committed to outputs (accepted drafts + TLM tokens)
    drafted: int = 0       # tokens the DLM produced
    accepted: int = 0      # drafted and accepted by a verification
    rejected: int = 0      # drafted, verified, not accepted (first mismatch and after it)
    discarded: int = 0     # drafted, never verified (Manager discard reasons, request end)
    tlm_tokens: int = 0    # tokens produced by the TLM itself (correction or bonus)
    discard_reasons: dict[str, int] = field(default_factory=dict)

    def discard(self, reason: DiscardReason, n: int = 1) -> None:
        self.discarded += n
        key = reason._value_      # the plain attribute: ``.value`` is a slower descriptor
        self.discard_reasons[key] = self.discard_reasons.get(key, 0) + n

    def check(self, expected_generated: int) -> None:
        problems = []
        if self.drafted != self.accepted + self.rejected + self.discarded:
            problems.append(f"drafted {self.drafted} != accepted {self.accepted} + rejected "
                            f"{self.rejected} + discarded {self.discarded}")
        if self.generated != self.accepted + self.tlm_tokens:
            problems.append(f"generated {self.generated} != accepted {self.accepted} + "
                            f"TLM tokens {self.tlm_tokens}")
        if self.generated != expected_generated:
            problems.append(f"generated {self.generated} != sum of output lengths {expected_generated}")
        if sum(self.discard_reasons.values()) != self.discarded:
            problems.append("discard reasons do not add up to discarded")
        if problems:
            raise ConservationError("token conservation violated: " + "; ".join(problems))


def latency_breakdown(log: IntervalLog, total_ps: int) -> dict[str, int]:
    """Exclusive partition of [0, total_ps] by the priority overlap > verification >
    prediction > monitoring > decision_making > idle (in ps)."""
    spans = [log.spans(prefix) for prefix in ("TLM", "DLM", "monitor", "decide")]
    # Every instant where some lane starts or ends, then the end of the run; segment i ends at
    # times[i]. Sorted and deduplicated by hand: np.unique is far slower on numpy 2.
    edges = np.sort(np.concatenate([s.ravel() for s in spans]), kind="stable")
    if edges.size:
        edges = edges[np.concatenate(([True], edges[1:] != edges[:-1]))]
    times = np.append(edges, max(total_ps, int(edges[-1])) if len(edges) else total_ps)
    busy = []
    for s in spans:
        delta = (np.bincount(np.searchsorted(times, s[:, 0]), minlength=len(times))
                 - np.bincount(np.searchsorted(times, s[:, 1]), minlength=len(times)))
        # Intervals open during segment i: the changes up to its start, times[i - 1].
        busy.append(np.concatenate(([0], np.cumsum(delta)[:-1])) > 0)
    tlm, dlm, mon, dec = busy
    length = np.diff(times, prepend=0)
    kinds = ("overlap", "verification", "prediction", "monitoring", "decision_making", "idle")
    kind = np.select([tlm & dlm, tlm, dlm, mon, dec], range(5), 5)
    return {k: int(length[kind == kinds.index(k)].sum()) for k in BREAKDOWN_ORDER}


SPREAD = ("p50", "p99", "max")
# The CSV columns of a record (results.csv): a nested field's as ``field.key``.
CSV_FIELDS = ("system", "pair", "batch", "draft_length", "sequence_length", "tokens_per_s",
              "tokens_per_joule", "tokens_per_joule_dynamic", "time_s", "energy_j",
              "energy_static_j", "acceptance_rate", "pim_op_fraction",
              "utilization.gpu", "utilization.pim", "verification_comm_share",
              *(f"tokens.{k}" for k in ("generated", "drafted", "accepted", "rejected", "discarded")),
              *(f"request_latency_s.{k}" for k in SPREAD),
              *(f"request_time_per_token_s.{k}" for k in SPREAD), "request_rate_jain",
              *(f"latency_breakdown.{k}" for k in BREAKDOWN_ORDER))


@dataclass
class RunRecord:
    """One run's record: its fields, in order, are the record's keys (``to_dict``, saved as
    JSON; one with default None is left out while None). Built by ``run_record``."""
    system: str
    pair: str
    batch: int
    draft_length: int | None
    sequence_length: int | None
    tokens_per_s: float
    tokens_per_joule: float            # dynamic + static energy
    tokens_per_joule_dynamic: float    # dynamic energy only (AttAcc's accounting)
    time_s: float
    energy_j: float                    # dynamic + static
    energy_static_j: float             # of energy_j: every GPU's and stack's static power x time
    acceptance_rate: float
    pim_op_fraction: float
    utilization: dict[str, float]
    verification_comm_share: float
    tokens: TokenCounts
    request_latency_s: dict[str, float]
    request_time_per_token_s: dict[str, float]
    request_rate_jain: float
    latency_breakdown: dict[str, float]
    window_s: float
    run_tokens_per_s: float
    run_tokens_per_joule: float
    verification_s: float
    verification_comm_s: float         # = the next two: all-reduces between devices (NVLink) and
    verification_allreduce_s: float    # the GPU <-> PIM transfers within a device
    verification_transfer_s: float
    verification_compute_s: float
    verification_passes: int
    mapping: dict[str, str]
    # What the run's setup chose (sim/systems/run.py), where it applies.
    scheduler_thresholds: dict[str, int] | None = None
    verify_capacity: int | None = None
    capacity_rule: str | None = None
    aging_passes: int | None = None
    issue_rule: str | None = None
    system_config: str | None = None
    tau: float | None = None
    stop: str | None = None
    acceptance_table: list[int] | None = None
    stop_param: float | None = None
    plus: dict | None = None          # SADDLE+'s Manager tables (sim/systems/resolve.py)

    def to_dict(self) -> dict:
        return {f.name: asdict(value) if isinstance(value, TokenCounts) else value
                for f in fields(self)
                if (value := getattr(self, f.name)) is not None or f.default is not None}


@dataclass
class Measured:
    """What a run measured, in integer units, for ``run_record``."""
    time_ps: int
    energy_fj: int                     # dynamic + static
    static_fj: int                     # of energy_fj
    tokens: TokenCounts
    breakdown_ps: dict[str, int]
    gpu_busy_ps: int
    pim_busy_ps: int
    n_devices: int
    pim_ops: int
    total_ops: int
    request_latency_ps: list[int]
    request_tokens: list[int]          # output tokens of each request, as request_latency_ps
    window_ps: int
    window_tokens: int
    window_energy_fj: int              # dynamic + static, over the window
    window_static_fj: int
    verify_ps: int = 0
    verify_comm_ps: int = 0
    verify_allreduce_ps: int = 0
    passes: int = 0


def run_record(system: str, pair: str, batch: int, draft_length: int | None,
               mapping: dict[str, str], m: Measured) -> RunRecord:
    seconds = m.time_ps / PS_PER_S
    lat = np.asarray(m.request_latency_ps, dtype=np.float64) / PS_PER_S
    per_token = lat / np.asarray(m.request_tokens, dtype=np.float64)
    tokens, busy = m.tokens, m.time_ps * m.n_devices
    dynamic = m.window_energy_fj - m.window_static_fj
    verified = tokens.accepted + tokens.rejected
    return RunRecord(
        system=system, pair=pair, batch=batch, draft_length=draft_length, sequence_length=None,
        tokens_per_s=m.window_tokens / (m.window_ps / PS_PER_S) if m.window_ps else 0.0,
        tokens_per_joule=m.window_tokens / (m.window_energy_fj * 1e-15)
        if m.window_energy_fj else 0.0,
        tokens_per_joule_dynamic=m.window_tokens / (dynamic * 1e-15) if dynamic else 0.0,
        time_s=seconds, energy_j=m.energy_fj * 1e-15, energy_static_j=m.static_fj * 1e-15,
        acceptance_rate=tokens.accepted / verified if verified else 0.0,
        pim_op_fraction=m.pim_ops / m.total_ops if m.total_ops else 0.0,
        utilization={"gpu": m.gpu_busy_ps / busy if busy else 0.0,
                     "pim": m.pim_busy_ps / busy if busy else 0.0},
        verification_comm_share=m.verify_comm_ps / m.verify_ps if m.verify_ps else 0.0,
        tokens=tokens, request_latency_s=_spread(lat), request_time_per_token_s=_spread(per_token),
        request_rate_jain=jain_index(1.0 / per_token),
        latency_breakdown={k: v / PS_PER_S for k, v in m.breakdown_ps.items()},
        window_s=m.window_ps / PS_PER_S,
        run_tokens_per_s=tokens.generated / seconds if seconds else 0.0,
        run_tokens_per_joule=tokens.generated / (m.energy_fj * 1e-15) if m.energy_fj else 0.0,
        verification_s=m.verify_ps / PS_PER_S, verification_comm_s=m.verify_comm_ps / PS_PER_S,
        verification_allreduce_s=m.verify_allreduce_ps / PS_PER_S,
        verification_transfer_s=(m.verify_comm_ps - m.verify_allreduce_ps) / PS_PER_S,
        verification_compute_s=(m.verify_ps - m.verify_comm_ps) / PS_PER_S,
        verification_passes=m.passes, mapping=dict(mapping))


def _spread(values: np.ndarray) -> dict[str, float]:
    """p50, p99 and max of per-request values (0.0 for a run without requests)."""
    if not values.size:
        return dict.fromkeys(SPREAD, 0.0)
    return {"p50": float(np.percentile(values, 50)), "p99": float(np.percentile(values, 99)),
            "max": float(values.max())}


def jain_index(x: np.ndarray) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2) of non-negative values (1.0 when empty)."""
    if not x.size:
        return 1.0
    return float(x.sum() ** 2 / (x.size * (x * x).sum()))
