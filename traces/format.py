"""The decoding-trace format ``saddle-trace/1``: records, their validation, and draft windows.

A trace is JSON Lines (optionally gzip): one header record, then one record per request.
The format is documented in ``traces/README.md``. This module holds the in-memory form
(``TraceHeader``, ``RequestTrace``), the conversion from and to JSON records with complete
checking, and ``RequestTrace.draft_probs``: the one place where the simulator and the
statistics read what a drafted token's probability is and whether it is accepted, so both
always agree.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain
from typing import Any, NamedTuple

import numpy as np
import orjson

from common.errors import SaddleError
from traces.path import PathLists, values_along_path

SCHEMA_VERSION = "saddle-trace/1"

# Dolly (databricks-dolly-15k) categories, most requests first.
CATEGORIES = (
    "open_qa", "general_qa", "classification", "closed_qa", "brainstorming",
    "information_extraction", "summarization", "creative_writing",
)

DECODING_MODES = ("greedy",)

_HEADER_FIELDS = ("record", "schema", "pair", "target", "draft", "dataset", "decoding",
                  "max_seq_len", "offpath_len", "provenance")
_REQUEST_FIELDS = ("record", "id", "category", "prompt_len", "p", "accepted", "offpath", "natural_len")
# Optional per-position arrays with a defined meaning. Any other extra request field must
# also be a per-position array (a list with one entry per output position).
OPTIONAL_ARRAYS = ("target_p", "entropy", "topk")
# Optional lists shaped like ``offpath`` (one list per mismatch, as long as its off-path list).
OFFPATH_ARRAYS = ("offpath_entropy",)

_PROB = "a number in (0, 1]"
_ENTROPY = "a finite number >= 0 (nats)"


class TraceError(SaddleError, ValueError):
    """Bad trace content. The message names the file, the line, the field, what was found and
    what was expected: ``FILE:LINE: FIELD: found X, expected Y``."""

    def __init__(self, source: str, line: int | None, field: str | None, found: str,
                 expected: str | None = None):
        self.source, self.line, self.field = source, line, field
        self.found, self.expected = found, expected
        where = f"{source}:{line}" if line is not None else f"{source}"
        what = f" {field}:" if field else ""
        tail = f", expected {expected}" if expected else ""
        super().__init__(f"{where}:{what} found {found}{tail}")


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _Checker:
    """Raises TraceError for one record, with the file and line filled in."""

    def __init__(self, source: str, line: int | None):
        self.source, self.line = source, line

    def fail(self, field: str | None, found: str, expected: str | None = None):
        raise TraceError(self.source, self.line, field, found, expected)

    def field(self, record: dict, key: str, kind: type, expected: str):
        if key not in record:
            self.fail(key, "nothing (field missing)", expected)
        value = record[key]
        if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
            self.fail(key, _show(value), expected)
        return value

    def floats(self, values: Any, key: str, expected: str, low: float, high: float,
               low_open: bool, sizes: np.ndarray | None = None) -> np.ndarray:
        """A list of numbers as float64, every one finite and within the bounds. ``sizes``:
        the list is the concatenation of sub-lists of these sizes (named ``key[k][j]``)."""
        if not isinstance(values, list):
            self.fail(key, _show(values), f"a list of {expected}s")
        if not set(map(type, values)) <= {float, int}:   # also refuses JSON true/false
            i = next(i for i, v in enumerate(values) if type(v) not in (float, int))
            self.fail(_element(key, i, sizes), _show(values[i]), expected)
        try:
            arr = np.asarray(values, dtype=np.float64) if values else np.zeros(0)
        except OverflowError:   # an integer beyond float64
            i = next(i for i, v in enumerate(values) if abs(v) > 1e308)
            self.fail(_element(key, i, sizes), _show(values[i]), expected)
        self.bounds(arr, key, expected, low, high, low_open, sizes)
        return arr

    def bounds(self, arr: np.ndarray, key: str, expected: str, low: float, high: float,
               low_open: bool, sizes: np.ndarray | None = None):
        # NaN fails both comparisons, so it is caught here too.
        bad = ~((arr > low) if low_open else (arr >= low)) | ~(arr <= high)
        if bad.any():
            i = int(np.argmax(bad))
            self.fail(_element(key, i, sizes), _show(float(arr[i])), expected)


MAX_DEPTH = 64


def check_free_json(check: _Checker, key: str, value: Any) -> None:
    """A field without a fixed shape (provenance, unknown header fields, unknown per-position
    arrays) must still be plain JSON that writes back as read: finite numbers (no NaN or
    Infinity, which JSON does not have) and at most ``MAX_DEPTH`` levels of nesting."""
    stack = [(key, value, 0)]
    while stack:
        where, item, depth = stack.pop()
        if depth > MAX_DEPTH:
            check.fail(where, f"values nested deeper than {MAX_DEPTH} levels", "plain JSON data")
        if isinstance(item, float) and not np.isfinite(item):
            check.fail(where, _show(item), "a finite number (JSON has no NaN or Infinity)")
        elif isinstance(item, dict):
            stack.extend((f"{where}.{k}", v, depth + 1) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", v, depth + 1) for i, v in enumerate(item))


def _element(key: str, i: int, sizes: np.ndarray | None) -> str:
    if sizes is None:
        return f"{key}[{i}]"
    k = int(np.searchsorted(np.cumsum(sizes), i, side="right"))
    return f"{key}[{k}][{i - int(sizes[:k].sum())}]"


@dataclass
class TraceHeader:
    """The first record of a trace. ``splits`` (optional) names consecutive blocks of requests
    in file order, e.g. ``{"validation": 256, "test": 256}``; ``extra`` keeps header fields
    this version does not know, so they survive a read/write round trip."""

    pair: str
    target: str
    draft: str
    dataset: str
    max_seq_len: int
    offpath_len: int
    provenance: dict
    decoding: str = "greedy"
    splits: dict[str, int] | None = None
    extra: dict = field(default_factory=dict)

    def to_record(self) -> dict:
        record = {"record": "header", "schema": SCHEMA_VERSION, "pair": self.pair,
                  "target": self.target, "draft": self.draft, "dataset": self.dataset,
                  "decoding": self.decoding, "max_seq_len": self.max_seq_len,
                  "offpath_len": self.offpath_len, "provenance": self.provenance}
        if self.splits is not None:
            record["splits"] = self.splits
        record.update(self.extra)
        return record

    @classmethod
    def from_record(cls, record: Any, source: str = "<trace>", line: int | None = 1) -> TraceHeader:
        check = _Checker(source, line)
        if not isinstance(record, dict):
            check.fail(None, _show(record), "a JSON object (the header record)")
        if record.get("record") != "header":
            check.fail("record", _show(record.get("record")), "'header' on the first line")
        schema = record.get("schema")
        if schema != SCHEMA_VERSION:
            check.fail("schema", f"unsupported schema version {_show(schema)}", repr(SCHEMA_VERSION))
        names = {key: check.field(record, key, str, "a non-empty string")
                 for key in ("pair", "target", "draft", "dataset")}
        for key, value in names.items():
            if not value:
                check.fail(key, "''", "a non-empty string")
        decoding = check.field(record, "decoding", str, f"one of {list(DECODING_MODES)}")
        if decoding not in DECODING_MODES:
            check.fail("decoding", _show(decoding), f"one of {list(DECODING_MODES)}")
        max_seq_len = check.field(record, "max_seq_len", int, "a positive integer")
        if max_seq_len < 2:
            check.fail("max_seq_len", _show(max_seq_len), "an integer >= 2")
        offpath_len = check.field(record, "offpath_len", int, "an integer >= 0")
        if offpath_len < 0:
            check.fail("offpath_len", _show(offpath_len), "an integer >= 0")
        provenance = check.field(record, "provenance", dict, "a JSON object")
        splits = record.get("splits")
        if "splits" in record:      # optional: absent, not null (what is read writes back)
            if not isinstance(splits, dict) or not all(
                    isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
                    for k, v in splits.items()):
                check.fail("splits", _show(splits), "an object of split name -> request count >= 0")
        extra = {k: v for k, v in record.items() if k not in _HEADER_FIELDS and k != "splits"}
        check_free_json(check, "provenance", provenance)
        for key, value in extra.items():
            check_free_json(check, key, value)
        return cls(pair=names["pair"], target=names["target"], draft=names["draft"],
                   dataset=names["dataset"], max_seq_len=max_seq_len, offpath_len=offpath_len,
                   provenance=provenance, decoding=decoding, splits=splits, extra=extra)


class DraftWindow(NamedTuple):
    """What drafting ``n`` tokens from position ``t`` looks like along the DLM's own path.

    ``p[j]``: the DLM's probability of its j-th drafted token; ``accepted[j]``: whether greedy
    verification accepts it (true for the first ``n_accepted`` tokens, false from the first
    mismatch on); ``n_accepted``: number of leading accepted tokens."""

    p: np.ndarray
    accepted: np.ndarray
    n_accepted: int


@dataclass
class RequestTrace:
    """One request: its category, prompt length and per-output-position DLM behaviour.

    ``p[i]``: the DLM's probability of its own greedy token at output position i given the
    target's tokens 0..i-1. ``accepted[i]``: that token equals the target's token at i.
    ``offpath[k]``: for the k-th position i with ``accepted[i] == False``, the DLM's
    probabilities of its greedy tokens at i+1, i+2, ... continuing from its own wrong token.
    ``extra``: optional per-position arrays (``target_p``, ``entropy``, ``topk``, ...).
    ``natural_len``: where the target's own output ended (its end-of-sequence token) when the
    record goes on past it (a synthetic trace extended for a fixed sequence length, see
    traces/synth.py); ``None``: the record is the natural output (every captured trace).
    Treat the arrays as read-only: the acceptance accessors index them once and cache that.
    """

    id: str
    category: str
    prompt_len: int
    p: np.ndarray
    accepted: np.ndarray
    offpath: list[np.ndarray]
    extra: dict = field(default_factory=dict)
    natural_len: int | None = None
    _run: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)
    _mismatch_rank: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)
    # Python-list copies of per-token values, for the drafting hot path (_values_along_path).
    _lists: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def output_len(self) -> int:
        """Output positions recorded (natural output and any extension)."""
        return len(self.p)

    @property
    def natural_output_len(self) -> int:
        """Output positions up to the target's natural end."""
        return len(self.p) if self.natural_len is None else self.natural_len

    def truncated(self, n: int) -> RequestTrace:
        """The first ``n`` output positions (1 <= n <= output_len) as a request of their own:
        the off-path lists of mismatches before n, each cut so it never passes position
        n - 1, the optional arrays cut to n. What a run that ends the output at n reads."""
        if not 1 <= n <= len(self.p):
            raise ValueError(f"request {self.id}: cannot keep {n} of {len(self.p)} output positions")
        if n == len(self.p):
            return self
        miss = np.flatnonzero(~self.accepted[:n])
        offpath = [self.offpath[k][:n - 1 - i] for k, i in enumerate(miss.tolist())]
        extra = {k: ([v[j][:len(o)] for j, o in enumerate(offpath)] if k in OFFPATH_ARRAYS else v[:n])
                 for k, v in self.extra.items()}
        natural = None if self.natural_len is None or self.natural_len >= n else self.natural_len
        return RequestTrace(self.id, self.category, self.prompt_len, self.p[:n], self.accepted[:n],
                            offpath, extra, natural)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RequestTrace):
            return NotImplemented
        return (self.id == other.id and self.category == other.category
                and self.prompt_len == other.prompt_len
                and self.natural_len == other.natural_len
                and np.array_equal(self.p, other.p)
                and np.array_equal(self.accepted, other.accepted)
                and len(self.offpath) == len(other.offpath)
                and all(np.array_equal(a, b) for a, b in zip(self.offpath, other.offpath))
                and _plain(self.extra) == _plain(other.extra))

    # -- acceptance along the DLM's path -----------------------------------------------------

    def _index(self):
        if self._run is None:
            miss = np.flatnonzero(~self.accepted)
            positions = np.arange(len(self.p))
            rank = np.searchsorted(miss, positions)
            next_miss = np.append(miss, len(self.p))[rank]
            self._run = next_miss - positions        # leading accepted tokens from each position
            self._mismatch_rank = rank               # index into offpath of a mismatch at i
        return self._run, self._mismatch_rank

    def _window(self, t: int, n: int) -> int:
        if not 0 <= t < len(self.p) or n < 1:
            raise ValueError(f"request {self.id}: cannot draft {n} tokens at position {t} "
                             f"of an output of {len(self.p)} positions")
        return min(n, len(self.p) - t)

    def leading_accepted(self, t: int, n: int) -> int:
        """Accepted tokens of a draft of ``n`` tokens at ``t`` (clipped to the output's end)."""
        m = self._window(t, n)          # checks t first
        return min(self._run_list()[t], m)

    def leading_accepted_all(self, n: int) -> np.ndarray:
        """``leading_accepted(t, n)`` for every output position t, as one array."""
        if n < 1:
            raise ValueError(f"request {self.id}: cannot draft {n} tokens")
        run, _ = self._index()
        return np.minimum(run, np.minimum(n, len(self.p) - np.arange(len(self.p))))

    def fixed_d_rounds(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """Greedy speculative decoding with draft length ``d`` over the whole output: the
        accepted (k) and drafted (m) tokens of every round. A round at t drafts
        m = min(d, output_len - t), accepts k = ``leading_accepted(t, d)`` and emits k + 1
        tokens (the target's correction or bonus token last), so the next starts at t + k + 1."""
        if d < 1:
            raise ValueError(f"request {self.id}: draft length {d} must be >= 1")
        run = self._run_list()
        n = len(run)
        accepted, drafted = [], []
        t = 0
        while t < n:
            m = min(d, n - t)
            k = min(run[t], m)
            accepted.append(k)
            drafted.append(m)
            t += k + 1
        return np.array(accepted, dtype=np.int64), np.array(drafted, dtype=np.int64)

    def draft_probs(self, t: int, n: int) -> DraftWindow:
        """The DLM drafts ``n`` tokens at positions t..t+n-1 after the target produced 0..t-1.

        Drafts never extend past the output's last position, so the window has
        ``min(n, output_len - t)`` tokens. Up to and including the first mismatch at position
        i the probabilities are the on-path ``p``; after it they come from ``offpath`` of that
        mismatch. Beyond the recorded off-path values (more than ``offpath_len`` tokens past a
        mismatch) the last recorded off-path probability is repeated; if none was recorded,
        the on-path ``p`` of those positions stands in.
        """
        probs, k = self.draft_prob_list(t, n)
        flags = np.zeros(len(probs), dtype=bool)
        flags[:k] = True
        return DraftWindow(np.array(probs, dtype=np.float64), flags, k)

    def draft_prob_list(self, t: int, n: int) -> tuple[list[float], int]:
        """``draft_probs(t, n)``'s probabilities as Python floats and its accepted count: what
        a simulator asks at every round's start, without building arrays."""
        return self._values_along_path(t, n, "p")

    def draft_entropy(self, t: int, n: int) -> np.ndarray:
        """The DLM's entropy (nats) at each token of ``draft_probs(t, n)``: the on-path
        ``entropy`` up to and including the first mismatch, ``offpath_entropy`` after it, with
        the same fallback beyond the recorded values. A trace without both fields cannot say
        (``MissingField``: the caller names the file)."""
        for key in ("entropy", "offpath_entropy"):
            if key not in self.extra:
                raise MissingField(self.id, key)
        return np.array(self._values_along_path(t, n, "entropy")[0], dtype=np.float64)

    def _run_list(self) -> list[int]:
        run = self._lists.get("run")
        if run is None:
            run = self._lists["run"] = self._index()[0].tolist()
        return run

    def _value_lists(self, name: str) -> tuple[list[float], list[list[float]], list[int]]:
        """(on-path values, off-path values per mismatch, mismatch rank per position) of the
        per-token value ``name`` (``p`` or ``entropy``) as Python lists, made once."""
        found = self._lists.get(name)
        if found is None:
            if name == "p":
                onpath, offpath = self.p, self.offpath
            else:
                onpath, offpath = self.extra["entropy"], self.extra["offpath_entropy"]
            found = self._lists[name] = (np.asarray(onpath, dtype=np.float64).tolist(),
                                         [np.asarray(o, dtype=np.float64).tolist() for o in offpath],
                                         self._index()[1].tolist())
        return found

    def drafting_lists(self, name: str = "p") -> PathLists:
        """``traces.path.values_along_path``'s lists for the value ``name`` (``p``, ``entropy``),
        made once: a simulator keeps them per request and asks that function at every round's
        start, checking ``t`` and ``n`` itself (``_values_along_path`` says how)."""
        return (self._run_list(), *self._value_lists(name))

    def _values_along_path(self, t: int, n: int, name: str) -> tuple[list[float], int]:
        """A per-token value of the DLM (its probability, its entropy) at the tokens it drafts
        when asked for ``n`` from ``t`` (``draft_probs``' window and path rule), and how many
        of them are accepted (``traces.path.values_along_path``)."""
        lists = self.drafting_lists(name)
        if not 0 <= t < len(lists[0]) or n < 1:
            self._window(t, n)                      # raises
        return values_along_path(*lists, t, n)

    # -- JSON records ------------------------------------------------------------------------

    def to_record(self) -> dict:
        record = {"record": "request", "id": self.id, "category": self.category,
                  "prompt_len": int(self.prompt_len), "p": self.p.tolist(),
                  "accepted": self.accepted.astype(np.int8).tolist(),
                  "offpath": [o.tolist() for o in self.offpath]}
        if self.natural_len is not None:
            record["natural_len"] = int(self.natural_len)
        record.update(_plain(self.extra))
        return record

    def to_json(self) -> bytes:
        """The record as compact UTF-8 JSON, serialised by orjson straight from the arrays."""
        record = {"record": "request", "id": self.id, "category": self.category,
                  "prompt_len": int(self.prompt_len), "p": self.p,
                  "accepted": self.accepted.view(np.uint8), "offpath": self.offpath}
        if self.natural_len is not None:
            record["natural_len"] = int(self.natural_len)
        record.update(self.extra)
        try:
            return orjson.dumps(record, option=orjson.OPT_SERIALIZE_NUMPY)
        except orjson.JSONEncodeError:   # e.g. a non-contiguous or object array: go by lists
            return orjson.dumps(self.to_record())

    @classmethod
    def from_record(cls, record: Any, header: TraceHeader, source: str = "<trace>",
                    line: int | None = None) -> RequestTrace:
        check = _Checker(source, line)
        if not isinstance(record, dict):
            check.fail(None, _show(record), "a JSON object (a request record)")
        if record.get("record") != "request":
            check.fail("record", _show(record.get("record")), "'request'")
        rid = check.field(record, "id", str, "a non-empty string")
        category = check.field(record, "category", str, f"one of {list(CATEGORIES)}")
        prompt_len = check.field(record, "prompt_len", int, "an integer >= 1")
        p = check.floats(record.get("p"), "p", _PROB, 0.0, 1.0, True)
        raw_acc = record.get("accepted")
        if not isinstance(raw_acc, list):
            check.fail("accepted", _show(raw_acc), "a list of 0 or 1")
        if not set(map(type, raw_acc)) <= {int}:
            i = next(i for i, v in enumerate(raw_acc) if type(v) is not int)
            check.fail(f"accepted[{i}]", _show(raw_acc[i]), "0 or 1")
        if not set(raw_acc) <= {0, 1}:
            i = next(i for i, v in enumerate(raw_acc) if v not in (0, 1))
            check.fail(f"accepted[{i}]", _show(raw_acc[i]), "0 or 1")
        acc = np.asarray(raw_acc, dtype=np.int64) if raw_acc else np.zeros(0, dtype=np.int64)
        raw_off = record.get("offpath")
        if not isinstance(raw_off, list):
            check.fail("offpath", _show(raw_off), "a list with one list of probabilities per mismatch")
        if not set(map(type, raw_off)) <= {list}:
            k = next(k for k, v in enumerate(raw_off) if not isinstance(v, list))
            check.fail(f"offpath[{k}]", _show(raw_off[k]), f"a list of {_PROB}s")
        # One vectorised check over all off-path values; then views, one per mismatch.
        sizes = np.fromiter(map(len, raw_off), dtype=np.int64, count=len(raw_off))
        flat = check.floats(list(chain.from_iterable(raw_off)), "offpath", _PROB, 0.0, 1.0,
                            True, sizes)
        offpath = split_flat(flat, sizes)
        natural_len = record.get("natural_len")
        if "natural_len" in record and (type(natural_len) is not int or not 1 <= natural_len <= len(p)):
            # optional: absent, not null (what is read writes back)
            check.fail("natural_len", _show(natural_len), f"an integer in [1, {len(p)}] (= len(p)), "
                       "or no natural_len field")
        extra = {}
        for key, value in record.items():
            if key in _REQUEST_FIELDS:
                continue
            if key in OFFPATH_ARRAYS:
                extra[key] = _offpath_array(check, key, value, sizes)
                continue
            extra[key] = _optional_array(check, key, value, len(p))
        request = cls(rid, category, prompt_len, p, acc.astype(bool), offpath, extra, natural_len)
        request.validate(header, check, values=False)
        return request

    def validate(self, header: TraceHeader, check: _Checker | None = None,
                 values: bool = True) -> None:
        """Check the agreement of lengths with each other and with the header, and (with
        ``values``) the probabilities' range."""
        check = check or _Checker("<request>", None)
        if not self.id:
            check.fail("id", "''", "a non-empty string")
        if self.category not in CATEGORIES:
            check.fail("category", f"unknown category {_show(self.category)}", f"one of {list(CATEGORIES)}")
        if self.prompt_len < 1:
            check.fail("prompt_len", _show(self.prompt_len), "an integer >= 1")
        n = len(self.p)
        if n < 1:
            check.fail("p", "an empty list", "one probability per output position (at least one)")
        if values:
            check.bounds(self.p, "p", _PROB, 0.0, 1.0, True)
        if self.prompt_len + n > header.max_seq_len:
            check.fail("p", f"{n} output positions after a prompt of {self.prompt_len}",
                       f"prompt_len + len(p) <= max_seq_len {header.max_seq_len}")
        if self.natural_len is not None and not 1 <= self.natural_len <= n:
            check.fail("natural_len", _show(self.natural_len), f"an integer in [1, {n}] (= len(p))")
        if len(self.accepted) != n:
            check.fail("accepted", f"length {len(self.accepted)}", f"length {n} (= len(p))")
        mismatches = int(n - np.count_nonzero(self.accepted))
        if len(self.offpath) != mismatches:
            check.fail("offpath", f"{len(self.offpath)} lists",
                       f"{mismatches} (one per position with accepted == 0)")
        if self.offpath:
            sizes = np.fromiter(map(len, self.offpath), dtype=np.int64, count=len(self.offpath))
            if (sizes > header.offpath_len).any():
                k = int(np.argmax(sizes > header.offpath_len))
                check.fail(f"offpath[{k}]", f"length {sizes[k]}",
                           f"at most offpath_len = {header.offpath_len} values")
            if values:
                check.bounds(np.concatenate(self.offpath), "offpath", _PROB, 0.0, 1.0, True, sizes)
        for key, value in self.extra.items():
            if key in OFFPATH_ARRAYS:
                sizes = np.fromiter(map(len, self.offpath), dtype=np.int64, count=len(self.offpath))
                _offpath_array(check, key, _plain(value), sizes)
                continue
            if len(value) != n:
                check.fail(key, f"length {len(value)}", f"length {n} (= len(p))")
            if values and key in OPTIONAL_ARRAYS:
                _optional_array(check, key, _plain(value), n)


def _optional_array(check: _Checker, key: str, value: Any, n: int):
    if key == "target_p":
        arr = check.floats(value, key, _PROB, 0.0, 1.0, True)
    elif key == "entropy":
        arr = check.floats(value, key, _ENTROPY, 0.0, float(np.finfo(np.float64).max), False)
    elif key == "topk":
        if not isinstance(value, list):
            check.fail(key, _show(value), "a list with one list of top-k probabilities per position")
        arr = [check.floats(v, f"topk[{i}]", "a number in [0, 1]", 0.0, 1.0, False)
               for i, v in enumerate(value)]
    elif isinstance(value, list):
        check_free_json(check, key, value)
        arr = value
    else:
        check.fail(key, f"unknown field with value {_show(value)}",
                   f"one of {list(_REQUEST_FIELDS[1:])} or a per-position list")
    if len(arr) != n:
        check.fail(key, f"length {len(arr)}", f"length {n} (= len(p))")
    return arr


def _offpath_array(check: _Checker, key: str, value: Any, sizes: np.ndarray) -> list[np.ndarray]:
    """An ``OFFPATH_ARRAYS`` field: one list per mismatch, each as long as its ``offpath`` list
    (``sizes``), of entropies."""
    if not isinstance(value, list) or not all(isinstance(v, list) for v in value):
        check.fail(key, _show(value), "a list with one list of entropies per mismatch (as offpath)")
    if len(value) != len(sizes):
        check.fail(key, f"{len(value)} lists", f"{len(sizes)} (one per offpath list)")
    own = np.fromiter(map(len, value), dtype=np.int64, count=len(value))
    if (own != sizes).any():
        k = int(np.argmax(own != sizes))
        check.fail(f"{key}[{k}]", f"length {own[k]}", f"length {sizes[k]} (= len(offpath[{k}]))")
    flat = check.floats(list(chain.from_iterable(value)), key, _ENTROPY, 0.0,
                        float(np.finfo(np.float64).max), False, sizes)
    return split_flat(flat, sizes)


class MissingField(SaddleError, ValueError):
    """A request lacks an optional field that a computation needs."""

    def __init__(self, request: str, key: str):
        self.request, self.key = request, key
        super().__init__(f"request {request}: no {key!r} field")


def split_flat(flat: np.ndarray, sizes: np.ndarray) -> list[np.ndarray]:
    """``flat`` cut into consecutive views of the given sizes (an off-path list)."""
    ends = np.cumsum(sizes).tolist()
    return [flat[a:b] for a, b in zip([0] + ends[:-1], ends)]


def _plain(value: Any) -> Any:
    """Numpy arrays (also nested in lists and dicts) as JSON-ready Python lists."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
