"""Extension of synthetic requests past their natural end (the paper's fixed sequence length),
``natural_len`` in the format, and ``RequestTrace.truncated``."""
from __future__ import annotations

import numpy as np
import pytest

import traces.synth as synth
from common.errors import ConfigError
from traces.format import RequestTrace, TraceError, TraceHeader
from traces.io import read_trace, write_trace

OPT175 = "opt-175b+opt-6.7b"          # context 512: the smallest extension, quick to generate


@pytest.fixture(scope="module")
def generations():
    params = synth.load_params(OPT175)
    splits = {"all": 40}
    natural = synth.synthesize(params, splits, 5)[1]
    at_512 = synth.synthesize(params, splits, 5, context=512)
    at_700 = synth.synthesize(params, splits, 5, context=700)[1]
    return natural, at_512, at_700


def test_every_request_reaches_the_context_and_keeps_its_natural_part(generations):
    natural, (header, at_512), _ = generations
    assert header.max_seq_len == 512 and header.provenance["context"] == 512
    for n, e in zip(natural, at_512):
        assert e.prompt_len + e.output_len == 512
        assert e.natural_output_len == n.output_len
        assert e.truncated(n.output_len) == n          # the natural part is the old trace
        e.validate(header)


def test_a_longer_context_only_appends_positions(generations):
    _, (_, at_512), at_700 = generations
    for a, b in zip(at_512, at_700):
        assert b.truncated(a.output_len) == a


def test_extension_is_deterministic(generations, tmp_path):
    params = synth.load_params(OPT175)
    again = synth.synthesize(params, {"all": 40}, 5, context=512)
    write_trace(tmp_path / "a.jsonl.gz", *generations[1])
    write_trace(tmp_path / "b.jsonl.gz", *again)
    assert (tmp_path / "a.jsonl.gz").read_bytes() == (tmp_path / "b.jsonl.gz").read_bytes()
    _, back = read_trace(tmp_path / "a.jsonl.gz")
    assert back == generations[1][1]


def test_extension_continues_at_the_late_acceptance_level(generations):
    _, (_, at_512), _ = generations
    late = np.concatenate([r.accepted[r.natural_output_len:] for r in at_512])
    params = synth.load_params(OPT175)
    ends = [c.accept_end for c in params.categories.values()]
    # Past the drift, the typical request accepts at about accept_end (difficulty and bursts
    # spread it); the extension's rate lies within the categories' range widened by that spread.
    assert min(ends) - 0.15 < late.mean() < max(ends) + 0.05


def test_context_below_max_seq_len_is_refused():
    params = synth.load_params(OPT175)
    with pytest.raises(ConfigError, match="context 400: expected >= max_seq_len 512"):
        synth.synthesize(params, {"all": 2}, 1, context=400)


def _request(**kw):
    base = dict(id="x", category="open_qa", prompt_len=3, p=np.array([0.9, 0.8, 0.7, 0.6]),
                accepted=np.array([True, False, True, False]),
                offpath=[np.array([0.5, 0.4]), np.array([])])
    base.update(kw)
    return RequestTrace(**base)


def test_truncated_by_hand():
    r = _request(natural_len=3)
    t = r.truncated(2)
    assert t.p.tolist() == [0.9, 0.8] and t.accepted.tolist() == [True, False]
    assert [o.tolist() for o in t.offpath] == [[]]      # mismatch at 1: nothing before position 1
    assert t.natural_len is None                          # the cut is at or before the natural end
    t3 = r.truncated(3)
    assert [o.tolist() for o in t3.offpath] == [[0.5]] and t3.natural_len is None
    assert r.truncated(4) is r
    with pytest.raises(ValueError, match="cannot keep 5 of 4"):
        r.truncated(5)


def test_natural_len_is_validated():
    header = TraceHeader("a+b", "a", "b", "d", 64, 2, {})
    record = _request(natural_len=3).to_record()
    assert RequestTrace.from_record(record, header).natural_len == 3
    for bad in (0, 5, 2.5, True):
        with pytest.raises(TraceError, match="natural_len: found"):
            RequestTrace.from_record(dict(record, natural_len=bad), header, "t.jsonl", 2)
