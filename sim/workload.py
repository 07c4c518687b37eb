"""Requests of one run, taken from a trace, and how they enter the batch.

Splits. When the trace header declares ``splits`` (consecutive blocks of requests in file
order) those are used; otherwise a request goes to validation iff the first 8 bytes of
sha256("<seed>:<id>") read as a fraction are below ``validation_fraction`` (deterministic,
independent of file order and of the trace's size).

Batch formation. ``continuous`` (default): a slot freed by a finished request is refilled at
once with the next request in split order. ``fixed``: the next batch starts only when every
request of the current one has finished.

Output length: natural (``sequence_length`` None): where the target's output ended
(``natural_len``, or the whole record), cut so that prompt plus output fit ``max_seq_len``; at
the paper's fixed sequence length L: L - prompt_len tokens, read from the trace's positions past
the natural end (traces/synth.py extends the synthetic traces); a trace that does not reach L is
an error, never a silent cut. Each request is truncated to its output length
(``RequestTrace.truncated``), so a run never reads a position past its request's end.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from common.errors import ConfigError
from traces.format import RequestTrace, TraceHeader

SPLITS = ("validation", "test", "all")
BATCHING = ("continuous", "fixed")


@dataclass(frozen=True)
class Workload:
    """``requests``: truncated to their output length in this workload (module doc)."""
    header: TraceHeader
    requests: tuple[RequestTrace, ...]
    max_seq_len: int
    sequence_length: int | None = None

    @property
    def total_output(self) -> int:
        return sum(r.output_len for r in self.requests)


def output_length(request: RequestTrace, max_seq_len: int, sequence_length: int | None,
                  source: str, trace: str) -> int:
    """Output tokens of ``request`` in the natural mode or at ``sequence_length`` (module doc)."""
    if sequence_length is None:
        return max(1, min(request.natural_output_len, max_seq_len - request.prompt_len))
    n = sequence_length - request.prompt_len
    if n < 1:
        raise ConfigError(f"{source}: sequence_length {sequence_length}: request {request.id} of "
                          f"{trace} has a prompt of {request.prompt_len} tokens, so its context "
                          f"is already past it")
    if n > request.output_len:
        what = ("ends at its natural end (a captured trace stays as captured)"
                if request.natural_len is None else "was extended only that far")
        raise ConfigError(f"{source}: sequence_length {sequence_length}: request {request.id} of "
                          f"{trace} reaches context {request.prompt_len + request.output_len} "
                          f"(prompt {request.prompt_len} + {request.output_len} output positions; "
                          f"it {what}); use the natural workload (sequence_length: [null], as "
                          f"experiment real-trace) or a synthetic trace extended that far "
                          f"(saddle trace synth --context {sequence_length})")
    return n


def _hash_fraction(seed: int, rid: str) -> float:
    digest = hashlib.sha256(f"{seed}:{rid}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2 ** 64


def split_requests(header: TraceHeader, requests: list[RequestTrace], split: str, *,
                   seed: int, validation_fraction: float, source: str) -> list[RequestTrace]:
    if split not in SPLITS:
        raise ConfigError(f"{source}: split: expected one of {list(SPLITS)}, found {split!r}")
    if split == "all":
        return list(requests)
    if header.splits:
        start = 0
        for name, count in header.splits.items():
            if name == split:
                return list(requests[start:start + count])
            start += count
        raise ConfigError(f"{source}: the trace declares splits {list(header.splits)}, not {split!r}")
    want_validation = split == "validation"
    return [r for r in requests
            if (_hash_fraction(seed, r.id) < validation_fraction) == want_validation]


@lru_cache(maxsize=4)
def _read(path: str, mtime_ns: int, size: int):
    """A trace read once per process while the file is unchanged (a grid reads the same
    trace for every batch size and for the validation split)."""
    from traces.io import read_trace  # the trace reader validates every record
    return read_trace(path)


def load_workload(trace_path: str | Path, *, split: str, n_requests: int | None, seed: int,
                  validation_fraction: float, max_seq_len: int | None, source: str,
                  sequence_length: int | None = None) -> Workload:
    """Requests of ``split`` (first ``n_requests`` of it, if given) from a trace file."""
    stat = Path(trace_path).stat()
    header, requests = _read(str(trace_path), stat.st_mtime_ns, stat.st_size)
    chosen = split_requests(header, requests, split, seed=seed,
                            validation_fraction=validation_fraction, source=source)
    if n_requests is not None:
        if n_requests > len(chosen):
            raise ConfigError(f"{source}: requests: {n_requests} asked, the {split} split of "
                              f"{trace_path} has {len(chosen)}")
        chosen = chosen[:n_requests]
    if not chosen:
        raise ConfigError(f"{source}: the {split} split of {trace_path} is empty")
    if sequence_length is not None and (isinstance(sequence_length, bool) or sequence_length < 2):
        raise ConfigError(f"{source}: sequence_length: expected an integer >= 2, found {sequence_length}")
    max_seq = max_seq_len or header.max_seq_len
    truncated = tuple(r.truncated(output_length(r, max_seq, sequence_length, source, str(trace_path)))
                      for r in chosen)
    return Workload(header, truncated, max_seq, sequence_length)


class BatchFormer:
    """Hands out requests to batch slots, in workload order (see module doc)."""

    def __init__(self, workload: Workload, batch: int, mode: str, source: str = "<experiment>"):
        if mode not in BATCHING:
            raise ConfigError(f"{source}: batching: expected one of {list(BATCHING)}, found {mode!r}")
        if batch < 1:
            raise ConfigError(f"{source}: batch: expected an integer >= 1, found {batch}")
        self.batch = batch
        self.mode = mode
        self._queue = list(workload.requests)
        self._next = 0
        self._running = 0

    def initial(self) -> list[RequestTrace]:
        return self._take(self.batch)

    def on_finish(self) -> list[RequestTrace]:
        """A request finished; the requests that enter the batch now (maybe none)."""
        self._running -= 1
        if self.mode == "continuous":
            return self._take(1)
        return self._take(self.batch) if self._running == 0 else []

    def _take(self, n: int) -> list[RequestTrace]:
        taken = self._queue[self._next:self._next + n]
        self._next += len(taken)
        self._running += len(taken)
        return taken

    @property
    def exhausted(self) -> bool:
        """Every request has entered the batch."""
        return self._next >= len(self._queue)

    @property
    def done(self) -> bool:
        return self._next >= len(self._queue) and self._running == 0
