"""Reading and writing ``saddle-trace/1`` files (JSON Lines, optionally gzip).

The reader streams and checks every record (see ``traces.format``); any problem stops it with
a ``TraceError`` naming the file, the line, the field, what it found and what it expected.
Gzip files may consist of several appended members (a resumed capture appends one).

The writer flushes after every record, so an interrupted run leaves a file whose complete
records are all readable; ``TraceWriter(..., append=True)`` and ``ids_in`` then drop the cut
last record with a warning instead of failing, so a capture can resume where it stopped.
"""
from __future__ import annotations

import gzip
import json
import os
import warnings
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

import orjson

from common.errors import SaddleError
from traces.format import RequestTrace, TraceError, TraceHeader, _Checker

_GZIP_MAGIC = b"\x1f\x8b"
# Measured on a 29 MB trace: level 4 compresses in 0.8 s to 9.6 MB, zlib's default 6 takes
# 3.4 s for 9.2 MB; 4 keeps a 1024 x 1024 trace inside the write budget of the benchmark.
_GZIP_LEVEL = 4


class TruncatedTrace(TraceError):
    """The file ends in the middle of a record (an interrupted write)."""


def _is_gzip(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(2) == _GZIP_MAGIC


def _check_exists(path: Path) -> None:
    if path.is_dir():
        raise SaddleError(f"{path}: is a directory, expected a trace file (.jsonl or .jsonl.gz)")
    if not path.is_file():
        raise SaddleError(f"{path}: no such trace file")


def _open_write(path: Path, mode: str, gz: bool):
    raw = path.open(mode)
    if not gz:
        return raw
    # filename="" and mtime=0 keep the gzip header free of names and clocks: same bytes per run.
    return _ClosingGzip(raw)


class _ClosingGzip(gzip.GzipFile):
    """A GzipFile that also closes the raw file it was given."""

    def __init__(self, raw):
        super().__init__(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=_GZIP_LEVEL)
        self._raw = raw

    def close(self):
        try:
            super().close()
        finally:
            self._raw.close()


_CHUNK = 1 << 16


def _gunzip(f) -> Iterator[bytes]:
    """Decompressed data of consecutive gzip members, as it comes. Unlike gzip.GzipFile it
    hands out everything before a cut, then raises EOFError, so a resume keeps every complete
    record; corrupt data or a bad checksum raise zlib.error."""
    member = zlib.decompressobj(wbits=31)
    fed = False
    while chunk := f.read(_CHUNK):
        while chunk:
            fed = True
            out = member.decompress(chunk)
            if out:
                yield out
            if not member.eof:
                break
            chunk = member.unused_data
            member = zlib.decompressobj(wbits=31)
            fed = False
    if fed and not member.eof:
        raise EOFError


def _split_lines(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """Lines (with their newline) of a stream of chunks; a last line may lack the newline."""
    pending: list[bytes] = []
    for chunk in chunks:
        parts = chunk.split(b"\n")
        if len(parts) > 1:
            yield b"".join(pending) + parts[0] + b"\n"
            for part in parts[1:-1]:
                yield part + b"\n"
            pending = []
        if parts[-1]:
            pending.append(parts[-1])
    if pending:
        yield b"".join(pending)


def _raw_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes) of every line; truncated or corrupt compression is a TraceError."""
    _check_exists(path)
    source = str(path)
    number = 0
    with path.open("rb") as f:
        gz = f.read(2) == _GZIP_MAGIC
        f.seek(0)
        lines = _split_lines(_gunzip(f)) if gz else iter(f)
        try:
            for raw in lines:
                number += 1
                yield number, raw
        except EOFError:
            raise TruncatedTrace(source, None, None,
                                 f"a truncated gzip stream after line {number} (the compressed "
                                 "data ends before its end-of-stream marker: the file was cut off)",
                                 "a complete gzip file") from None
        except zlib.error as exc:
            raise TraceError(source, None, None, f"corrupt gzip data after line {number} ({exc})",
                             "a valid gzip stream") from None


def _records(path: Path) -> Iterator[tuple[int, bytes, object]]:
    """(line number, bytes, parsed JSON) of every line."""
    source = str(path)
    for number, raw in _raw_lines(path):
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError:
            record = _parse_slowly(raw, source, number)
        # orjson keeps the last of a repeated key silently. A flat record has one colon per
        # key; a line with more (nesting, colons in strings, a repeated key) is read again
        # with every key pair seen.
        if isinstance(record, dict) and raw.count(b":") != len(record):
            _check_unique_keys(raw, source, number)
        yield number, raw, record


def _check_unique_keys(raw: bytes, source: str, number: int) -> None:
    def pairs(items: list[tuple[str, object]]) -> dict:
        keys = [key for key, _ in items]
        for key in keys:
            if keys.count(key) > 1:
                raise TraceError(source, number, key, "the key twice in one JSON object",
                                 "each key once")
        return dict(items)
    try:
        json.loads(raw, object_pairs_hook=pairs)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        pass    # _parse_slowly has explained what orjson refused; orjson read the rest


def _parse_slowly(raw: bytes, source: str, number: int) -> object:
    """What orjson refuses: the json module reads NaN and Infinity (so that the field check
    can name them), and otherwise explains the syntax error."""
    # Without its line end: an error at the end of a cut line is then at the column after its
    # last character, not at column 1 of the line after it (where json would put it).
    line = raw[:-1] if raw.endswith(b"\n") else raw
    line = line[:-1] if line.endswith(b"\r") else line
    try:
        record = json.loads(line, parse_int=_number)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        if not raw.endswith(b"\n"):
            raise TruncatedTrace(source, number, None,
                                 "a truncated last line (no newline at the end of the file)",
                                 "one complete JSON object per line") from None
        if isinstance(exc, json.JSONDecodeError):
            # Columns count characters of the line (json counts from the last newline).
            reason = f"{exc.msg} at column {exc.pos + 1}"
        else:
            reason = f"bytes that are not UTF-8 at column {exc.start + 1}"
        found = "an empty line" if not line.strip() else f"invalid JSON ({reason})"
        raise TraceError(source, number, None, found, "one JSON object per line") from None
    except RecursionError:
        raise TraceError(source, number, None, "JSON nested too deeply",
                         "one JSON object per line") from None
    try:    # what orjson reads it also writes; the json module lets lone surrogates through
        orjson.dumps(record)
    except orjson.JSONEncodeError as exc:
        raise TraceError(source, number, None, f"a value that cannot be written back as JSON ({exc})",
                         "valid Unicode strings") from None
    return record


def _number(text: str) -> int | float:
    """An integer token as orjson reads it: exact within 64 bits, else the nearest double (so
    both parsers read a file alike and what was read writes back)."""
    value = int(text) if len(text) < 40 else None
    return value if value is not None and -2 ** 63 <= value < 2 ** 64 else float(text)


def _header_of(records: Iterator, path: Path) -> TraceHeader:
    first = next(records, None)
    if first is None:
        raise TraceError(str(path), None, None, "an empty file", "a header record on line 1")
    number, _, record = first
    return TraceHeader.from_record(record, str(path), number)


def iter_trace(path: str | Path) -> tuple[TraceHeader, Iterator[RequestTrace]]:
    """The header, and an iterator that reads and checks one request at a time."""
    path = Path(path)
    records = _records(path)
    header = _header_of(records, path)
    return header, _requests(records, header, path)


def _requests(records: Iterator, header: TraceHeader, path: Path) -> Iterator[RequestTrace]:
    source = str(path)
    first_line: dict[str, int] = {}
    for number, _, record in records:
        request = RequestTrace.from_record(record, header, source, number)
        if request.id in first_line:
            raise TraceError(source, number, "id", f"duplicate id {request.id!r} "
                             f"(first on line {first_line[request.id]})", "a unique request id")
        first_line[request.id] = number
        yield request
    if header.splits is not None and sum(header.splits.values()) != len(first_line):
        raise TraceError(source, 1, "splits", f"{sum(header.splits.values())} requests in "
                         f"{header.splits}", f"the file's {len(first_line)} requests")


def read_trace(path: str | Path) -> tuple[TraceHeader, list[RequestTrace]]:
    """The whole trace, checked."""
    header, requests = iter_trace(path)
    return header, list(requests)


def _complete_prefix(path: Path) -> tuple[TraceHeader | None, list[bytes], list[str], bool]:
    """Header, raw complete lines, request ids, and whether a cut last record was dropped."""
    lines: list[bytes] = []
    records = _kept(_records(path), lines)
    ids: list[str] = []
    header = None
    try:
        header = _header_of(records, path)
        for request in _requests(records, header, path):
            ids.append(request.id)
    except TruncatedTrace as exc:
        warnings.warn(f"{exc}; dropping the incomplete last record", stacklevel=3)
        return header, lines, ids, True
    return header, lines, ids, False


def _kept(records: Iterator, lines: list[bytes]) -> Iterator:
    """Passes records through, keeping each one's line (newline-terminated) in ``lines``."""
    for item in records:
        lines.append(item[1] if item[1].endswith(b"\n") else item[1] + b"\n")
        yield item


def ids_in(path: str | Path) -> list[str]:
    """Ids of the complete requests in ``path``, in file order ([] if the file does not exist).
    A cut last record (interrupted write) is dropped with a warning; other problems raise."""
    path = Path(path)
    if not path.exists():
        return []
    return _complete_prefix(path)[2]


class TraceWriter:
    """Writes a trace; ``with TraceWriter(path, header) as w: w.write(request)``.

    ``path`` ending in ``.gz`` is gzip-compressed (deterministically: no name, mtime 0). With
    ``append=True`` an existing file must have an equal header; its complete records are kept
    (a cut last record is removed, with a warning) and new records are appended after them.
    Every record is checked against the header before it is written; ids must be unique.
    """

    def __init__(self, path: str | Path, header: TraceHeader, append: bool = False):
        self.path = Path(path)
        self.header = header
        self._ids: set[str] = set()
        if append and self.path.exists() and self.path.stat().st_size and self._prepare_append():
            self._file = _open_write(self.path, "ab", _is_gzip(self.path))
        else:
            self._file = _open_write(self.path, "wb", self.path.suffix == ".gz")
            self._put(orjson.dumps(header.to_record()))

    def _prepare_append(self) -> bool:
        """Check the existing header and drop a cut last record; False if not even the header
        is complete (the file is then written anew)."""
        existing, lines, ids, cut = _complete_prefix(self.path)
        if existing is None:
            return False
        mine, theirs = self.header.to_record(), existing.to_record()
        differ = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
        if differ:
            key = differ[0]
            raise TraceError(str(self.path), 1, key, _show_value(theirs.get(key)),
                             f"{_show_value(mine.get(key))} (the header of the run appending; "
                             f"differing fields: {', '.join(differ)})")
        self._ids.update(ids)
        if cut:
            self._rewrite(lines, _is_gzip(self.path))
        return True

    def _rewrite(self, lines: list[bytes], gz: bool) -> None:
        """Replace the file by its complete records, atomically."""
        tmp = self.path.with_name(self.path.name + ".repair")
        with _open_write(tmp, "wb", gz) as out:
            out.writelines(lines)
        os.replace(tmp, self.path)

    def _put(self, line: bytes) -> None:
        self._file.write(line)
        self._file.write(b"\n")
        self._file.flush()

    def write(self, request: RequestTrace) -> None:
        request.validate(self.header, _Checker(f"{self.path} (writing request {request.id!r})", None))
        if request.id in self._ids:
            raise TraceError(str(self.path), None, "id", f"duplicate id {request.id!r}",
                             "a request id not yet in the file")
        self._ids.add(request.id)
        self._put(request.to_json())

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def write_trace(path: str | Path, header: TraceHeader, requests: Iterable[RequestTrace]) -> None:
    """A whole trace in one go."""
    with TraceWriter(path, header) as writer:
        for request in requests:
            writer.write(request)


def _show_value(value) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."
