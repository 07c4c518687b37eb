"""``Manager.draft`` (DraftToken with its fields as arguments and its answer unboxed, what the
simulator sends when it is not recording) is the DraftToken transaction: on long random
streams it leaves the same state and gives the answer the event would."""
import pytest

from sim.manager import Manager
from sim.manager.random_txns import generate
from sim.manager.transactions import DraftToken, Drafted, ProtocolError, Refused
from tests.sim.manager.helpers import config

SMALL = config(max_requests=12, max_draft_len=8, tau=9000, shared_entries=24, eager_entries=16,
               micro_batches=4)


def _state(m: Manager):
    slots = {r: (s.microbatch, s.h, s.t, s.state, s.pending, s.next_token) for r, s in m.controller.slots.items()}
    return slots, m.shared_pool.serials(), m.eager_pools.serials(), m.conservation().as_dict()


@pytest.mark.parametrize("seed", (1, 2))
def test_draft_is_the_draft_token_transaction(seed):
    boxed, unboxed = Manager(SMALL), Manager(SMALL)
    answers = {Drafted: 0, Refused: 0}
    for txn in generate(SMALL, seed, 4000):
        events = boxed.apply(txn)
        if type(txn) is DraftToken:
            pool, stop = unboxed.draft(txn.request, txn.microbatch, txn.position, txn.token, txn.prob)
            (event,) = events
            answers[type(event)] += 1
            if stop is None:
                assert event == Refused(txn.request, txn.position, pool)
            else:
                assert event == Drafted(txn.request, txn.position, pool, unboxed.controller.slots[txn.request].h,
                                        stop)
        else:
            assert unboxed.apply(txn) == events
        assert _state(unboxed) == _state(boxed)
    assert answers[Drafted] > 1000 and answers[Refused] > 50


def test_draft_checks_its_fields_like_the_transaction():
    m = Manager(SMALL)
    with pytest.raises(ProtocolError, match="DraftToken.prob: expected raw UQ1.16"):
        m.draft(0, 0, 1, 5, 65537)
    with pytest.raises(ProtocolError, match="DraftToken: request 0 is not admitted"):
        m.draft(0, 0, 1, 5, 100)
