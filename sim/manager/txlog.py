"""Transaction logs: a Manager run as JSON Lines, for replay and RTL co-verification.

Line 1 is a header ``{"format": "saddle-manager-txlog", "version": 1, "config": {...}}`` (the
shape of ``configs/manager.yaml``; ``"softmax": {...}`` for DraftLogits), every further line
one input and optionally its events, ``{"in": {"type": "DraftToken", ...}, "out": [...]}``.
``replay`` feeds the inputs to a fresh model (or another implementation, e.g. the RTL behind a
testbench adapter) and reports the first line whose outputs differ. Same inputs, same bytes.
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from common.errors import SaddleError
from sim.manager.config import ManagerConfig
from sim.manager.manager import Manager
from sim.manager.softmax import SoftmaxParams
from sim.manager.transactions import INPUTS, from_dict, to_dict

FORMAT = "saddle-manager-txlog"
VERSION = 1


def _line(obj) -> str:
    return json.dumps(obj, separators=(",", ":")) + "\n"


def write_txlog(path: str | Path, config: ManagerConfig, pairs: Iterable[tuple[object, list | None]],
                softmax: SoftmaxParams | None = None) -> None:
    """Write the log of ``pairs`` (input, outputs or None for an inputs-only line)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = {"format": FORMAT, "version": VERSION, "config": config.to_dict()}
    if softmax is not None:
        header["softmax"] = dataclasses.asdict(softmax)
    with path.open("w") as f:
        f.write(_line(header))
        for txn, events in pairs:
            entry: dict[str, object] = {"in": to_dict(txn)}
            if events is not None:
                entry["out"] = [to_dict(e) for e in events]
            f.write(_line(entry))


@dataclass
class TxLog:
    config: ManagerConfig
    entries: Sequence[tuple[object, list | None]]     # (input, outputs or None)
    path: str
    softmax: SoftmaxParams | None = None          # needed to replay DraftLogits


def read_txlog(path: str | Path) -> TxLog:
    """Parse and validate a log; errors name ``FILE:LINE`` and the key."""
    path = Path(path)
    if not path.is_file():
        raise SaddleError(f"{path}: no such transaction log")
    entries = []
    config = softmax = None
    with path.open() as f:
        for number, text in enumerate(f, start=1):
            where = f"{path}:{number}"
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise SaddleError(f"{where}: invalid JSON: {exc.msg}") from None
            if number == 1:
                if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != VERSION:
                    raise SaddleError(f"{where}: expected a header with format {FORMAT!r} version {VERSION}")
                if not isinstance(data.get("config"), dict):
                    raise SaddleError(f"{where}: header: missing object 'config'")
                config = ManagerConfig.from_dict(data["config"], source=f"{where}: config")
                if "softmax" in data:
                    softmax = _softmax(data["softmax"], f"{where}: softmax")
                continue
            if not isinstance(data, dict) or "in" not in data or set(data) - {"in", "out"}:
                raise SaddleError(f"{where}: expected an object with 'in' and optionally 'out'")
            txn = from_dict(data["in"], source=f"{where}: in")
            if not isinstance(txn, INPUTS):
                raise SaddleError(f"{where}: in: {type(txn).__name__} is an output, not an input")
            events = None
            if "out" in data:
                if not isinstance(data["out"], list):
                    raise SaddleError(f"{where}: out: expected a list")
                events = [from_dict(e, source=f"{where}: out[{i}]") for i, e in enumerate(data["out"])]
                if any(isinstance(e, INPUTS) for e in events):
                    raise SaddleError(f"{where}: out: holds an input transaction")
            entries.append((txn, events))
    if config is None:
        raise SaddleError(f"{path}: empty transaction log (no header)")
    return TxLog(config, entries, str(path), softmax)


def _softmax(data, where: str) -> SoftmaxParams:
    keys = [f.name for f in dataclasses.fields(SoftmaxParams)]
    if not isinstance(data, dict) or set(data) != set(keys):
        raise SaddleError(f"{where}: expected an object with keys {', '.join(keys)}")
    try:
        return SoftmaxParams(**data)
    except ValueError as exc:
        raise SaddleError(f"{where}: {exc}") from None


@dataclass
class Mismatch:
    line: int
    txn: object
    expected: list
    actual: list

    def describe(self) -> str:
        return (f"line {self.line}: {to_dict(self.txn)}\n  expected {[to_dict(e) for e in self.expected]}\n"
                f"  actual   {[to_dict(e) for e in self.actual]}")


def replay(log: TxLog, apply: Callable[[object], list] | None = None) -> Mismatch | None:
    """Feed the log's inputs to ``apply`` (default: a fresh model with the log's config) and
    compare with the recorded outputs; the first difference, or None if all match. Entries
    without outputs are applied and not compared."""
    if apply is None:
        apply = Manager(log.config, log.softmax).apply
    for index, (txn, expected) in enumerate(log.entries):
        actual = apply(txn)
        if expected is not None and actual != expected:
            return Mismatch(index + 2, txn, expected, actual)
    return None
