"""Round trips of the trace format, gzip members, resumable appends, and draft windows."""
from __future__ import annotations

import gzip
import json
import shutil

import numpy as np
import pytest

from tests.traces.helpers import TINY
from traces.format import CATEGORIES, SCHEMA_VERSION, RequestTrace, TraceError, TraceHeader
from traces.io import TraceWriter, ids_in, iter_trace, read_trace


def header(**changes) -> TraceHeader:
    fields = dict(pair="t+d", target="t", draft="d", dataset="unit", max_seq_len=64,
                  offpath_len=3, provenance={"seed": 5})
    fields.update(changes)
    return TraceHeader(**fields)


def request(rid: str, category: str = "summarization", **extra) -> RequestTrace:
    acc = np.array([1, 0, 1, 0, 0, 1], dtype=bool)
    off = [np.array([0.25, 0.125, 0.5]), np.array([0.75]), np.array([])]
    return RequestTrace(rid, category, 7, np.array([0.5, 0.1234, 1.0, 1e-5, 0.3, 0.999]),
                        acc, off, extra)


def test_constants():
    assert SCHEMA_VERSION == "saddle-trace/1"
    assert CATEGORIES == ("open_qa", "general_qa", "classification", "closed_qa", "brainstorming",
                          "information_extraction", "summarization", "creative_writing")


@pytest.mark.parametrize("name", ["t.jsonl", "t.jsonl.gz"])
def test_round_trip_with_optional_fields(tmp_path, name):
    h = header(splits={"a": 1, "b": 1}, extra={"note": "kept"})
    reqs = [request("r0"),
            request("r1", "open_qa", target_p=np.array([0.9, 0.5, 1.0, 0.2, 0.3, 0.4]),
                    entropy=np.array([0.0, 1.5, 2.0, 0.1, 0.2, 3.0]),
                    topk=[np.array([0.5, 0.25])] * 6, future_field=[1, 2, 3, 4, 5, 6])]
    path = tmp_path / name
    with TraceWriter(path, h) as w:
        for r in reqs:
            w.write(r)
    back_header, back = read_trace(path)
    assert back_header == h
    assert back == reqs
    assert back[1].extra["future_field"] == [1, 2, 3, 4, 5, 6]
    assert back[0].p.dtype == np.float64 and back[0].accepted.dtype == bool
    if name.endswith(".gz"):
        assert path.read_bytes()[:2] == b"\x1f\x8b"


def test_to_json_is_the_json_record(tmp_path):
    r = request("x", target_p=np.linspace(0.1, 1.0, 6))
    assert json.loads(r.to_json()) == r.to_record()
    # A non-contiguous array goes by lists, with the same result.
    strided = np.array([0.5, 9, 0.25, 9, 1.0, 9, 0.75, 9, 0.5, 9, 0.125, 9])[::2]
    s = RequestTrace("y", "open_qa", 3, strided, r.accepted, r.offpath)
    assert json.loads(s.to_json())["p"] == [0.5, 0.25, 1.0, 0.75, 0.5, 0.125]


def test_writing_twice_gives_the_same_bytes(tmp_path):
    for name in ("a.jsonl.gz", "b.jsonl.gz"):
        with TraceWriter(tmp_path / name, header()) as w:
            w.write(request("r0"))
    assert (tmp_path / "a.jsonl.gz").read_bytes() == (tmp_path / "b.jsonl.gz").read_bytes()


def test_iter_trace_streams(tmp_path):
    h, it = iter_trace(TINY)
    assert h.pair == "tlm+dlm"
    assert next(it).id == "a"
    assert [r.id for r in it] == ["b", "c"]


def test_concatenated_gzip_members_read_as_one_trace(tmp_path):
    lines = TINY.read_bytes().splitlines(keepends=True)
    path = tmp_path / "m.jsonl.gz"
    path.write_bytes(gzip.compress(b"".join(lines[:2])) + gzip.compress(b"".join(lines[2:])))
    assert [r.id for r in read_trace(path)[1]] == ["a", "b", "c"]


@pytest.mark.parametrize("name", ["t.jsonl", "t.jsonl.gz"])
def test_append_adds_a_member_and_keeps_records(tmp_path, name):
    path = tmp_path / name
    with TraceWriter(path, header()) as w:
        w.write(request("r0"))
    with TraceWriter(path, header(), append=True) as w:
        w.write(request("r1"))
        with pytest.raises(TraceError, match="duplicate id 'r0'"):
            w.write(request("r0"))
    assert ids_in(path) == ["r0", "r1"]
    assert [r.id for r in read_trace(path)[1]] == ["r0", "r1"]


def test_append_to_missing_file_creates_it(tmp_path):
    path = tmp_path / "new.jsonl.gz"
    assert ids_in(path) == []
    with TraceWriter(path, header(), append=True) as w:
        w.write(request("r0"))
    assert ids_in(path) == ["r0"]


def test_append_refuses_a_different_header(tmp_path):
    path = tmp_path / "t.jsonl"
    with TraceWriter(path, header()) as w:
        w.write(request("r0"))
    with pytest.raises(TraceError, match=r"t.jsonl:1: offpath_len: found 3, expected 4 .*differing fields: offpath_len"):
        TraceWriter(path, header(offpath_len=4), append=True)


@pytest.mark.parametrize("name", ["t.jsonl", "t.jsonl.gz"])
def test_interrupted_write_is_dropped_on_resume(tmp_path, name):
    path = tmp_path / name
    with TraceWriter(path, header()) as w:
        w.write(request("r0"))
        complete = path.stat().st_size   # the writer flushes every record
        w.write(request("r1"))
    data = path.read_bytes()
    # Cut into the last record's bytes: its plain line in half, or its first compressed bytes.
    keep = 2 if name.endswith(".gz") else (len(data) - complete) // 2
    path.write_bytes(data[:complete + keep])
    with pytest.raises(TraceError, match="truncated"):
        read_trace(path)
    with pytest.warns(UserWarning, match="dropping the incomplete last record"):
        assert ids_in(path) == ["r0"]
    with pytest.warns(UserWarning, match="dropping the incomplete last record"):
        with TraceWriter(path, header(), append=True) as w:
            w.write(request("r2"))
    assert [r.id for r in read_trace(path)[1]] == ["r0", "r2"]


def test_ids_in_still_fails_on_corruption_before_the_end(tmp_path):
    path = tmp_path / "t.jsonl"
    shutil.copy(TINY, path)
    lines = path.read_text().splitlines(keepends=True)
    lines[2] = lines[2].replace('"open_qa"', '"poetry"')
    path.write_text("".join(lines))
    with pytest.raises(TraceError, match=r":3: category: found unknown category 'poetry'"):
        ids_in(path)


def test_writer_checks_requests_against_the_header(tmp_path):
    with TraceWriter(tmp_path / "t.jsonl", header(max_seq_len=10)) as w:
        with pytest.raises(TraceError, match=r"p: found 6 output positions after a prompt of 7, "
                                             r"expected prompt_len \+ len\(p\) <= max_seq_len 10"):
            w.write(request("r0"))
    bad = request("r1")
    bad.p[2] = float("nan")
    with TraceWriter(tmp_path / "u.jsonl", header()) as w:
        with pytest.raises(TraceError, match=r"p\[2\]: found nan"):
            w.write(bad)
        with pytest.raises(TraceError, match=r"entropy\[1\]: found -1.0"):
            w.write(request("r2", entropy=np.array([0.0, -1.0, 0, 0, 0, 0])))


# -- draft windows along the DLM's path (values of tests/traces/data/tiny.jsonl) -----------------

def windows():
    _, reqs = read_trace(TINY)
    return {r.id: r for r in reqs}


@pytest.mark.parametrize("rid,t,n,probs,flags,k", [
    # on-path up to the mismatch at 2, then offpath[0]
    ("a", 0, 4, [0.9, 0.8, 0.3, 0.5], [1, 1, 0, 0], 2),
    # clipped to the output's end (8 positions); positions 3..5 accepted, mismatch at 6, offpath[1]
    ("a", 3, 9, [1.0, 0.7, 0.6, 0.2, 0.3], [1, 1, 1, 0, 0], 3),
    # beyond the 2 recorded off-path values: the last one repeats
    ("a", 0, 8, [0.9, 0.8, 0.3, 0.5, 0.4, 0.4, 0.4, 0.4], [1, 1, 0, 0, 0, 0, 0, 0], 2),
    ("a", 7, 3, [0.95], [1], 1),
    # mismatch at 0 with two off-path values
    ("b", 0, 3, [0.4, 0.2, 0.3], [0, 0, 0], 0),
    # mismatch at 1 whose off-path list is empty: the on-path p of position 2 stands in
    ("b", 1, 2, [0.1, 0.55], [0, 0], 0),
    ("c", 0, 12, [0.99, 0.85, 0.76, 0.6], [1, 1, 1, 1], 4),
])
def test_draft_probs(rid, t, n, probs, flags, k):
    r = windows()[rid]
    w = r.draft_probs(t, n)
    assert w.p.tolist() == probs
    assert w.accepted.tolist() == [bool(f) for f in flags]
    assert w.n_accepted == k == r.leading_accepted(t, n)
    assert r.draft_prob_list(t, n) == (probs, k)    # the simulators' form: Python floats


@pytest.mark.parametrize("t,n", [(-1, 2), (8, 1), (0, 0)])
def test_draft_probs_outside_the_output(t, n):
    with pytest.raises(ValueError, match="cannot draft"):
        windows()["a"].draft_probs(t, n)


def test_draft_probs_invariants_on_synthetic_requests():
    from traces.synth import load_params, synthesize

    _, reqs = synthesize(load_params("opt-66b+opt-1.3b"), {"x": 30}, seed=9)
    rng = np.random.default_rng(0)
    for r in reqs:
        misses = np.flatnonzero(~r.accepted)
        for _ in range(20):
            t = int(rng.integers(0, r.output_len))
            n = int(rng.integers(1, 16))
            w = r.draft_probs(t, n)
            m, k = min(n, r.output_len - t), w.n_accepted
            assert len(w.p) == len(w.accepted) == m
            assert r.accepted[t:t + k].all() and (k == m or not r.accepted[t + k])
            assert w.accepted.tolist() == [True] * k + [False] * (m - k)
            assert np.array_equal(w.p[:k + 1], r.p[t:t + min(k + 1, m)])
            if k + 1 < m:   # past the first mismatch: that mismatch's off-path values
                off = r.offpath[int(np.searchsorted(misses, t + k))]
                take = min(m - k - 1, len(off))
                assert np.array_equal(w.p[k + 1:k + 1 + take], off[:take])
            assert ((w.p > 0) & (w.p <= 1)).all()
        for n in (1, 4, 12):
            assert r.leading_accepted_all(n).tolist() == [r.leading_accepted(t, n)
                                                          for t in range(r.output_len)]


def test_append_after_a_cut_header_starts_anew(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"record": "header", "sch')
    with pytest.warns(UserWarning, match="truncated last line"):
        with TraceWriter(path, header(), append=True) as w:
            w.write(request("r0"))
    assert read_trace(path) == (header(), [request("r0")])
