"""The Manager model's fast paths against the plain arithmetic and the plain calls they stand
for: ``quantize_prob``'s common case, ``Controller.advance`` with ``update_h`` and ``stops``
written out, ``SharedPool.insert_all`` (an Eager Pool's drain), ``Manager.query``'s answer
memoized per drafting count, and ``Manager.issue``'s positions in the Issued event's order."""
import math
import random

import pytest

from hw.flow.manager_random import generate
from sim.manager import Manager
from sim.manager.controller import STOPPED, Controller, acceptance_bin, stops, update_h
from sim.manager.formats import PROB_ONE, quantize_prob
from sim.manager.manager import positions_by_request
from sim.manager.scheduler import dlm_fc_estimate
from sim.manager.shared_pool import PoolEntry, SharedPool
from sim.manager.transactions import Issued, Mapping, Op, SchedulerQuery, VerifyIssue
from tests.sim.manager.helpers import config


def _reference_quantize(x: float) -> int:
    """quantize_prob before its fast path: the clamps first, then floor(x * 65536 + 0.5) in
    floats."""
    if x >= 1.0:
        return PROB_ONE
    if x <= 0.0:
        return 0
    return math.floor(x * PROB_ONE + 0.5)


EDGES = [0.0, -0.0, 5e-324, 1e-300, 0.5 / PROB_ONE, math.nextafter(0.5 / PROB_ONE, 0),
         math.nextafter(0.5 / PROB_ONE, 1), 1.5 / PROB_ONE, 0.5, math.nextafter(1.0, 0),
         1.0 - 0.5 / PROB_ONE, math.nextafter(1.0 - 0.5 / PROB_ONE, 0), 1.0, math.nextafter(1.0, 2), 2.0,
         -1e-9, -1.0, math.inf, -math.inf]


@pytest.mark.parametrize("x", EDGES)
def test_quantize_prob_equals_the_plain_formula_on_edge_values(x):
    assert quantize_prob(x) == _reference_quantize(x)
    assert type(quantize_prob(x)) is int


def test_quantize_prob_rounds_exact_halves_up():
    # k / 65536 and the halves between them are exact binary fractions: known answers.
    for k in range(0, PROB_ONE, 251):
        assert quantize_prob(k / PROB_ONE) == k
        assert quantize_prob((k + 0.5) / PROB_ONE) == k + 1
    with pytest.raises(ValueError, match="NaN"):
        quantize_prob(float("nan"))


def test_quantize_prob_equals_the_plain_formula_on_random_values():
    rng = random.Random(11)
    values = [rng.random() for _ in range(20000)] + [k / PROB_ONE + d for k in range(0, PROB_ONE + 1, 97)
                                                     for d in (-0.5 / PROB_ONE, 0.0, 0.5 / PROB_ONE)]
    assert [quantize_prob(x) for x in values] == [_reference_quantize(x) for x in values]


@pytest.mark.parametrize("table", [None, tuple(4096 * k + 2048 for k in range(15)) + (PROB_ONE,)])
def test_advance_is_update_h_then_stops(table):
    rng = random.Random(5)
    ctl = Controller(max_requests=8, max_draft_len=6, tau=20000, acceptance=table)
    slot = ctl.admit(3, 1)
    for _ in range(5000):
        if slot.state is STOPPED:
            slot.new_round()
        p = rng.choice([0, 1, PROB_ONE, PROB_ONE - 1, rng.randrange(PROB_ONE + 1)])
        h, t, pending = slot.h, slot.t, slot.pending
        want_h = update_h(h, p if table is None else table[acceptance_bin(p)])
        want_stop = stops(want_h, t + 1, ctl.tau, ctl.max_draft_len)
        assert ctl.advance(slot, p) is want_stop
        assert (slot.h, slot.t, slot.pending) == (want_h, t + 1, pending + 1)
        assert (slot.state is STOPPED) is want_stop
        assert ctl.drafting(1) == (not want_stop)


def _pool_state(pool: SharedPool):
    return pool.count, {r: [(e.position, e.serial) for e in pool.lookup(r)] for r in range(8)}


def test_insert_all_is_a_loop_of_inserts():
    rng = random.Random(7)
    one, many = SharedPool(200), SharedPool(200)
    next_position = [1] * 8
    serial = 0
    for _ in range(60):
        request, n = rng.randrange(8), rng.randint(1, 3)
        entries = []
        for _ in range(n):
            entries.append(PoolEntry(request, request % 4, next_position[request], 7, 30000, serial))
            next_position[request] += 1
            serial += 1
        for e in entries:
            one.insert(e)
        many.insert_all(entries)
        assert _pool_state(many) == _pool_state(one)
    assert one.count == serial


def test_insert_all_checks_like_insert():
    pool = SharedPool(3)
    pool.insert(PoolEntry(1, 0, 2, 7, 100, 0))
    with pytest.raises(AssertionError, match="positions out of order"):
        pool.insert_all([PoolEntry(1, 0, 2, 7, 100, 1)])
    with pytest.raises(AssertionError, match="locked or full"):
        pool.insert_all([PoolEntry(2, 0, 1, 7, 100, 2), PoolEntry(2, 0, 2, 7, 100, 3), PoolEntry(2, 0, 3, 7, 100, 4)])
    assert pool.count == 1


@pytest.mark.parametrize("seed", (21, 22))
def test_query_is_the_scheduler_of_the_drafting_count(seed):
    cfg = config(max_requests=12, max_draft_len=8, tau=9000, shared_entries=24, eager_entries=16,
                 micro_batches=4, dlm_fc_threshold=2)
    m = Manager(cfg)
    answers = set()
    for txn in generate(cfg, seed, 3000):
        m.apply(txn)
        if type(txn) is SchedulerQuery:
            drafting = m.controller.drafting(txn.microbatch)
            num, den = dlm_fc_estimate(drafting)
            want = Mapping(Op.DLM_FC, m.scheduler.dlm_fc(num, den), num, den, txn.microbatch)
            assert m.query(txn.microbatch) == want
            answers.add((want.device, drafting))
    assert len({device for device, _ in answers}) == 2 and len(answers) > 4


@pytest.mark.parametrize("seed", (31, 32))
def test_issue_positions_are_positions_by_request_in_order(seed):
    cfg = config(max_requests=12, max_draft_len=8, tau=9000, shared_entries=24, eager_entries=16,
                 micro_batches=4)
    boxed, unboxed = Manager(cfg), Manager(cfg)
    issued = 0
    for txn in generate(cfg, seed, 3000):
        events = boxed.apply(txn)
        if type(txn) is VerifyIssue:
            answer = unboxed.issue(txn.tlm_idle, txn.capacity)
            if type(events[0]) is Issued:
                # Dict equality ignores the order: compare the items, requests in greedy order.
                assert list(answer[0].items()) == list(positions_by_request(events[0].tokens).items())
                issued += 1
        else:
            unboxed.apply(txn)
    assert issued > 50
