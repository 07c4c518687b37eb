"""The config files as a run reads them: ``Configs``, a run's overrides applied to every file
it loads, and the objects its loaders build, each built once.

Loaders (``load_model``, ``load_gpu``, ``ManagerConfig.load``, ...) take the context as
``configs=``; without one they read the shipped files (``BASE``). Runs with other overrides get
another context (``Configs.of``), so an object built from other values is never reused; a
grid's runs with the same overrides share one. The YAML helpers live in ``common.config``.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any, ClassVar, TypeVar, cast

from common.config import get, load_yaml
from common.errors import ConfigError
from sim.overrides import patch, resolve

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class Configs:
    """The config files with one set of overrides applied, and what was loaded from them."""

    KEPT: ClassVar[int] = 2
    _shared: ClassVar[dict[tuple, Configs]] = {}

    def __init__(self, overrides: tuple[tuple[str, object], ...] = ()) -> None:
        self.overrides = tuple(overrides)
        self._patches: dict[Path, list] = {}       # (key path, value) pairs by file
        for key, value in self.overrides:
            path, keys = resolve(key, "override")
            self._patches.setdefault(path.resolve(), []).append((keys, value))
        self._loaded: dict[Hashable, Any] = {}

    @classmethod
    def of(cls, overrides: tuple[tuple[str, object], ...] = ()) -> Configs:
        """The context every run with these overrides shares. Only the last few are kept: a
        sweep over a config value makes a context per point, each with its cost adapters'
        price caches, and runs of one point follow each other."""
        if not overrides:
            return BASE
        found = cls._shared.pop(overrides, None) or cls(overrides)
        cls._shared[overrides] = found
        while len(cls._shared) > cls.KEPT:
            del cls._shared[next(iter(cls._shared))]
        return found

    def yaml(self, path: str | Path) -> dict:
        """The file's mapping (the caller's own copy) with this context's overrides set."""
        patches = self._patches.get(Path(path).resolve()) if self._patches else None
        return patch(load_yaml(path), patches) if patches else load_yaml(path)

    def cached(self, key: Hashable, build: Callable[[], T]) -> T:
        """``build()``, once per ``key`` in this context."""
        try:
            return cast(T, self._loaded[key])
        except KeyError:
            value = self._loaded[key] = build()
            return value


BASE = Configs()


def loader(fn: F) -> F:
    """``fn(*args, configs=...)`` built once per context and arguments."""
    @functools.wraps(fn)
    def load(*args, configs: Configs = BASE, **kwargs):
        key = (fn.__module__, fn.__qualname__, args, tuple(sorted(kwargs.items())))
        return configs.cached(key, lambda: fn(*args, configs=configs, **kwargs))
    return cast(F, load)


CALIBRATIONS = ("physical", "attacc")


def calibrated(data: dict, calibration: str, *, source: str | Path) -> dict:
    """A component preset with the overrides of one calibration applied: its own keys are its
    ``physical`` values; ``calibrations: {NAME: {key: value}}`` replaces keys for calibration
    NAME (a mapping value, such as one link of links.yaml, is merged key by key)."""
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
