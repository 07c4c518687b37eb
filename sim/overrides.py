"""Overrides of config-file values for one run: ``dotted key -> value``.

A key names a file of ``configs/`` and a key inside it, dots between:
``hardware.hbm3_pim.pim.mac_spacing`` is ``pim.mac_spacing`` of ``configs/hardware/hbm3_pim.yaml``,
``manager.pools.shared_entries`` is ``pools.shared_entries`` of ``configs/manager.yaml``. A file
name may hold dots (``models.opt-1.3b.layers``): the longest file name that starts the key wins.
Only a value the file already has can be overridden (a mapping is not a value: name its keys),
with a value of the same kind (a number for a number, a string for a string, ...; a loader's
own checks then refuse what it cannot use, such as a fractional count); an unknown key is
refused with the closest key suggested.

An override of a key that a calibration of the file also sets (``calibrations.attacc.nvlink.
step_latency_ns`` of ``links.yaml``) sets it there too: the override holds under every
calibration. ``calibrations.NAME.key`` overrides one calibration's value only.

Overrides are part of a run's parameters (``RunParams.overrides``), so of its key and digest:
a changed value is a new run, never a cached one. A run reads its config files through a
``sim.config.Configs`` made for its overrides, which sets them (``patch``) in every file it
loads and keeps the objects built from them apart from those of other overrides.
"""
from __future__ import annotations

from functools import cache
from pathlib import Path

from common.config import load_yaml, suggest
from common.errors import ConfigError
from common.paths import CONFIGS

# What an override may change: hardware, models, systems, Manager timing (folders) and the
# Manager files (configs/manager*.yaml). Experiments are what a sweep varies by its own keys;
# tau has its own key; the trace generator's files decide a trace's content, which runs are
# matched by, not its parameters.
FOLDERS = ("hardware", "models", "systems", "timing")
REFUSED = {"experiments": "set the experiment's own keys instead (batch, pair, workload.requests, ...)",
           "tau": "use the key tau", "traces": "a trace is chosen by its file, not its generator",
           "synth": "synthesis settings are not part of a run",
           "calibration": "calibration records are not read by runs"}


@cache
def config_files() -> dict[str, Path]:
    """Every overridable config file by its dotted name (``hardware.hbm3_pim``)."""
    files = {}
    for path in sorted(CONFIGS.rglob("*.yaml")):
        parts = path.relative_to(CONFIGS).with_suffix("").parts
        if len(parts) == 1 and parts[0].startswith("manager") or parts[0] in FOLDERS and len(parts) > 1:
            files[".".join(parts)] = path
    return files


def _leaves(data: dict, prefix: tuple = ()) -> list[tuple]:
    out = []
    for key, value in data.items():
        path = prefix + (str(key),)
        out.extend(_leaves(value, path) if isinstance(value, dict) else [path])
    return out


def resolve(key: str, where: str) -> tuple[Path, tuple[str, ...]]:
    """The file and the key path inside it that ``key`` names; ``where`` says where it was read."""
    files = config_files()
    name = max((f for f in files if key.startswith(f + ".")), key=len, default=None)
    if name is None:
        head = key.split(".")[0]
        if head in REFUSED:
            raise ConfigError(f"{where}: configs/{head}/ cannot be overridden: {REFUSED[head]}")
        known = [f"{n}.{'.'.join(k)}" for n, p in files.items() for k in _leaves(load_yaml(p))]
        raise ConfigError(f"{where}: unknown key{suggest(key, known)}; a config key starts with a "
                          f"file of configs/ ({', '.join(FOLDERS)}/NAME or manager)")
    path = files[name]
    keys = tuple(key[len(name) + 1:].split("."))
    data = load_yaml(path)
    if keys not in _leaves(data):
        near = suggest(".".join(keys), [".".join(k) for k in _leaves(data)])
        what = "a mapping, not a value: name one of its keys" if isinstance(_walk(data, keys), dict) \
            else "unknown key"
        raise ConfigError(f"{where}: {what}{near} (in {path.relative_to(CONFIGS.parent)})")
    return path, keys


def _walk(data, keys):
    for k in keys:
        if not isinstance(data, dict) or k not in data:
            return None
        data = data[k]
    return data


def check(key: str, value, where: str):
    """``value`` for ``key`` as it will be set (an integer given where the file has a float becomes one),
    or a ConfigError naming ``where`` when the key is unknown or the value of another kind."""
    path, keys = resolve(key, where)
    have = _walk(load_yaml(path), keys)
    number = (int, float)
    if have is None or value is None:
        return value
    if isinstance(have, bool) or isinstance(value, bool):
        ok = isinstance(have, bool) and isinstance(value, bool)
    elif isinstance(have, number):      # the loader refuses a float where it wants an integer
        ok = isinstance(value, number)
        value = float(value) if ok and isinstance(have, float) else value
    else:
        ok = isinstance(value, type(have))
    if not ok:
        kind = "a number" if isinstance(have, number) and not isinstance(have, bool) else \
            f"a {type(have).__name__}"
        raise ConfigError(f"{where}: expected {kind} (as {have!r} in "
                          f"{path.relative_to(CONFIGS.parent)}), found {value!r}")
    return value


def blamed(exc: ConfigError, overrides: tuple[tuple[str, object], ...],
           where: str) -> ConfigError:
    """``exc`` addressed to the override that set the value it is about (``where.KEY``),
    rather than to the config file that only received it; otherwise ``exc`` itself."""
    message = str(exc)
    for key, value in overrides:
        path, keys = resolve(key, where)
        head = f"{path}: {'.'.join(keys)}"
        if message.startswith(head) and message[len(head):len(head) + 1] in (":", " "):
            said = message[len(head):].lstrip(": ")
            return ConfigError(f"{where}.{key}: {value!r}: {said} (it replaces "
                               f"{path.relative_to(CONFIGS.parent)}'s value)")
    for key, value in overrides:        # another key of a file an override changed
        path, _ = resolve(key, where)
        if message.startswith(f"{path}: "):
            return ConfigError(f"{where}.{key}: {value!r}: {message}")
    return exc


def normalize(overrides: dict, where: str) -> tuple[tuple[str, object], ...]:
    """Checked overrides in the form ``RunParams.overrides`` holds: sorted (key, value) pairs."""
    if not isinstance(overrides, dict):
        raise ConfigError(f"{where}: expected a mapping of config key -> value, found {overrides!r}")
    return tuple(sorted((k, check(k, v, f"{where}.{k}")) for k, v in overrides.items()))


def patch(data: dict, patches: list) -> dict:
    """``data`` (freshly loaded, so changed in place) with every ``(key path, value)`` set,
    in each calibration that sets the key as well."""
    tables = [t for t in (data.get("calibrations") or {}).values() if isinstance(t, dict)]
    for keys, value in patches:
        targets = [data] + ([] if keys[0] == "calibrations" else
                            [t for t in tables if _walk(t, keys) is not None])
        for target in targets:
            node = target
            for k in keys[:-1]:
                node = node[k]
            node[keys[-1]] = value
    return data
