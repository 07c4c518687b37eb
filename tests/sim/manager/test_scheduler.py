from sim.manager.scheduler import Scheduler, dlm_fc_estimate, tlm_attention_estimate
from sim.manager.transactions import Device, Mapping, Op, SchedulerQuery, VerifyIssue
from tests.sim.manager.helpers import admit, draft, manager, of

P1 = 65536


def test_estimates():
    assert dlm_fc_estimate(7) == (7, 1)
    assert tlm_attention_estimate([3, 3, 5, 3, 1]) == (5, 3)


def test_threshold_comparison_is_at_or_above_means_gpu():
    s = Scheduler(True, 4, 3, Device.GPU, Device.PIM)
    assert s.dlm_fc(3, 1) is Device.PIM and s.dlm_fc(4, 1) is Device.GPU
    assert s.tlm_attention(8, 3) is Device.PIM          # 8 < 3 * 3: mean 2.67 queries
    assert s.tlm_attention(9, 3) is Device.GPU
    static = Scheduler(False, 0, 0, Device.PIM, Device.GPU)
    assert static.dlm_fc(100, 1) is Device.PIM and static.tlm_attention(0, 1) is Device.GPU


def test_dlm_fc_query_counts_requests_still_drafting_in_the_microbatch():
    m = manager(dlm_fc_threshold=2, tau=40000)
    admit(m, (0, 0), (1, 0), (2, 0), (3, 1))
    assert m.apply(SchedulerQuery(0)) == [Mapping(Op.DLM_FC, Device.GPU, 3, 1, 0)]
    draft(m, 0, 30000)                                   # stops
    draft(m, 1, 30000)                                   # stops
    assert m.apply(SchedulerQuery(0)) == [Mapping(Op.DLM_FC, Device.PIM, 1, 1, 0)]
    assert m.apply(SchedulerQuery(1)) == [Mapping(Op.DLM_FC, Device.PIM, 1, 1, 1)]


def test_tlm_attention_mapping_comes_with_each_verification():
    m = manager(tlm_attention_threshold=2)
    admit(m, (0, 0), (1, 1))
    draft(m, 0, P1, P1, P1)
    draft(m, 1, 1000)
    events = m.apply(VerifyIssue(True, 8))
    assert of(events, Mapping) == [Mapping(Op.TLM_ATTENTION, Device.GPU, 4, 2, -1)]
    m2 = manager(tlm_attention_threshold=3)
    admit(m2, (0, 0), (1, 1))
    draft(m2, 0, P1, P1, P1)
    draft(m2, 1, 1000)
    assert of(m2.apply(VerifyIssue(True, 8)), Mapping)[0].device is Device.PIM


def test_static_mapping_ignores_the_estimates():
    m = manager(dynamic_mapping=False, dlm_fc_threshold=0, static_dlm_fc=Device.PIM)
    admit(m, (0, 0))
    assert m.apply(SchedulerQuery(0))[0].device is Device.PIM
    draft(m, 0, P1)
    assert of(m.apply(VerifyIssue(True, 8)), Mapping)[0].device is Device.PIM
