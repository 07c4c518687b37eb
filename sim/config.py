"""YAML loading with errors that name the file and the key path.

Every parameter of the project lives in ``configs/``. Code reads it through these helpers so
that a wrong or missing value is reported as ``FILE: key.path: expected ..., found ...``.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

from sim.errors import ConfigError
from sim.paths import CONFIGS


def load_yaml(path: str | Path) -> dict:
    """Load a YAML mapping; a missing file, a syntax error or a non-mapping is a ConfigError."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    try:
        with path.open() as f:
            data = yaml.safe_load(f)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}:{where} invalid YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, found {type(data).__name__}")
    return data


def config_path(kind: str, name: str) -> Path:
    """``configs/<kind>/<name>.yaml``; an unknown name lists the known ones."""
    path = CONFIGS / kind / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in (CONFIGS / kind).glob("*.yaml"))
        raise ConfigError(f"unknown {kind} config {name!r}; known: {', '.join(known) or 'none'}")
    return path


def get(data: dict, key: str, kind: type | tuple[type, ...], *, source: str | Path,
        prefix: str = "", default: Any = ..., positive: bool = False) -> Any:
    """``data[key]`` checked against ``kind``; errors name ``source`` and the dotted key path.

    ``bool`` never passes for ``int`` or ``float``; ``int`` passes for ``float``. With
    ``positive`` the number must be finite and > 0.
    """
    where = f"{prefix}.{key}" if prefix else key
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
    if positive and not (math.isfinite(value) and value > 0):
        raise ConfigError(f"{source}: {where}: expected a positive number, found {value!r}")
    return value


CALIBRATIONS = ("physical", "attacc")


def calibrated(data: dict, calibration: str, *, source: str | Path) -> dict:
    """A component preset with the overrides of one calibration applied.

    A preset's own keys are its ``physical`` values; ``calibrations: {NAME: {key: value}}``
    replaces keys for calibration NAME (a mapping value, such as one link of links.yaml, is
    merged key by key). A calibration the preset does not mention leaves it as it is."""
    if calibration not in CALIBRATIONS:
        raise ConfigError(f"{source}: unknown calibration {calibration!r}; known: "
                          f"{', '.join(CALIBRATIONS)}")
    table = get(data, "calibrations", dict, source=source, default={})
    for name in table:
        if name not in CALIBRATIONS:
            raise ConfigError(f"{source}: calibrations.{name}: unknown calibration; known: "
                              f"{', '.join(CALIBRATIONS)}")
    out = {k: v for k, v in data.items() if k != "calibrations"}
    overrides = table.get(calibration) or {}
    if not isinstance(overrides, dict):
        raise ConfigError(f"{source}: calibrations.{calibration}: expected a mapping, found {overrides!r}")
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out
