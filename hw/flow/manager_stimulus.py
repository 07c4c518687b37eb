"""The Manager RTL's stimulus, shared by its tests (tests/hw/manager/test_manager.py) and by
`saddle hw mutate` (hw/flow/mutate.py): the reduced configuration, the seeded random
sequences, and two directed sequences.

Each sequence is a list of (input transaction, the model's events), the form
`hw.flow.manager_replay.replay` compares the RTL against. Pure Python: no Amaranth import.
"""
from __future__ import annotations

from hw.flow.manager_random import generate_with_events, plus_config
from sim.manager.config import ManagerConfig
from sim.manager.manager import Manager as Model
from sim.manager.planner import PassCosts
from sim.manager.softmax import SoftmaxParams
from sim.manager.transactions import (
    Admit,
    Admitted,
    Device,
    Discarded,
    Drafted,
    DraftToken,
    EndRound,
    Issued,
    Locked,
    Mapping,
    Moved,
    NotIssued,
    NotIssuedReason,
    Op,
    Pool,
    Resumed,
    Retire,
    Retired,
    SchedulerQuery,
    Unlock,
    Unlocked,
    Verified,
    VerifyIssue,
    VerifyResult,
)
from sim.manager.transactions import DiscardReason as R
from sim.manager.transactions import SelectedToken as S

# 8 slots, 16 + 12 entries (4 per micro-batch): small enough that the pools fill within a few
# hundred transactions, and the Amaranth simulator runs 700 transactions in seconds.
SMALL = ManagerConfig(max_requests=8, max_draft_len=8, tau=30000, shared_entries=16, eager_entries=12,
                      micro_batches=3, dlm_fc_threshold=2, tlm_attention_threshold=2)
SOFTMAX = SoftmaxParams(lanes=2, vocab=16, exp_frac_bits=12)
RANDOM_SEEDS = (1, 2)
RANDOM_LENGTH = 700

# Empty, a tie within a request, Issue while locked, eager drafting, a reject at the first token,
# everything accepted, the eager move, the new round and retirement: every event worked out by
# hand (SMALL: tau 30000, thresholds 2).
ROUND_BY_HAND = [
    (VerifyIssue(True, 4), [NotIssued(NotIssuedReason.EMPTY, 0)]),
    (Admit(0, 0), [Admitted(0, 0)]),
    (Admit(1, 1), [Admitted(1, 1)]),
    (DraftToken(0, 0, 1, 10, 65536), [Drafted(0, 1, Pool.SHARED, 65536, False)]),
    (DraftToken(0, 0, 2, 11, 32768), [Drafted(0, 2, Pool.SHARED, 32768, False)]),
    # 32768 * 32768 >> 16 = 16384 < tau = 30000: stop, the token is still drafted.
    (DraftToken(0, 0, 3, 12, 32768), [Drafted(0, 3, Pool.SHARED, 16384, True)]),
    (DraftToken(1, 1, 1, 20, 49152), [Drafted(1, 1, Pool.SHARED, 49152, False)]),
    (DraftToken(1, 1, 2, 21, 49152), [Drafted(1, 2, Pool.SHARED, 36864, False)]),
    (DraftToken(1, 1, 3, 22, 65536), [Drafted(1, 3, Pool.SHARED, 36864, False)]),
    (VerifyIssue(False, 8), [NotIssued(NotIssuedReason.BELOW_CAPACITY, 6)]),
    # Descending H; the tie at 36864 within request 1 goes by position. 4 tokens of 2
    # requests: 4 >= threshold 2 * 2, attention on the GPU.
    (VerifyIssue(False, 4), [Issued(0, (S(0, 1, 10, 65536), S(1, 1, 20, 49152), S(1, 2, 21, 36864),
                                        S(1, 3, 22, 36864))),
                             Locked(0), Mapping(Op.TLM_ATTENTION, Device.GPU, 4, 2, -1)]),
    (VerifyIssue(True, 4), [NotIssued(NotIssuedReason.LOCKED, 2)]),
    (DraftToken(1, 1, 4, 23, 65536), [Drafted(1, 4, Pool.EAGER, 36864, False)]),
    (VerifyResult(0, 0, 77), [Verified(0, 1, 0, True), Discarded(0, (2, 3), R.SHARED_AFTER_REJECT)]),
    (VerifyResult(1, 3, 88), [Verified(1, 1, 3, False)]),
    (Unlock(), [Unlocked(0), Moved(1, 1, (4,)), Resumed(0, 77, True)]),
    (SchedulerQuery(1), [Mapping(Op.DLM_FC, Device.PIM, 1, 1, 1)]),
    (Retire(1), [Discarded(1, (4,), R.REQUEST_RETIRED), Retired(1)]),
]

# The boundaries and corners the random and real-trace stimulus reach rarely or never (see the
# coverage table of hw/README.md), on SMALL: H exactly at tau (continues), both Scheduler
# thresholds met with equality and both flipping each way, a retirement during a verification
# while another request holds an eager token, a reject after an accepted token, an Unlock with
# nothing pooled, a round stopped by its length alone (H still above tau), a full Shared Pool
# refusing a draft that is taken on its retry.
CORNER_INPUTS = [
    Admit(0, 0), Admit(1, 0), Admit(2, 1),
    SchedulerQuery(0),                              # 2 drafting >= 2: GPU
    DraftToken(0, 0, 1, 100, 30000),                # H = 30000 = tau: not below, drafting goes on
    DraftToken(0, 0, 2, 101, 65536),                # H stays at tau
    DraftToken(0, 0, 3, 102, 65535),                # H = 29999 < tau: stop
    SchedulerQuery(0),                              # 1 drafting < 2: PIM
    DraftToken(1, 0, 1, 110, 65536), DraftToken(1, 0, 2, 111, 65536),      # a tie within request 1
    DraftToken(2, 1, 1, 120, 49152), DraftToken(2, 1, 2, 121, 49152),
    VerifyIssue(True, 4),                           # 4 tokens of 2 requests: 4 = 2 x 2, GPU
    DraftToken(1, 0, 3, 112, 65536),                # locked: to the Eager Pool
    Retire(0),                                      # during the pass, request 1 holding an eager token
    VerifyResult(1, 1, 113),                        # accepted 1 of 2: rejected at its second token
    VerifyResult(2, 0, 122),                        # rejected at the first token
    Unlock(),                                       # request 1's eager token is discarded
    DraftToken(2, 1, 1, 130, 40000),
    VerifyIssue(True, 4),                           # 1 token of 1 request: 1 < 2, PIM
    VerifyResult(2, 1, 131),
    Unlock(),                                       # the Eager Pools are empty
    Admit(3, 0),
    SchedulerQuery(0),                              # requests 1 and 3 drafting: GPU again
    DraftToken(1, 0, 1, 140, 65536), DraftToken(1, 0, 2, 141, 65536),
    VerifyIssue(True, 2),                           # 2 tokens of 1 request: GPU again
    VerifyResult(1, 2, 142),
    Unlock(),
    # H stays 1.0: the eighth token (t = max_draft_len) stops the round by its length.
    *(DraftToken(3, 0, t, 150 + t, 65536) for t in range(1, SMALL.max_draft_len + 1)),
    *(DraftToken(1, 0, t, 160 + t, 60000) for t in range(3, 9)),
    DraftToken(2, 1, 2, 172, 60000), DraftToken(2, 1, 3, 173, 60000),      # the 16th entry: full
    DraftToken(2, 1, 4, 174, 60000),                # refused: the Shared Pool is full
    VerifyIssue(False, 16),                         # every token in flight
    DraftToken(2, 1, 4, 174, 60000),                # the retry is taken (by the Eager Pool: locked)
    VerifyResult(3, 8, 180), VerifyResult(1, 5, 181), VerifyResult(2, 2, 182),
    Unlock(),
    Retire(1), Retire(2), Retire(3),
]


def random_pairs(seed: int):
    """The random sequence of ``seed`` on SMALL (about 30 % of the drafts as DraftLogits) and
    the model after it."""
    return generate_with_events(SMALL, seed, RANDOM_LENGTH, requests=SMALL.max_requests, softmax=SOFTMAX)


def corner_pairs() -> list[tuple[object, list]]:
    """``CORNER_INPUTS`` with the model's events."""
    model = Model(SMALL)
    return [(txn, model.apply(txn)) for txn in CORNER_INPUTS]


# The calibrated stop rule's acceptance table of the Manager tests and mutants: every entry
# different, so a wrong entry changes H; 1.0 (65536) in the last.
ACCEPTANCE_TABLE = (0, 3000, 7000, 11000, 15000, 19000, 23000, 27000, 31000, 35000, 39000, 43000, 47000,
                    52000, 60000, 65536)
VARIANT_LENGTH = 400


def calibrated_pairs(seed: int = RANDOM_SEEDS[0]):
    """A random sequence on SMALL with the acceptance table configured (the calibrated rule)."""
    config = SMALL.replace(acceptance_table=ACCEPTANCE_TABLE)
    return config, generate_with_events(config, seed, VARIANT_LENGTH, requests=config.max_requests,
                                        softmax=SOFTMAX)[0]


def aging_pairs(aging: int):
    """A random sequence on SMALL with Shared Pool aging K = ``aging`` (whose selections aging
    changes: the tests show the greedy model diverges on it)."""
    config = SMALL.replace(aging_passes=aging)
    return config, generate_with_events(config, 10 + aging, RANDOM_LENGTH, requests=config.max_requests,
                                        softmax=SOFTMAX)[0]


# SADDLE+ by hand (sim/manager/planner.py). PLAN_SMALL: SMALL with the pass planner (FC costs 0
# and 100 for 1-16 tokens, 50 per request, one wait at most). A token's value is
# (h_prev >> 8) + (last ? h >> 8 : 0); a prefix replaces the best iff E_k T_best > E_best T_k.
PLAN_SMALL = SMALL.replace(pass_costs=PassCosts(fc=(0, 100), per_request=50, wait_bound=1))
PLAN_BY_HAND = [
    (Admit(0, 0), [Admitted(0, 0)]),
    (Admit(1, 1), [Admitted(1, 1)]),
    (DraftToken(0, 0, 1, 10, 65536), [Drafted(0, 1, Pool.SHARED, 65536, False)]),    # value 256
    (DraftToken(0, 0, 2, 11, 32768), [Drafted(0, 2, Pool.SHARED, 32768, False)]),    # value 256
    (DraftToken(1, 1, 1, 20, 16384), [Drafted(1, 1, Pool.SHARED, 16384, True)]),     # 256 + 64 = 320
    # Prefixes (E, T): (256, 150), (512, 150) better, (832, 200) better (832 x 150 > 512 x 200).
    # Request 0 drafts on (G = 32768 >> 8 = 128, holding tokens): T' = fc[1] + 2 x 50 = 200 and
    # 832 x 200 < (832 + 128) x 200: wait.
    (VerifyIssue(True, 8), [NotIssued(NotIssuedReason.BELOW_CAPACITY, 3)]),
    # The wait bound (1) is reached: the best prefix, all 3; 3 tokens < 2 x 2 requests: PIM.
    (VerifyIssue(True, 8), [Issued(0, (S(0, 1, 10, 65536), S(0, 2, 11, 32768), S(1, 1, 20, 16384))),
                            Locked(0), Mapping(Op.TLM_ATTENTION, Device.PIM, 3, 2, -1)]),
    (VerifyResult(0, 2, 77), [Verified(0, 1, 2, False)]),
    (VerifyResult(1, 1, 88), [Verified(1, 1, 1, False)]),
    (Unlock(), [Unlocked(0), Resumed(1, 88, False)]),
    (DraftToken(0, 0, 3, 12, 65536), [Drafted(0, 3, Pool.SHARED, 32768, False)]),    # 32768 >> 8 = 128
    (DraftToken(1, 1, 1, 21, 65536), [Drafted(1, 1, Pool.SHARED, 65536, False)]),    # 256
    (DraftToken(1, 1, 2, 22, 65536), [Drafted(1, 2, Pool.SHARED, 65536, False)]),    # 256
    # Prefixes: (256, 150), (512, 150) better, (640, 200) not (640 x 150 < 512 x 200): 2 tokens.
    # G = 128 + 256, T' = fc[1] + 1 x 50 = 150: 512 x 150 < 896 x 150, wait (the count restarted).
    (VerifyIssue(True, 8), [NotIssued(NotIssuedReason.BELOW_CAPACITY, 3)]),
    # A short pass: 2 of the 3 tokens; 2 tokens >= 2 x 1 request: GPU.
    (VerifyIssue(True, 8), [Issued(1, (S(1, 1, 21, 65536), S(1, 2, 22, 65536))), Locked(1),
                            Mapping(Op.TLM_ATTENTION, Device.GPU, 2, 1, -1)]),
    (VerifyIssue(False, 8), [NotIssued(NotIssuedReason.LOCKED, 1)]),
    (VerifyResult(1, 2, 99), [Verified(1, 1, 2, False)]),
    (Unlock(), [Unlocked(1)]),
    # A drafting request with nothing pooled counts as a new request after one more step.
    (DraftToken(1, 1, 3, 23, 30000), [Drafted(1, 3, Pool.SHARED, 30000, False)]),     # H = tau: on
    # 2 waiting >= capacity 2: no wait; (128, 150), (384, 200) better: both, 2 < 2 x 2: PIM.
    (VerifyIssue(False, 2), [Issued(2, (S(0, 3, 12, 32768), S(1, 3, 23, 30000))), Locked(2),
                             Mapping(Op.TLM_ATTENTION, Device.PIM, 2, 2, -1)]),
    (VerifyResult(0, 1, 50), [Verified(0, 3, 1, False)]),
    (VerifyResult(1, 1, 51), [Verified(1, 3, 1, False)]),
    (Unlock(), [Unlocked(2)]),
    (DraftToken(0, 0, 4, 13, 65536), [Drafted(0, 4, Pool.SHARED, 32768, False)]),    # 128
    (DraftToken(0, 0, 5, 14, 65536), [Drafted(0, 5, Pool.SHARED, 32768, False)]),    # 128
    (DraftToken(0, 0, 6, 15, 58982), [Drafted(0, 6, Pool.SHARED, 29491, True)]),     # 128 + 115
    # Best: all 3 (E 499, T 150). Request 1 drafts on with nothing pooled: G = 30000 >> 8 = 117,
    # T' = fc[1] + (1 + 1) x 50 = 200; 499 x 200 >= 616 x 150: no wait, the pass goes (3 >= 2: GPU).
    (VerifyIssue(True, 8), [Issued(3, (S(0, 4, 13, 32768), S(0, 5, 14, 32768), S(0, 6, 15, 29491))),
                            Locked(3), Mapping(Op.TLM_ATTENTION, Device.GPU, 3, 1, -1)]),
    (VerifyResult(0, 3, 60), [Verified(0, 4, 3, False)]),
    (Unlock(), [Unlocked(3), Resumed(0, 60, False)]),
]

# TAU_SMALL: SMALL with a tau table (entry b for 1, 2, 3-4, ... admitted requests) and a DLM FC
# threshold of 1 while the Shared Pool is locked (2 otherwise); no planner.
TAU_SMALL = SMALL.replace(tau_table=(8000, 16000, 24000, 32000, 40000, 48000, 56000, 64000),
                          dlm_fc_threshold_locked=1)
TAU_BY_HAND = [
    (Admit(0, 0), [Admitted(0, 0)]),                                                  # 1: tau 8000
    (DraftToken(0, 0, 1, 10, 19661), [Drafted(0, 1, Pool.SHARED, 19661, False)]),
    (Admit(1, 0), [Admitted(1, 0)]),                                                  # 2: tau 16000
    (DraftToken(0, 0, 2, 11, 65536), [Drafted(0, 2, Pool.SHARED, 19661, False)]),
    (Admit(2, 1), [Admitted(2, 1)]),                                                  # 3: tau 24000
    (DraftToken(0, 0, 3, 12, 65536), [Drafted(0, 3, Pool.SHARED, 19661, True)]),
    (DraftToken(1, 0, 1, 20, 22938), [Drafted(1, 1, Pool.SHARED, 22938, True)]),
    (Retire(0), [Discarded(0, (1, 2, 3), R.REQUEST_RETIRED), Retired(0)]),           # 2: tau 16000
    (DraftToken(2, 1, 1, 30, 22938), [Drafted(2, 1, Pool.SHARED, 22938, False)]),
    (SchedulerQuery(1), [Mapping(Op.DLM_FC, Device.PIM, 1, 1, 1)]),                  # 1 < 2
    (VerifyIssue(False, 2), [Issued(0, (S(1, 1, 20, 22938), S(2, 1, 30, 22938))), Locked(0),
                             Mapping(Op.TLM_ATTENTION, Device.PIM, 2, 2, -1)]),
    (SchedulerQuery(1), [Mapping(Op.DLM_FC, Device.GPU, 1, 1, 1)]),                  # locked: 1 >= 1
    (VerifyResult(1, 1, 5), [Verified(1, 1, 1, False)]),
    (VerifyResult(2, 1, 6), [Verified(2, 1, 1, False)]),
    (Unlock(), [Unlocked(0), Resumed(1, 5, False)]),
    (SchedulerQuery(1), [Mapping(Op.DLM_FC, Device.PIM, 1, 1, 1)]),                  # unlocked again
]


PLUS_SEEDS = (12, 15)       # plus_pairs seeds whose planner both waits and cuts passes short


def plus_run():
    """The configuration and pairs of a saddle-plus run of the real trace (4 requests, the
    Manager of configs/manager_coverify.yaml): the pass costs, tau table and locked threshold the
    simulator gives it."""
    from common.paths import CONFIGS, TRACE_DATA
    from hw.flow.coverify import record_run
    from sim.systems.run import RunParams

    params = RunParams(system="saddle-plus", pair="opt-66b+opt-1.3b", batch=4, split="all", requests=4,
                       trace=str(TRACE_DATA / "smollm2-135m.self24.real.jsonl.gz"),
                       manager=str(CONFIGS / "manager_coverify.yaml"), source="SADDLE+ RTL checks")
    config, pairs, _ = record_run(params)
    return config, pairs


def plus_pairs(seed: int, length: int = VARIANT_LENGTH):
    """A random sequence on SMALL with SADDLE+'s pieces drawn from ``seed``
    (``manager_random.plus_config``): its configuration and pairs."""
    config = plus_config(SMALL, seed)
    return config, generate_with_events(config, seed, length, requests=config.max_requests, softmax=SOFTMAX)[0]


def illegal_pairs(seed: int, length: int = 300, rate: float = 0.3,
                  config: ManagerConfig = SMALL) -> list[tuple[object, object]]:
    """A random legal sequence on ``config`` (default SMALL) with illegal transactions mixed in: before a legal
    transaction, with probability ``rate``, a random transaction of any kind is tried on a twin
    of the model and kept if the model raises ProtocolError for it, as (transaction, the
    ProtocolError); legal pairs are (transaction, events). The model leaves its state unchanged
    on an illegal transaction, so the legal pairs' events are those of the legal sequence alone
    (checked here). The RTL answers each illegal one with its DONE beat alone and counts it on
    ``errors`` (`hw.flow.manager_replay.replay`)."""
    import random

    from sim.manager.formats import POOL_COUNT, PROB_ONE
    from sim.manager.transactions import ProtocolError

    legal, _ = generate_with_events(config, seed, length, requests=config.max_requests)
    rng = random.Random(seed)
    model = Model(config)
    pairs: list[tuple[object, object]] = []
    prefix: list = []

    def replayed(txns: list) -> Model:
        """A model in ``model``'s state, by the legal transactions so far (the compiled Manager's
        native classes cannot be deep-copied; a few hundred transactions replay in milliseconds)."""
        twin = Model(config)
        for t in txns:
            twin.apply(t)
        return twin

    n, mbs = config.max_requests, config.micro_batches
    for txn, events in legal:
        if rng.random() < rate:
            # Mostly requests with state (admitted, in the verification), so that the checks
            # past "not admitted" are reached too.
            admitted, passing = sorted(model.controller.slots), sorted(model._in_pass)
            r = rng.choice(passing if passing and rng.random() < 0.5 else
                           admitted if admitted and rng.random() < 0.8 else range(n + 2))
            slot = model.controller.slots.get(r)
            t = slot.t if slot else 0
            prob = PROB_ONE + 1 + rng.randrange(1000) if rng.random() < 0.1 else rng.randrange(PROB_ONE + 1)
            candidate = rng.choice([
                Admit(r, rng.randrange(mbs + 1)),
                DraftToken(r, slot.microbatch if slot and rng.random() < 0.8 else rng.randrange(mbs + 1),
                           t + rng.choice((0, 2, 3)), rng.randrange(1000), prob),
                DraftToken(r, slot.microbatch if slot else 0, t + 1, rng.randrange(1000), prob),
                VerifyIssue(rng.random() < 0.5, rng.choice((0, 1 + rng.randrange(POOL_COUNT.max_raw)))),
                VerifyResult(r, rng.randrange(5), rng.randrange(1000)),
                VerifyResult(r, rng.randrange(5), rng.randrange(1000)),
                Unlock(), SchedulerQuery(rng.randrange(mbs + 2)), EndRound(r), Retire(r),
            ])
            try:
                replayed(prefix).apply(candidate)
            except ProtocolError as exc:
                pairs.append((candidate, exc))
        assert model.apply(txn) == events
        pairs.append((txn, events))
        prefix.append(txn)
    return pairs
