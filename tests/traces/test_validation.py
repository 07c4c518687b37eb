"""Every check of the reader: a broken copy of the hand-written tiny trace must stop reading
with a message that names the file, the line, the field, what was found and what was expected;
and `saddle trace check` must exit 0 only for a valid file."""
from __future__ import annotations

import gzip
import json

import pytest

from sim.cli import main as saddle
from tests.traces.helpers import TINY
from traces.format import TraceError
from traces.io import read_trace


def records() -> list[dict]:
    return [json.loads(line) for line in TINY.read_text().splitlines()]


def write(path, recs, gz=False):
    text = "".join(json.dumps(r) + "\n" for r in recs).encode()
    path.write_bytes(gzip.compress(text, mtime=0) if gz else text)
    return path


def set_field(line: int, key: str, value):
    """Mutation: record on ``line`` (1-based) gets ``key = value`` (or loses it for ...)."""
    def mutate(recs):
        if value is ...:
            del recs[line - 1][key]
        else:
            recs[line - 1][key] = value
        return recs
    return mutate


def set_item(line: int, key: str, index: int, value):
    def mutate(recs):
        recs[line - 1][key][index] = value
        return recs
    return mutate


# (mutation, line, field, words the message must contain)
CASES = {
    "wrong schema version": (set_field(1, "schema", "saddle-trace/0"), 1, "schema",
                             "found unsupported schema version 'saddle-trace/0', expected 'saddle-trace/1'"),
    "not a header first": (lambda r: r[1:], 1, "record", "found 'request', expected 'header'"),
    "decoding": (set_field(1, "decoding", "sampling"), 1, "decoding", "found 'sampling', expected one of ['greedy']"),
    "max_seq_len type": (set_field(1, "max_seq_len", "1024"), 1, "max_seq_len", "found '1024', expected a positive integer"),
    "offpath_len negative": (set_field(1, "offpath_len", -1), 1, "offpath_len", "found -1, expected an integer >= 0"),
    "provenance missing": (set_field(1, "provenance", ...), 1, "provenance", "found nothing (field missing)"),
    "splits": (set_field(1, "splits", {"val": 2, "test": 2}), 1, "splits",
               "found 4 requests in {'val': 2, 'test': 2}, expected the file's 3 requests"),
    "unknown category": (set_field(3, "category", "poetry"), 3, "category",
                         "found unknown category 'poetry', expected one of ['open_qa',"),
    "probability 1.5": (set_item(2, "p", 3, 1.5), 2, "p[3]", "found 1.5, expected a number in (0, 1]"),
    "probability 0": (set_item(4, "p", 0, 0.0), 4, "p[0]", "found 0.0, expected a number in (0, 1]"),
    "probability a string": (set_item(2, "p", 1, "0.8"), 2, "p[1]", "found '0.8', expected a number in (0, 1]"),
    "probability true": (set_item(2, "p", 1, True), 2, "p[1]", "found True, expected a number"),
    "p not a list": (set_field(2, "p", 0.5), 2, "p", "found 0.5, expected a list of"),
    "p empty": (lambda r: (r[3].update(p=[], accepted=[]), r)[1], 4, "p",
                "found an empty list, expected one probability per output position"),
    "accepted not 0/1": (set_item(2, "accepted", 1, 2), 2, "accepted[1]", "found 2, expected 0 or 1"),
    "accepted huge": (set_item(2, "accepted", 0, 10**30), 2, "accepted[0]", "expected 0 or 1"),
    "probability huge": (set_item(2, "p", 0, 10**400), 2, "p[0]", "expected a number in (0, 1]"),
    "accepted as booleans": (set_item(4, "accepted", 0, True), 4, "accepted[0]", "found True, expected 0 or 1"),
    "accepted length": (lambda r: (r[3]["accepted"].pop(), r)[1], 4, "accepted",
                        "found length 3, expected length 4 (= len(p))"),
    "offpath count": (lambda r: (r[1]["offpath"].pop(), r)[1], 2, "offpath",
                      "found 1 lists, expected 2 (one per position with accepted == 0)"),
    "offpath too long": (set_item(3, "offpath", 0, [0.5, 0.5, 0.5]), 3, "offpath[0]",
                         "found length 3, expected at most offpath_len = 2 values"),
    "offpath value": (set_item(2, "offpath", 1, [1.25]), 2, "offpath[1][0]",
                      "found 1.25, expected a number in (0, 1]"),
    "offpath inner not a list": (set_item(2, "offpath", 1, 0.3), 2, "offpath[1]", "found 0.3, expected a list"),
    "too long for max_seq_len": (set_field(4, "prompt_len", 29), 4, "p",
                                 "found 4 output positions after a prompt of 29, expected prompt_len + len(p) <= max_seq_len 32"),
    "prompt_len type (a corrupted field)": (set_field(3, "prompt_len", "three"), 3, "prompt_len",
                                            "found 'three', expected an integer >= 1"),
    "prompt_len zero": (set_field(3, "prompt_len", 0), 3, "prompt_len", "found 0, expected an integer >= 1"),
    "id missing": (set_field(2, "id", ...), 2, "id", "found nothing (field missing), expected a non-empty string"),
    "duplicate id": (set_field(3, "id", "a"), 3, "id", "found duplicate id 'a' (first on line 2), expected a unique request id"),
    "record kind": (set_field(3, "record", "req"), 3, "record", "found 'req', expected 'request'"),
    "target_p length": (set_field(4, "target_p", [0.5, 0.5]), 4, "target_p", "found length 2, expected length 4"),
    "entropy negative": (set_field(4, "entropy", [0.1, -0.2, 0.0, 1.0]), 4, "entropy[1]",
                         "found -0.2, expected a finite number >= 0 (nats)"),
    "topk value": (set_field(4, "topk", [[0.5], [0.5], [1.5], [0.2]]), 4, "topk[2][0]",
                   "found 1.5, expected a number in [0, 1]"),
    "unknown scalar field": (set_field(4, "temperature", 0.7), 4, "temperature",
                             "found unknown field with value 0.7, expected one of"),
}


@pytest.mark.parametrize("gz", [False, True], ids=["jsonl", "gz"])
@pytest.mark.parametrize("case", list(CASES))
def test_each_error_names_file_line_field(tmp_path, case, gz):
    mutate, line, field, words = CASES[case]
    path = write(tmp_path / ("bad.jsonl.gz" if gz else "bad.jsonl"), mutate(records()), gz)
    with pytest.raises(TraceError) as info:
        read_trace(path)
    err = info.value
    assert (err.source, err.line, err.field) == (str(path), line, field)
    assert str(err).startswith(f"{path}:{line}: {field}: ")
    assert words in str(err)


def test_nan_gets_its_own_message(tmp_path):
    lines = TINY.read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace("0.8, 0.3", "NaN, 0.3")
    path = tmp_path / "nan.jsonl"
    path.write_text("".join(lines))
    with pytest.raises(TraceError, match=r"nan.jsonl:2: p\[1\]: found nan, expected a number in \(0, 1\]"):
        read_trace(path)


@pytest.mark.parametrize("gz", [False, True], ids=["jsonl", "gz"])
@pytest.mark.parametrize("line, key", [(1, "max_seq_len"), (2, "prompt_len"), (3, "id")])
def test_a_key_twice_in_a_record_is_an_error(tmp_path, line, key, gz):
    lines = TINY.read_text().splitlines(keepends=True)
    lines[line - 1] = lines[line - 1].replace(f'"{key}": ', f'"{key}": 7, "{key}": ', 1)
    text = "".join(lines).encode()
    path = tmp_path / ("dup.jsonl.gz" if gz else "dup.jsonl")
    path.write_bytes(gzip.compress(text, mtime=0) if gz else text)
    with pytest.raises(TraceError) as info:
        read_trace(path)
    assert str(info.value) == (f"{path}:{line}: {key}: found the key twice in one JSON object, "
                               "expected each key once")


def test_a_colon_inside_a_string_is_not_a_repeated_key(tmp_path):
    lines = TINY.read_text().splitlines(keepends=True)
    lines[0] = lines[0].replace('"hand-written"', '"hand: written"')
    path = tmp_path / "colon.jsonl"
    path.write_text("".join(lines))
    assert read_trace(path)[0].dataset == "hand: written"


def test_invalid_json_line(tmp_path):
    lines = TINY.read_text().splitlines(keepends=True)
    lines[2] = lines[2].rstrip().rstrip("}") + "\n"   # the object is never closed
    path = tmp_path / "j.jsonl"
    path.write_text("".join(lines))
    with pytest.raises(TraceError, match=r"j.jsonl:3: found invalid JSON \(.* at column \d+\), "
                                         r"expected one JSON object per line"):
        read_trace(path)


def test_empty_line(tmp_path):
    path = tmp_path / "e.jsonl"
    path.write_text(TINY.read_text().replace("\n", "\n\n", 1))
    with pytest.raises(TraceError, match=r"e.jsonl:2: found an empty line"):
        read_trace(path)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    with pytest.raises(TraceError, match=r"empty.jsonl: found an empty file, expected a header record on line 1"):
        read_trace(path)


def test_missing_file(tmp_path):
    with pytest.raises(Exception, match=r"nope.jsonl: no such trace file"):
        read_trace(tmp_path / "nope.jsonl")


def test_truncated_plain_last_line(tmp_path):
    path = tmp_path / "cut.jsonl"
    path.write_bytes(TINY.read_bytes()[:-20])
    with pytest.raises(TraceError, match=r"cut.jsonl:4: found a truncated last line \(no newline"):
        read_trace(path)


def test_truncated_gzip(tmp_path):
    path = tmp_path / "cut.jsonl.gz"
    data = gzip.compress(TINY.read_bytes(), mtime=0)
    path.write_bytes(data[:len(data) * 2 // 3])
    with pytest.raises(TraceError, match=r"cut.jsonl.gz: found a truncated gzip stream after line \d "
                                         r"\(.*\), expected a complete gzip file"):
        read_trace(path)


def test_corrupt_gzip(tmp_path):
    path = tmp_path / "bad.jsonl.gz"
    data = bytearray(gzip.compress(TINY.read_bytes(), mtime=0))
    data[-6] ^= 0xFF   # inside the CRC-32 / length trailer
    path.write_bytes(bytes(data))
    with pytest.raises(TraceError, match=r"bad.jsonl.gz: found corrupt gzip data after line \d \(.*\), "
                                         r"expected a valid gzip stream"):
        read_trace(path)


# -- the command -----------------------------------------------------------------------------

def test_check_command_accepts_a_valid_file(capsys):
    assert saddle(["trace", "check", str(TINY)]) == 0
    out = capsys.readouterr().out
    assert "valid saddle-trace/1" in out and "3 requests, 15 output tokens" in out
    assert "open_qa 2, creative_writing 1" in out


def test_check_command_rejects_a_corrupted_field(tmp_path, capsys):
    recs = records()
    recs[2]["accepted"][1] = 7
    path = write(tmp_path / "bad.jsonl.gz", recs, gz=True)
    assert saddle(["trace", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f"saddle: error: {path}:3: accepted[1]: found 7, expected 0 or 1\n"


def test_check_command_rejects_a_header_only_file(tmp_path, capsys):
    path = write(tmp_path / "h.jsonl", records()[:1])
    assert saddle(["trace", "check", str(path)]) == 2
    assert "found no request records" in capsys.readouterr().err
