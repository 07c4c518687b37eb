"""SADDLE+'s Manager pieces (issue 32), each on hand-computed cases: the pass planner
(sim/manager/planner.py), the load-aware tau table (controller.py), the pass-aware DLM FC
threshold (scheduler.py), and that all of them are off by default."""
import pytest

from common.errors import ConfigError
from sim.manager import ManagerConfig
from sim.manager.controller import tau_bucket
from sim.manager.planner import PassCosts, best_prefix, should_wait
from sim.manager.shared_pool import PoolEntry
from sim.manager.transactions import (
    Device,
    Issued,
    NotIssued,
    SchedulerQuery,
    Unlock,
    VerifyIssue,
    VerifyResult,
)
from tests.sim.manager.helpers import admit, draft, manager

P1 = 65536
FLAT = (100,) * 2          # a pool of 8 entries: fc for 0 and for 1..16 tokens


def costs(fc=FLAT, per_request=0, select=True, issue=True, wait_bound=4) -> PassCosts:
    return PassCosts(fc=fc, per_request=per_request, wait_bound=wait_bound, select=select, issue=issue)


def entry(request, position, h_prev, h, last=False) -> PoolEntry:
    return PoolEntry(request, 0, position, 7, h, 0, 0, h_prev, last)


def test_value_is_one_token_per_reached_position_plus_the_bonus_of_a_complete_round():
    order = [entry(0, 1, P1, 49152), entry(0, 2, 49152, 32768, last=True)]
    # 1 (position 1 reached) + 0.75 (position 2 reached) + 0.5 (bonus), in UQ.8.
    assert best_prefix(order, 8, costs()) == (2, 256 + 192 + 128, 100, 1)


def test_capacity_is_the_running_argmax_of_value_per_cost():
    fc = (0, 100, 300)     # 16 tokens: 100, 17-32: 300 (a pool of 32 entries)
    order = [entry(r, 1, P1, P1 // 2) for r in range(17)]
    # 16 tokens: 16 / 100; the 17th costs 200 more for one token: the argmax stays at 16.
    k, value, t, requests = best_prefix(order, 32, costs(fc))
    assert (k, value, t, requests) == (16, 16 * 256, 100, 16)
    assert best_prefix(order, 32, costs(fc, select=False))[0] == 17   # the capacity input instead
    assert best_prefix(order, 3, costs(fc))[0] == 3                   # never above the input


def test_a_pass_takes_at_least_one_token_even_of_no_value():
    order = [entry(0, 5, 200, 100), entry(1, 6, 100, 50)]      # h_prev >> 8 == 0
    assert best_prefix(order, 8, costs())[0] == 1


def test_per_request_cost_counts_distinct_requests():
    order = [entry(0, 1, P1, P1), entry(1, 1, P1, P1), entry(0, 2, P1, P1)]
    assert best_prefix(order, 8, costs(per_request=10))[1:] == (768, 120, 2)


def test_wait_iff_another_step_raises_value_per_cost():
    best = (2, 512, 100, 2)
    assert not should_wait(best, [], costs())                      # nothing drafting: issue
    assert should_wait(best, [(P1 // 2, True)], costs())          # +128 at no cost: wait
    # A new request costs 500 more: (512 + 256) / 600 < 512 / 100.
    assert not should_wait(best, [(P1, False)], costs(per_request=500))


def test_manager_waits_then_issues_at_the_bound():
    m = manager(tau=1000, shared_entries=16, pass_costs=costs(wait_bound=2))
    admit(m, (0, 0), (1, 1))
    draft(m, 0, 60000)
    draft(m, 1, 60000)
    # Both still drafting: each answer waits, the third is forced (bound 2).
    assert isinstance(m.apply(VerifyIssue(True, 16))[0], NotIssued)
    assert isinstance(m.apply(VerifyIssue(True, 16))[0], NotIssued)
    assert isinstance(m.apply(VerifyIssue(True, 16))[0], Issued)


def test_manager_issues_when_no_request_drafts():
    m = manager(tau=40000, shared_entries=16, pass_costs=costs())
    admit(m, (0, 0))
    draft(m, 0, 30000)                   # stops: H < tau
    issued = m.apply(VerifyIssue(True, 16))[0]
    assert isinstance(issued, Issued) and len(issued.tokens) == 1
    m.apply(VerifyResult(0, 1, 3))
    m.apply(Unlock())


def test_tau_table_follows_the_live_requests():
    assert [tau_bucket(n) for n in (0, 1, 2, 3, 4, 5, 8, 9, 16, 17, 64, 65, 128)] == \
        [0, 0, 1, 2, 2, 3, 3, 4, 4, 5, 6, 7, 7]
    table = (0, 0, 0, 0, 0, 0, 0, 0)
    m = manager(tau=0, tau_table=table[:1] + (50000,) + table[2:])
    admit(m, (0, 0))
    assert draft(m, 0, 40000)[-1].stop is False          # one live request: tau 0
    admit(m, (1, 1))
    assert draft(m, 0, 60000)[-1].stop is True           # two: tau 50000 > H


def test_pass_aware_threshold_applies_while_the_pool_is_locked():
    m = manager(dlm_fc_threshold=1, dlm_fc_threshold_locked=3, tau=1000)
    admit(m, (0, 0), (1, 0))
    assert m.apply(SchedulerQuery(0))[0].device is Device.GPU
    draft(m, 0, 60000)
    m.apply(VerifyIssue(True, 8))                         # locks the Shared Pool
    assert m.apply(SchedulerQuery(0))[0].device is Device.PIM   # 2 drafting < 3
    m.apply(VerifyResult(0, 1, 3))
    m.apply(Unlock())
    assert m.apply(SchedulerQuery(0))[0].device is Device.GPU


def test_off_by_default_and_round_trips():
    shipped = ManagerConfig.load()
    assert (shipped.pass_costs, shipped.tau_table, shipped.dlm_fc_threshold_locked) == (None,) * 3
    assert "planner" not in shipped.to_dict()
    plus = shipped.replace(pass_costs=costs(fc=(5,) * 33), tau_table=(1,) * 8,
                           dlm_fc_threshold_locked=9)
    assert ManagerConfig.from_dict(plus.to_dict()) == plus
    with pytest.raises(ConfigError, match="planner: fc"):
        shipped.replace(pass_costs=costs(fc=(5,) * 3))
    with pytest.raises(ConfigError, match="tau_table"):
        shipped.replace(tau_table=(1,) * 7)
