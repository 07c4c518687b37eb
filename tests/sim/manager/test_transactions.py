import dataclasses
import json

import pytest

from hw.flow.manager_random import generate_with_events
from sim.manager.softmax import SoftmaxParams
from sim.manager.transactions import (
    INPUTS,
    OUTPUTS,
    Admit,
    Device,
    Discarded,
    DiscardReason,
    DraftToken,
    Issued,
    Mapping,
    Op,
    Pool,
    ProtocolError,
    Refused,
    SelectedToken,
    Unlock,
    VerifyIssue,
    from_dict,
    to_dict,
)
from tests.sim.manager.helpers import config


def test_every_type_round_trips_through_json():
    pairs, _ = generate_with_events(config(shared_entries=6, eager_entries=4), seed=3, length=3000,
                                    softmax=SoftmaxParams(lanes=2, vocab=6, exp_frac_bits=12))
    seen = set()
    for txn, events in pairs:
        for obj in [txn, *events]:
            text = json.dumps(to_dict(obj))
            assert from_dict(json.loads(text)) == obj
            seen.add(type(obj))
    assert set(INPUTS) <= seen and set(OUTPUTS) <= seen


def test_dict_shape_uses_plain_values():
    issued = Issued(5, (SelectedToken(1, 2, 3, 4),))
    assert to_dict(issued) == {"type": "Issued", "verification": 5,
                               "tokens": [{"request": 1, "position": 2, "token": 3, "h": 4}]}
    assert to_dict(Refused(1, 2, Pool.EAGER))["pool"] == "eager"
    assert to_dict(Mapping(Op.DLM_FC, Device.PIM, 3, 1, 0))["device"] == "pim"
    assert to_dict(Discarded(1, (2, 3), DiscardReason.EAGER_AFTER_REJECT))["positions"] == [2, 3]
    assert to_dict(Unlock()) == {"type": "Unlock"}


@pytest.mark.parametrize("data, match", [
    ({"type": "Nope"}, "type: expected one of Admit, DraftToken"),
    ([1], "expected a JSON object"),
    ({"type": "Admit", "request": 1}, "log:3: Admit: missing key 'microbatch'"),
    ({"type": "Admit", "request": 1, "microbatch": 0, "x": 1}, r"unknown key\(s\) x"),
    ({"type": "Admit", "request": True, "microbatch": 0}, r"Admit.request: expected an integer, found True"),
    ({"type": "VerifyIssue", "tlm_idle": 1, "capacity": 4}, "tlm_idle: expected true or false"),
    ({"type": "Refused", "request": 1, "position": 1, "pool": "big"}, "pool: expected one of shared, eager"),
    ({"type": "Issued", "verification": 0, "tokens": [{"request": 1}]}, r"tokens\[0\]: missing key 'position'"),
    ({"type": "Issued", "verification": 0, "tokens": 3}, "tokens: expected a list"),
])
def test_from_dict_errors_name_source_and_key(data, match):
    with pytest.raises(ProtocolError, match=match):
        from_dict(data, source="log:3")


def test_inputs_are_immutable_values():
    t = DraftToken(1, 0, 1, 5, 100)
    assert t == DraftToken(1, 0, 1, 5, 100) and hash(t) == hash(DraftToken(1, 0, 1, 5, 100))
    with pytest.raises(AttributeError):
        t.prob = 3
    assert VerifyIssue(True, 3) != VerifyIssue(False, 3) and Admit(0, 0) != Admit(0, 1)


@pytest.mark.parametrize("cls", INPUTS + OUTPUTS + (SelectedToken,), ids=lambda c: c.__name__)
def test_every_type_is_a_frozen_value_built_by_position_or_keyword(cls):
    # Their __init__ is generated (transactions._value): it must take the fields in order.
    names = [f.name for f in dataclasses.fields(cls)]
    by_position = cls(*range(len(names)))
    assert [getattr(by_position, n) for n in names] == list(range(len(names)))
    assert cls(**{n: i for i, n in enumerate(names)}) == by_position
    assert hash(by_position) == hash(cls(*range(len(names))))
    for name in names:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(by_position, name, 9)
    with pytest.raises(TypeError):
        cls(*range(len(names) + 1))
