"""YAML loading with errors that name the file and the key path.

Every parameter of the project lives in ``configs/``. Code reads it through these helpers so
that a wrong or missing value is reported as ``FILE: key.path: expected ..., found ...``.
"""
from __future__ import annotations

import copy
import difflib
import math
from functools import lru_cache
from pathlib import Path
from typing import Any, cast

import yaml

from common.errors import ConfigError
from common.paths import CONFIGS


def load_yaml(path: str | Path) -> dict:
    """A YAML mapping, the caller's own copy; a missing file, a syntax error or a non-mapping
    is a ConfigError."""
    data = load_yaml_document(path)
    if data is None:
        raise ConfigError(f"{path}: the file is empty (no keys); expected a mapping of keys")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of keys at the top level, found a "
                          f"{type(data).__name__}")
    return data


def load_yaml_list(path: str | Path) -> list:
    """A YAML list (an empty file: an empty list), checked as ``load_yaml`` checks a mapping."""
    data = load_yaml_document(path)
    if data is None:
        return []
    if not isinstance(data, list):
        raise ConfigError(f"{path}: expected a list at the top level, found {type(data).__name__}")
    return data


def load_yaml_document(path: str | Path) -> Any:
    """Any YAML document, the caller's own copy; a missing file, a syntax error or a key given
    twice is a ConfigError."""
    path = Path(path)
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        data = copy.deepcopy(_parse(text))
    except DuplicateKey as exc:
        raise ConfigError(f"{path}: line {exc.line}: key {exc.key!r} given twice (first at line "
                          f"{exc.first}); a YAML mapping takes each key once") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}:{where} invalid YAML: {getattr(exc, 'problem', exc)}") from None
    return data


@lru_cache(maxsize=256)
def _parse(text: bytes):
    """The YAML document in ``text``, parsed once per content: a grid resolves every run's
    configs (hundreds of loads of a few dozen files), and PyYAML's parser is pure Python.
    Keyed by the bytes, not the file's time stamp (coarser than a rewrite in a test)."""
    return yaml.load(text, Loader=_UniqueKeyLoader)


class DuplicateKey(yaml.YAMLError):
    """A mapping that names one key twice (PyYAML keeps the last silently)."""

    def __init__(self, key: object, first: int, line: int) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key, self.first, self.line = key, first, line


class _UniqueKeyLoader(yaml.SafeLoader):
    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict[object, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    if key in seen:
                        raise DuplicateKey(key, seen[key], line)
                except TypeError:       # an unhashable key: SafeLoader's own error names it
                    break
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def suggest(word: object, choices) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices`` to ``word``, or ''."""
    if not isinstance(word, str):
        return ""
    close = difflib.get_close_matches(word, [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def known_names(kind: str) -> list[str]:
    """Names of the ``configs/<kind>/*.yaml`` files."""
    return sorted(p.stem for p in (CONFIGS / kind).glob("*.yaml"))


_KIND_NAMES = {"models/pairs": "pair", "models": "model", "systems": "system",
               "experiments": "experiment", "traces": "trace", "calibration": "calibration",
               "sweeps": "sweep"}


def config_path(kind: str, name: str, *, source: str | Path | None = None,
                where: str | None = None) -> Path:
    """``configs/<kind>/<name>.yaml``; an unknown name lists the known ones and suggests the
    closest. ``source`` and ``where`` (a key path) say where the name was read."""
    path = CONFIGS / kind / f"{name}.yaml" if isinstance(name, str) and name else None
    try:
        found = path is not None and path.is_file() and path.parent == CONFIGS / kind
    except OSError:         # a name no file can have (too long, a NUL byte)
        found = False
    if path is None or not found:
        known = known_names(kind)
        what = _KIND_NAMES.get(kind, kind)
        place = f"{source}: " if source else ""
        place += f"{where}: " if where else ""
        raise ConfigError(f"{place}unknown {what} config {name!r}{suggest(name, known)}; known: "
                          f"{', '.join(known) or 'none'}")
    return path


def check_keys(data: dict, known, *, source: str | Path, where: str = "") -> None:
    """A ConfigError for the first key of ``data`` not in ``known``, with the closest known key
    suggested (a typo such as ``draft_lenght`` fails here, not later as a missing key)."""
    for key in data:
        if key not in known:
            path = f"{where}.{key}" if where else str(key)
            raise ConfigError(f"{source}: {path}: unknown key{suggest(key, known)}; expected "
                              f"some of {', '.join(sorted(known))}")


def get(data: dict, key: str, kind: type | tuple[type, ...], *, source: str | Path,
        prefix: str = "", default: Any = ..., positive: bool = False) -> Any:
    """``data[key]`` checked against ``kind``; errors name ``source`` and the dotted key path.

    ``bool`` never passes for ``int`` or ``float``; ``int`` passes for ``float``. With
    ``positive`` the number must be finite and > 0.
    """
    where = f"{prefix}.{key}" if prefix else key
    if not isinstance(data, dict):          # the value holding the key is not a mapping
        raise ConfigError(f"{source}: {prefix or '(top level)'}: expected a mapping with "
                          f"{key!r}, found {data!r}")
    if key not in data:
        if default is not ...:
            return default
        raise ConfigError(f"{source}: missing key {where!r}")
    value = data[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if float in kinds and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise ConfigError(f"{source}: {where}: expected {names}, found {value!r}")
    if positive and not (math.isfinite(cast(float, value)) and cast(float, value) > 0):
        raise ConfigError(f"{source}: {where}: expected a positive number, found {value!r}")
    return value


def positive_int(text: str) -> int:
    """An argparse ``type``: a command-line count that must be a positive integer."""
    import argparse

    if text.isdigit() and int(text) > 0:
        return int(text)
    raise argparse.ArgumentTypeError(f"expected a positive integer, found {text!r}")
