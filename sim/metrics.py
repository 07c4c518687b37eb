"""Metrics of one simulated run: throughput, energy efficiency, latency breakdown, device
utilization, PIM operation share, token accounting (conserved, checked) and request latency.

Latency breakdown: every instant of the run is charged to exactly one category, so the parts
add up to the run time. ``overlap`` = a TLM pass and at least one DLM step at once;
``verification`` = TLM only; ``prediction`` = DLM only; ``monitoring`` = only the Controller
(softmax, multiply, compare after a prediction step); ``decision_making`` = only the Shared
Pool's selection before a pass; ``idle`` = nothing (e.g. waiting on a link-bound step tail).

Throughput is measured over the full-batch window: from the start until the first time a
request finishes and no request is left to take its slot (continuous batching), so the tail
in which the batch empties, which would make every batch size look like a small one, is
simulated (tokens, latency, conservation) but not averaged in. ``tokens_per_s`` and
``tokens_per_joule`` use the window (energy: dynamic energy of the steps started in it plus
static power over it); ``run_tokens_per_s`` / ``run_tokens_per_joule`` the whole run. With
no more requests than the batch size the window ends at the first completion.

Per-request service (fairness of verification): for every request, its end-to-end latency L
(admission to its last committed token, whole run) and its output length n give its time per
output token L / n and its token rate n / L. Records carry p50, p99 and max of L and of L / n
(``numpy.percentile``, linear interpolation) and Jain's fairness index of the token rates,
J = (sum x)^2 / (N sum x^2): 1 when every request is served at the same rate, 1/N when one
request gets all of it. Rates are compared across requests of different lengths on purpose:
a per-token rate does not reward a long request for being long.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from sim.engine.devices import IntervalLog
from sim.errors import SaddleError

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

    def discard(self, reason: str, n: int = 1) -> None:
        self.discarded += n
        self.discard_reasons[reason] = self.discard_reasons.get(reason, 0) + n

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
    # Every instant where some lane starts or ends (between two, nothing changes), then the
    # end of the run; segment i ends at times[i]. (Sorted, then duplicates dropped: what
    # np.unique returns, which takes 15 times longer on numpy 2's hashing path.) A lane's
    # intervals are logged in time order, so the edges are a few long sorted runs: the stable
    # sort (timsort) merges them in half the time of the default quicksort, same values.
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


@dataclass
class RunMetrics:
    system: str
    pair: str
    batch: int
    draft_length: int | None
    time_ps: int
    energy_fj: int                     # dynamic + static, femtojoules
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
    window_energy_fj: int
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        seconds = self.time_ps / PS_PER_S
        lat = np.asarray(self.request_latency_ps, dtype=np.float64) / PS_PER_S
        per_token = lat / np.asarray(self.request_tokens, dtype=np.float64)
        tokens = asdict(self.tokens)
        return {
            "system": self.system,
            "pair": self.pair,
            "batch": self.batch,
            "draft_length": self.draft_length,
            "time_s": seconds,
            "tokens_per_s": self.window_tokens / (self.window_ps / PS_PER_S) if self.window_ps else 0.0,
            "tokens_per_joule": self.window_tokens / (self.window_energy_fj * 1e-15)
            if self.window_energy_fj else 0.0,
            "window_s": self.window_ps / PS_PER_S,
            "run_tokens_per_s": self.tokens.generated / seconds if seconds else 0.0,
            "run_tokens_per_joule": self.tokens.generated / (self.energy_fj * 1e-15) if self.energy_fj else 0.0,
            "energy_j": self.energy_fj * 1e-15,
            "latency_breakdown": {k: v / PS_PER_S for k, v in self.breakdown_ps.items()},
            "utilization": {
                "gpu": self.gpu_busy_ps / (self.time_ps * self.n_devices) if self.time_ps else 0.0,
                "pim": self.pim_busy_ps / (self.time_ps * self.n_devices) if self.time_ps else 0.0,
            },
            "pim_op_fraction": self.pim_ops / self.total_ops if self.total_ops else 0.0,
            "tokens": tokens,
            "acceptance_rate": self.tokens.accepted / (self.tokens.accepted + self.tokens.rejected)
            if self.tokens.accepted + self.tokens.rejected else 0.0,
            "request_latency_s": _spread(lat),
            "request_time_per_token_s": _spread(per_token),
            "request_rate_jain": jain_index(1.0 / per_token),
            **self.extra,
        }


def _spread(values: np.ndarray) -> dict[str, float]:
    """p50, p99 and max of per-request values (0.0 for a run without requests)."""
    if not values.size:
        return {"p50": 0.0, "p99": 0.0, "max": 0.0}
    return {"p50": float(np.percentile(values, 50)), "p99": float(np.percentile(values, 99)),
            "max": float(values.max())}


def jain_index(x: np.ndarray) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2) of non-negative values (1.0 when empty)."""
    if not x.size:
        return 1.0
    return float(x.sum() ** 2 / (x.size * (x * x).sum()))
