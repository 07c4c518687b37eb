"""Property test of the trace reader over generated corruptions of valid traces.

Every corrupted file either reads back exactly (the header and each request equal the JSON
record on their line, and writing what was read and reading it again gives the same trace) or
fails with the project's own ``TraceError`` naming the file and the line; never another
exception.

Corruptions: byte flips, inserted and deleted bytes, truncations (of plain and gzip files);
and, record by record, values replaced by ones of a wrong type or out of range (NaN,
Infinity, integers beyond 64 bits, strings, lists, objects, ...), fields deleted, fields added,
lines dropped, duplicated or swapped.

The default suite runs a few hundred examples (a few seconds, derandomized: the same examples
every run). The large run::

    SADDLE_FUZZ_EXAMPLES=10000 python -m pytest -q tests/traces/test_fuzz.py
"""
from __future__ import annotations

import gzip
import json
import math
import os
import re
import tempfile
from pathlib import Path

import numpy as np
import orjson
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from traces.format import RequestTrace, TraceError, TraceHeader  # noqa: E402
from traces.io import read_trace, write_trace  # noqa: E402

EXAMPLES = int(os.environ.get("SADDLE_FUZZ_EXAMPLES", "300"))
FUZZ = settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))


def _base_trace() -> tuple[TraceHeader, list[RequestTrace]]:
    header = TraceHeader(pair="t+d", target="t", draft="d", dataset="fuzz", max_seq_len=64,
                         offpath_len=3, provenance={"seed": 5, "tool": "fuzz", "nested": [1, 2.5]},
                         splits={"validation": 1, "test": 2}, extra={"note": "kept"})
    acc = np.array([1, 0, 1, 0, 0, 1], dtype=bool)
    off = [np.array([0.25, 0.125, 0.5]), np.array([0.75]), np.array([])]
    p = np.array([0.5, 0.1234, 1.0, 1e-5, 0.3, 0.999])
    requests = [
        RequestTrace("r0", "summarization", 7, p, acc, off),
        RequestTrace("r1", "open_qa", 3, p, acc, off,
                     {"target_p": np.array([0.9, 0.5, 1.0, 0.2, 0.3, 0.4]),
                      "entropy": np.array([0.0, 1.5, 2.0, 0.1, 0.2, 3.0]),
                      "topk": [np.array([0.5, 0.25])] * 6, "future": [1, 2, 3, 4, 5, 6]}),
        RequestTrace("r2", "creative_writing", 1, p[:4], np.array([1, 1, 1, 0], dtype=bool),
                     [np.array([0.5, 0.5])], natural_len=3),
    ]
    return header, requests


_WORK = Path(tempfile.mkdtemp(prefix="saddle-fuzz-"))


def _valid_bytes(gz: bool) -> bytes:
    path = _WORK / ("base.jsonl.gz" if gz else "base.jsonl")
    if not path.exists():
        write_trace(path, *_base_trace())
    return path.read_bytes()


PLAIN = _valid_bytes(False)
RECORDS = [json.loads(line) for line in PLAIN.splitlines()]

# -- corruptions -----------------------------------------------------------------------------

odd_values = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-3, max_value=100),
    st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, -1, 0.0, 1.0, 1.0000001, -0.0, 1e-320, 1e308, 2, 64, 65, 10 ** 6]),
    st.text(max_size=6), st.sampled_from(["", "header", "request", "open_qa", "saddle-trace/1",
                                          "\ud800", "r0"]),
    st.lists(st.one_of(st.floats(allow_nan=True), st.integers(-2, 2), st.none(), st.text(max_size=2)),
             max_size=8),
    st.dictionaries(st.text(max_size=4), st.integers(-2, 2), max_size=3),
)


def _paths(value, prefix=()):
    """Every place in a JSON value: key paths into objects and lists."""
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, prefix + (i,))


def _edit(record, path, op, value, new_key):
    """``record`` with the value at ``path`` replaced (``set``), removed (``delete``), or a
    field added beside it (``add``)."""
    record = json.loads(json.dumps(record))
    if not path:
        return value if op == "set" else record
    parent = record
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if op == "set":
        parent[last] = value
    elif op == "delete":
        del parent[last]
    elif isinstance(parent, dict):
        parent[new_key] = value
    else:
        parent.insert(last, value)
    return record


@st.composite
def record_corruption(draw) -> bytes:
    records = list(RECORDS)
    kind = draw(st.sampled_from(["field", "field", "field", "drop", "dup", "swap"]))
    i = draw(st.integers(0, len(records) - 1))
    if kind == "field":
        paths = list(_paths(records[i]))
        path = draw(st.sampled_from(paths))
        op = draw(st.sampled_from(["set", "set", "delete", "add"]))
        key = draw(st.sampled_from(["extra_field", "p", "natural_len", "splits", "entropy", "x"]))
        records[i] = _edit(records[i], path, op, draw(odd_values), key)
    elif kind == "drop":
        del records[i]
    elif kind == "dup":
        records.insert(i, records[i])
    else:
        j = draw(st.integers(0, len(records) - 1))
        records[i], records[j] = records[j], records[i]
    # json.dumps writes NaN / Infinity tokens and big integers, as a careless writer would.
    return b"".join(json.dumps(r, allow_nan=True).encode("utf-8", "surrogatepass") + b"\n"
                    for r in records)


@st.composite
def byte_corruption(draw, data: bytes) -> bytes:
    data = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        if not data:
            break
        kind = draw(st.sampled_from(["flip", "flip", "insert", "delete", "truncate"]))
        at = draw(st.integers(0, len(data) - 1))
        if kind == "flip":
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif kind == "delete":
            del data[at:at + draw(st.integers(1, 8))]
        else:
            del data[at:]
    return bytes(data)


corruptions = st.one_of(
    record_corruption(),
    byte_corruption(PLAIN),
    byte_corruption(_valid_bytes(True)),
    record_corruption().map(gzip.compress),
)

# -- the property ------------------------------------------------------------------------------


def _same_json(a, b) -> bool:
    """JSON values equal, numbers by value (1 == 1.0); NaN is never equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return not (isinstance(a, float) and math.isnan(a)) and a == b
    return type(a) is type(b) and a == b


def _json_int(text: str) -> int | float:
    """JSON integers as the format reads them: exact within 64 bits, else the nearest double."""
    value = int(text)
    return value if -2 ** 63 <= value < 2 ** 64 else float(text)


_counter = iter(range(10 ** 9))


def check_file(data: bytes) -> str:
    """Apply the property to one file's bytes; returns 'read' or 'refused'."""
    path = _WORK / f"case{next(_counter)}.jsonl"
    path.write_bytes(data)
    try:
        header, requests = read_trace(path)
    except TraceError as exc:
        text = str(exc)
        assert text.startswith(f"{path}:") or text.startswith(f"{path} "), text
        assert exc.line is not None or "line" in text, text
        return "refused"
    finally:
        path.unlink()
    raw = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    lines = raw.split(b"\n")
    if lines[-1] == b"":        # (a complete last record may lack its newline)
        lines.pop()
    assert all(lines)
    records = [json.loads(line, parse_int=_json_int) for line in lines]
    assert _same_json(header.to_record(), records[0])
    assert len(requests) == len(records) - 1
    for request, record in zip(requests, records[1:]):
        assert _same_json(request.to_record(), record), (request.to_record(), record)
    again = _WORK / f"again{next(_counter)}.jsonl"
    try:
        write_trace(again, header, requests)
        header2, requests2 = read_trace(again)
    finally:
        again.unlink(missing_ok=True)
    assert header2 == header and requests2 == requests
    return "read"


def test_both_parsers_read_numbers_alike():
    """orjson reads integers beyond 64 bits as doubles; the fallback parser (used for lines
    orjson refuses) does the same."""
    from traces.io import _parse_slowly
    for token in ("5", "-9223372036854775808", "18446744073709551615", "18446744073709551616",
                  "123456789012345678901234567890", "-9223372036854775809", "1e-400"):
        line = b'{"a": [%s]}\n' % token.encode()
        fast, slow = orjson.loads(line), _parse_slowly(line, "f", 1)
        assert fast == slow and type(fast["a"][0]) is type(slow["a"][0]), token


def test_the_base_trace_reads_back():
    for gz in (False, True):
        assert check_file(_valid_bytes(gz)) == "read"


@FUZZ
@given(corruptions)
def test_a_corrupted_trace_reads_back_exactly_or_is_refused_naming_file_and_line(data):
    hypothesis.event(check_file(data))


@pytest.mark.parametrize("data, found", [
    (PLAIN.replace(b'"prompt_len":7', b'"prompt_len":7e400'), "prompt_len"),
    (PLAIN.replace(b'"seed":5', b'"seed":NaN'), "provenance.seed"),
    (PLAIN.replace(b'"future":[1,', b'"future":[Infinity,'), "future[0]"),
    (PLAIN.replace(b'"id":"r0"', b'"id":"\\ud800"'), "cannot be written back"),
    (PLAIN.replace(b'"seed":5', b'"seed":1' + b'0' * 400), "provenance.seed"),
])
def test_values_json_cannot_write_back_are_refused(data, found):
    assert data != PLAIN
    path = _WORK / "odd.jsonl"
    path.write_bytes(data)
    with pytest.raises(TraceError, match=re.escape(found)):
        read_trace(path)
