"""Seeded constrained-random sequences of legal Manager transactions.

The generator plays the Manager's environment (DLM, TLM, the simulator's request handling)
against the model itself, so every transaction is legal in the model's state; a refused token
is retried later with the same token and probability, as a stalled DLM would. The RTL
testbenches replay the inputs and compare the outputs with the model's events.

Phases force the corner cases: ``flood`` (drafting without verifying: full Shared Pool),
``long_lock`` (a verification held open while the DLM drafts: full Eager Pools, Issue while
locked), ``reject_first``, ``accept_all``, ``ties`` (probabilities from a tiny set: equal H
across and within requests) and ``steady``.

SADDLE+ (``plus_config``): a seeded random pass-cost table, tau table and locked threshold for a
configuration, so that the same stimulus drives the planner (waits, short passes, the wait
bound), the tau table's switches and the locked threshold (``coverage``: ``planner_wait``,
``planner_short_pass``, ``tau_buckets``, ``query_while_locked``).
"""
from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable

from sim.manager.config import ManagerConfig
from sim.manager.controller import TAU_BUCKETS, RequestState, tau_bucket
from sim.manager.formats import PROB_ONE
from sim.manager.manager import Manager
from sim.manager.planner import COST_BUCKET, PassCosts
from sim.manager.softmax import SoftmaxParams
from sim.manager.transactions import (
    Admit,
    Admitted,
    Discarded,
    Drafted,
    DraftLogits,
    DraftToken,
    EndRound,
    Issued,
    Mapping,
    Moved,
    NotIssued,
    Pool,
    Refused,
    Resumed,
    Retire,
    Retired,
    RoundEnded,
    SchedulerQuery,
    Unlock,
    Unlocked,
    Verified,
    VerifyIssue,
    VerifyResult,
)

PHASES = ("steady", "flood", "long_lock", "reject_first", "accept_all", "ties")
VOCAB = 128256
TIE_PROBS = (PROB_ONE, PROB_ONE, 49152, 32768)

# Action weights per phase: draft, issue, result, query, admit/retire.
_WEIGHTS = {phase: (10, 3, 6, 1, 1) for phase in PHASES} | {
    "flood": (30, 1, 6, 1, 1),
    "long_lock": (20, 2, 1, 1, 1),
}


class _Environment:
    def __init__(self, config: ManagerConfig, seed: int, requests: int | None,
                 softmax: SoftmaxParams | None):
        self.rng = random.Random(seed)
        self.config = config
        self.softmax = softmax
        self.manager = Manager(config, softmax)
        self.requests = min(requests or config.max_requests, config.max_requests)
        self.retry: dict[int, tuple] = {}     # request -> refused (token, prob) or (logits,)
        self.output_len: dict[int, int] = {}           # request -> accepted tokens still to emit
        self.phase = "steady"
        self.phase_left = 0
        self.pairs: list[tuple[object, list]] = []

    def apply(self, txn) -> list:
        events = self.manager.apply(txn)
        self.pairs.append((txn, events))
        for e in events:
            if isinstance(e, Verified):
                self.output_len[e.request] -= e.accepted + 1
            elif isinstance(e, (Drafted, Resumed)):
                self.retry.pop(e.request, None)    # taken, or its round is over
            elif isinstance(e, Retired):
                self.output_len.pop(e.request)
                self.retry.pop(e.request, None)
        return events

    def prob(self) -> int:
        rng = self.rng
        if self.phase == "ties":
            return rng.choice(TIE_PROBS)
        roll = rng.random()
        if roll < 0.45:
            return rng.randint(58000, PROB_ONE)       # confident DLM: long drafts
        if roll < 0.55:
            return PROB_ONE
        if roll < 0.6:
            return rng.randint(0, 2000)               # stops at once
        return rng.randint(0, PROB_ONE)

    def logits(self) -> tuple[int, ...]:
        """Raw LOGIT vectors: flat (low probability), peaked (near 1.0), tied maxima."""
        assert self.softmax is not None
        rng, n = self.rng, self.softmax.vocab
        shape = rng.random()
        if shape < 0.3:
            return tuple(rng.randint(-256, 256) for _ in range(n))
        xs = [rng.randint(-4096, 1024) for _ in range(n)]
        top = rng.randint(2048, 8192) if shape < 0.8 else max(xs)
        for i in rng.sample(range(n), min(n, 2 if shape >= 0.8 else 1)):
            xs[i] = top
        return tuple(xs)

    def step(self) -> None:
        rng = self.rng
        if self.phase_left == 0:
            self.phase = rng.choice(PHASES)
            self.phase_left = rng.randint(40, 250)
        self.phase_left -= 1
        m = self.manager
        locked = m.shared_pool.locked
        drafting = [r for r, s in m.controller.slots.items() if s.state is RequestState.DRAFTING]
        awaiting = m.awaiting_results()
        free_slots = [r for r in range(self.requests) if r not in m.controller.slots]
        retirable = [r for r, left in self.output_len.items() if left <= 0 and r not in m.requests_in_pass]
        w_draft, w_issue, w_result, w_query, w_life = _WEIGHTS[self.phase]
        endable = [r for r in drafting if m.controller.slots[r].t > 0 and r not in self.retry]
        actions = [("draft", w_draft if drafting else 0),
                   ("end", 0.3 if endable else 0),
                   ("issue", w_issue * (1 if not locked else 0.2)),
                   ("result", w_result if locked else 0),
                   ("query", w_query),
                   ("admit", w_life * 3 if free_slots else 0),
                   ("retire", w_life * 3 if retirable else 0)]
        action = rng.choices([a for a, _ in actions], [w for _, w in actions])[0]
        if action == "draft":
            r = rng.choice(sorted(drafting))
            slot = m.controller.slots[r]
            payload = self.retry.get(r)
            if payload is None:
                use_logits = self.softmax is not None and rng.random() < 0.3
                payload = (self.logits(),) if use_logits else (rng.randrange(VOCAB), self.prob())
            kind = DraftLogits if len(payload) == 1 else DraftToken
            if isinstance(self.apply(kind(r, slot.microbatch, slot.t + 1, *payload))[0], Refused):
                self.retry[r] = payload
        elif action == "end":
            self.apply(EndRound(rng.choice(sorted(endable))))
        elif action == "issue":
            capacity = rng.choice((1, 2, 4, 8, 16, 32, 64, self.config.shared_entries,
                                   rng.randint(1, self.config.shared_entries)))
            idle = rng.random() < (0.2 if self.phase == "flood" else 0.6)
            self.apply(VerifyIssue(idle, capacity))
        elif action == "result":
            if awaiting:
                r = rng.choice(awaiting)
                in_flight = len(m.shared_pool.in_flight(r))
                if self.phase == "reject_first":
                    accepted = 0
                elif self.phase == "accept_all":
                    accepted = in_flight
                else:
                    accepted = rng.choice((0, in_flight, in_flight, rng.randint(0, in_flight)))
                self.apply(VerifyResult(r, accepted, rng.randrange(VOCAB)))
            else:
                self.apply(Unlock())
        elif action == "query":
            self.apply(SchedulerQuery(rng.randrange(self.config.micro_batches)))
        elif action == "admit":
            r = rng.choice(free_slots)
            self.output_len[r] = rng.randint(1, 60)
            self.apply(Admit(r, rng.randrange(self.config.micro_batches)))
        else:
            self.apply(Retire(rng.choice(sorted(retirable))))

    def finish(self) -> None:
        """Close the in-flight verification and retire every request: nothing stays pending."""
        m = self.manager
        if m.shared_pool.locked:
            for r in m.awaiting_results():
                self.apply(VerifyResult(r, len(m.shared_pool.in_flight(r)), 0))
            self.apply(Unlock())
        for r in sorted(m.controller.slots):
            self.apply(Retire(r))


def generate_with_events(config: ManagerConfig, seed: int, length: int, *,
                         requests: int | None = None, finish: bool = True,
                         softmax: SoftmaxParams | None = None
                         ) -> tuple[list[tuple[object, list]], Manager]:
    """``length`` random transactions (plus the closing ones with ``finish``) and the model's
    events for each; also the model, for its final state and conservation check.

    ``requests`` bounds the request ids used (default: every Controller slot). With ``softmax``
    about 30 % of the draft tokens arrive as DraftLogits of ``softmax.vocab`` logits.
    """
    if length < 0:
        raise ValueError(f"length must be >= 0, found {length}")
    env = _Environment(config, seed, requests, softmax)
    for _ in range(length):
        env.step()
    if finish:
        env.finish()
    return env.pairs, env.manager


def plus_config(config: ManagerConfig, seed: int) -> ManagerConfig:
    """``config`` with SADDLE+'s three pieces drawn from ``seed``: FC costs rising by bucket (a
    step to 3x the per-request cost, so short passes and waits both win at times), a wait bound
    of 0-4, the planner's capacity and issue rules (each off with probability 0.2), tau rising with
    the load, a locked DLM FC threshold."""
    rng = random.Random(seed)
    per_request = rng.randint(20, 400)
    buckets = -(-config.shared_entries // COST_BUCKET) + 1
    fc, cost = [], rng.randint(0, 4 * per_request)
    for _ in range(buckets):
        fc.append(cost)
        cost += rng.randint(0, 3 * per_request)
    taus = sorted(rng.randint(0, PROB_ONE * 3 // 4) for _ in range(TAU_BUCKETS))
    return config.replace(
        pass_costs=PassCosts(fc=tuple(fc), per_request=per_request, wait_bound=rng.randint(0, 4),
                             select=rng.random() > 0.2, issue=rng.random() > 0.2),
        tau_table=tuple(taus), dlm_fc_threshold_locked=rng.randint(0, config.max_requests))


def generate(config: ManagerConfig, seed: int, length: int, **kw) -> list:
    """The input transactions only (see ``generate_with_events``)."""
    return [txn for txn, _ in generate_with_events(config, seed, length, **kw)[0]]


# The functional-coverage corners `saddle hw coverify` reports (keys of ``coverage``), in the
# order of hw/README.md's coverage table.
CORNERS = {
    "refused_shared": "Shared Pool full: a draft refused",
    "refused_eager": "Eager Pool full: a draft refused",
    "refusal_released": "back-pressure released: a refused token taken on a retry",
    "tie_across_requests": "tie on H across requests, in one verification",
    "tie_same_request": "tie on H within a request, in one verification",
    "reject_first": "reject at the first position",
    "reject_later": "reject at a later position",
    "moved": "eager tokens moved to the Shared Pool (one Moved event per request)",
    "discarded_eager_after_reject": "eager tokens discarded after a reject",
    "unlock_nothing_pooled": "Unlock with the Eager Pools empty (nothing to move or discard)",
    "flip_dlm_fc_to_gpu": "Scheduler: DLM FC of a micro-batch flips PIM -> GPU",
    "flip_dlm_fc_to_pim": "Scheduler: DLM FC of a micro-batch flips GPU -> PIM",
    "flip_tlm_attention_to_gpu": "Scheduler: TLM attention flips PIM -> GPU",
    "flip_tlm_attention_to_pim": "Scheduler: TLM attention flips GPU -> PIM",
    "retire_during_pass": "Retire while a verification is in flight",
}


def coverage(pairs: Iterable[tuple[object, list]]) -> Counter:
    """How often each corner case occurred in a sequence (tests assert they all do); every key
    of ``CORNERS`` is present. Corners that depend on the state before a transaction (eager
    tokens held, verification in flight, the Scheduler's previous decision) are tracked from
    the events, so a sequence of (input, events) pairs is all it needs."""
    cov: Counter = Counter({corner: 0 for corner in CORNERS})
    streak: Counter = Counter()
    refused: set[tuple[int, int]] = set()          # (request, position) refused, not yet taken
    eager: dict[int, set[int]] = {}                # request -> positions held in an Eager Pool
    device: dict[tuple, object] = {}               # (op, micro-batch) -> the latest Mapping's device
    in_pass = False
    live = 0                                       # admitted requests (the tau table's load)
    waiting = 0                                    # tokens waiting in the Shared Pool
    buckets: set[int] = set()
    for txn, events in pairs:
        if isinstance(txn, Unlock) and not any(eager.values()):
            cov["unlock_nothing_pooled"] += 1
        elif isinstance(txn, Retire) and in_pass:
            cov["retire_during_pass"] += 1
        for e in events:
            if isinstance(e, Admitted):
                live += 1
            elif isinstance(e, Retired):
                live -= 1
            if isinstance(e, Refused):
                cov[f"refused_{e.pool.value}"] += 1
                streak[e.request] += 1
                cov["max_refusal_streak"] = max(cov["max_refusal_streak"], streak[e.request])
                refused.add((e.request, e.position))
            elif isinstance(e, Drafted):
                buckets.add(tau_bucket(live))
                streak[e.request] = 0
                if (e.request, e.position) in refused:
                    cov["refusal_released"] += 1
                if e.pool is Pool.EAGER:
                    eager.setdefault(e.request, set()).add(e.position)
                else:
                    waiting += 1
            elif isinstance(e, Mapping):
                if in_pass and isinstance(txn, SchedulerQuery):
                    cov["query_while_locked"] += 1
                key = (e.op, e.microbatch)
                if device.get(key, e.device) is not e.device:
                    cov[f"flip_{e.op.value}_to_{e.device.value}"] += 1
                device[key] = e.device
            elif isinstance(e, Unlocked):
                in_pass = False
            elif isinstance(e, Verified):
                if e.rejected and e.accepted == 0:
                    cov["reject_first"] += 1
                elif not e.rejected:
                    cov["all_accepted"] += 1
                else:
                    cov["reject_later"] += 1
            elif isinstance(e, Issued):
                in_pass = True
                cov["issued"] += 1
                for a, b in zip(e.tokens, e.tokens[1:]):
                    if a.h == b.h:
                        cov["tie_same_request" if a.request == b.request else "tie_across_requests"] += 1
                if isinstance(txn, VerifyIssue) and len(e.tokens) == txn.capacity:
                    cov["issued_full_pass"] += 1
                if isinstance(txn, VerifyIssue) and len(e.tokens) < min(txn.capacity, waiting):
                    cov["planner_short_pass"] += 1
                waiting -= len(e.tokens)
            elif isinstance(e, NotIssued):
                cov[f"not_issued_{e.reason.value}"] += 1
                if e.reason.value == "below_capacity" and isinstance(txn, VerifyIssue) and txn.tlm_idle:
                    cov["planner_wait"] += 1
            elif isinstance(e, (Discarded, Moved)):
                held = eager.get(e.request, set())
                if isinstance(e, Moved):
                    waiting += len(e.positions)
                elif e.reason.value in ("shared_after_reject", "request_retired"):
                    waiting -= sum(p not in held for p in e.positions)
                held.difference_update(e.positions)
                if isinstance(e, Discarded):
                    cov[f"discarded_{e.reason.value}"] += len(e.positions)
            if isinstance(e, (Moved, Resumed, Retired, RoundEnded)):
                cov[type(e).__name__.lower()] += 1
            if isinstance(e, (Drafted, Resumed, Retired)):
                refused = {(r, p) for r, p in refused if r != e.request}
    cov["tau_buckets"] = len(buckets)
    return cov
