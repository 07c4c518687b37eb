"""DraftLogits: the softmax path into the Controller."""
import pytest

from hw.flow.manager_random import generate_with_events
from sim.manager import Manager
from sim.manager.softmax import SoftmaxParams, softmax_greedy
from sim.manager.transactions import (
    Drafted,
    DraftLogits,
    DraftToken,
    Issued,
    Pool,
    ProtocolError,
    VerifyIssue,
)
from sim.manager.txlog import read_txlog, replay, write_txlog
from tests.sim.manager.helpers import admit, config, of

SOFTMAX = SoftmaxParams(lanes=4, vocab=10, exp_frac_bits=14)


def test_logits_draft_is_the_draft_of_the_softmax_result():
    logits = (0, 512, -256, 512, 1024, 0, 0, -4096, 256, 1000)     # Q8.8: 4.0 is the maximum
    token, prob = softmax_greedy(logits, SOFTMAX)
    assert token == 4 and 0 < prob < 65536
    a, b = Manager(config(), SOFTMAX), Manager(config())
    admit(a, (0, 1))
    admit(b, (0, 1))
    got = a.apply(DraftLogits(0, 1, 1, logits))
    assert got == b.apply(DraftToken(0, 1, 1, token, prob)) == [Drafted(0, 1, Pool.SHARED, prob, False)]
    (issued,) = of(a.apply(VerifyIssue(True, 4)), Issued)
    assert issued.tokens[0].token == 4


def test_peaked_logits_saturate_to_one():
    m = Manager(config(), SOFTMAX)
    admit(m, (0, 0))
    (event,) = m.apply(DraftLogits(0, 0, 1, (-32768,) * 9 + (32767,)))
    assert event.h == 65536


@pytest.mark.parametrize("logits, match", [
    ((), r"expected 1..10 logits, found 0"),
    ((0,) * 11, r"expected 1..10 logits, found 11"),
    ((0, 40000), r"logits\[1\]: expected an integer in \[-32768, 32767\]"),
])
def test_bad_logits_are_protocol_errors(logits, match):
    m = Manager(config(), SOFTMAX)
    admit(m, (0, 0))
    with pytest.raises(ProtocolError, match=match):
        m.apply(DraftLogits(0, 0, 1, logits))


def test_no_softmax_unit_no_logits():
    m = Manager(config())
    admit(m, (0, 0))
    with pytest.raises(ProtocolError, match="no softmax unit"):
        m.apply(DraftLogits(0, 0, 1, (1, 2)))


def test_random_runs_with_logits_conserve_and_replay_from_a_log(tmp_path):
    cfg = config(shared_entries=8, eager_entries=8)
    pairs, m = generate_with_events(cfg, 8, 3000, softmax=SOFTMAX)
    m.conservation(final=True)
    assert sum(isinstance(t, DraftLogits) for t, _ in pairs) > 200
    path = tmp_path / "logits.jsonl"
    write_txlog(path, cfg, pairs, softmax=SOFTMAX)
    log = read_txlog(path)
    assert log.softmax == SOFTMAX and log.entries == pairs
    assert replay(log) is None
