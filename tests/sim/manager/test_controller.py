import pytest

from sim.manager.controller import Controller, RequestState, stops, update_h
from sim.manager.transactions import ProtocolError


def test_h_update_is_floor_of_product_shifted_by_16():
    assert update_h(65536, 60000) == 60000                 # H_0 = 1.0
    assert update_h(60000, 10000) == 9155                  # 600000000 / 65536 = 9155.27
    assert update_h(9155, 65536) == 9155                   # p = 1.0 keeps H
    assert update_h(3, 32768) == 1                         # 1.5 floors to 1
    assert update_h(1, 32768) == 0
    assert update_h(65536, 0) == 0


def test_h_sequence_matches_hand_computation():
    # p = 0.9, 0.8, 0.7 quantized: 58982 (58982.4), 52429 (52428.8), 45875 (45875.2)
    c = Controller(4, 8, tau=32768)
    slot = c.admit(0, 0)
    hs = []
    for p in (58982, 52429, 45875):
        stop = c.advance(slot, p)
        hs.append((slot.h, stop))
    # 58982*52429 = 3092367278 >> 16 = 47185 (47185.56); 47185*45875 = 2164611875 >> 16 = 33029
    # (33029.35); both >= tau = 32768; the float product 0.504 agrees to within the floors.
    assert hs == [(58982, False), (47185, False), (33029, False)]
    assert c.advance(slot, 65000) is True                  # 33029*65000 >> 16 = 32758 (32758.87) < 32768
    assert slot.h == 32758 and slot.t == 4 and slot.state is RequestState.STOPPED


def test_stop_rule_is_strict_below_tau_and_at_max_length():
    assert stops(32767, 1, 32768, 8) and not stops(32768, 1, 32768, 8)
    assert stops(65536, 8, 0, 8) and not stops(65536, 7, 0, 8)


def test_tau_one_stops_at_the_first_token_below_certainty():
    c = Controller(2, 8, tau=65536)
    slot = c.admit(1, 0)
    assert c.advance(slot, 65536) is False                 # H stays 1.0 = tau
    assert c.advance(slot, 65535) is True


def test_max_draft_len_bounds_the_round():
    c = Controller(2, 3, tau=0)
    slot = c.admit(0, 1)
    assert [c.advance(slot, 65536) for _ in range(3)] == [False, False, True]
    assert slot.pending == 3


def test_draft_legality_errors_say_what_was_expected():
    c = Controller(4, 8, tau=0)
    c.admit(2, 1)
    with pytest.raises(ProtocolError, match="not admitted"):
        c.expect_draft(3, 1, 1)
    with pytest.raises(ProtocolError, match="belongs to micro-batch 1, not 0"):
        c.expect_draft(2, 0, 1)
    with pytest.raises(ProtocolError, match="expects round position 1, found 2"):
        c.expect_draft(2, 1, 2)
    with pytest.raises(ProtocolError, match="already admitted"):
        c.admit(2, 0)
    with pytest.raises(ProtocolError, match="outside the 4 Controller slots"):
        c.admit(4, 0)
    slot = c.slots[2]
    slot.state = RequestState.STOPPED
    with pytest.raises(ProtocolError, match="is stopped, not drafting"):
        c.expect_draft(2, 1, 1)


def test_effective_microbatch_size_counts_drafting_requests_only():
    c = Controller(8, 2, tau=0)
    for r, mb in [(0, 0), (1, 0), (2, 1), (3, 0)]:
        c.admit(r, mb)
    c.advance(c.slots[1], 65536)
    c.advance(c.slots[1], 65536)                            # max length: stopped
    assert c.drafting(0) == 2 and c.drafting(1) == 1 and c.drafting(2) == 0


def test_drafting_count_is_the_count_of_drafting_slots_on_random_streams():
    # The Controller keeps the count as states change (RequestSlot.state); the reference is a
    # scan of the micro-batch's slots.
    from hw.flow.manager_random import generate
    from sim.manager import Manager
    from tests.sim.manager.helpers import config
    cfg = config(max_requests=12, max_draft_len=8, tau=9000, shared_entries=24, eager_entries=16, micro_batches=4)
    m = Manager(cfg)
    seen = set()
    for txn in generate(cfg, 5, 4000):
        m.apply(txn)
        for mb in range(cfg.micro_batches):
            n = sum(1 for s in m.controller.slots.values() if s.microbatch == mb and s.state is RequestState.DRAFTING)
            assert m.controller.drafting(mb) == n
            seen.add(n)
    assert {0, 1, 2} <= seen
