"""Sweep files and their points.

A sweep (``configs/sweeps/NAME.yaml``)::

    name: pool-batch                 # results go to results/sweeps/<name>/
    description: ...
    experiment: sweep-saddle         # the base: a name in configs/experiments/ or a path
    grid:                            # every combination of these values
      batch: [8, 16, 32]
      manager.pools.shared_entries: [32, 64, 512]
    zip:                             # optional: equal-length lists taken together
      pair: [opt-66b+opt-1.3b, opt-175b+opt-6.7b]
      tau: [0.8, 0.9]
    sample:                          # optional: points drawn from ranges (sim/sweeps/sampling.py)
      method: lhs                    # or random
      points: 8
      seed: 0
      ranges: {hardware.links.nvlink.step_latency_ns: [700, 6060]}
    plot: {metrics: [tokens_per_s], x: batch, y: manager.pools.shared_entries, facet: pair}
                                     # optional (defaults: the axes in order); best: max or min;
                                     # best_per: facet (default) or y (a heatmap's best x per y)

The points are grid x zip x sample (at least one given). A key is a key of the experiment
(``RUN_KEYS``: ``batch: 16`` makes ``batches: [16]``) or a config-file key (sim/overrides.py),
set through the experiment's ``overrides``. Each point is the base experiment so edited and
checked as ``saddle run`` checks one, before anything runs; it gives a row per run.
"""
from __future__ import annotations

import copy
import dataclasses
import itertools
from dataclasses import dataclass
from pathlib import Path

from common.config import check_keys, get, load_yaml, suggest
from common.errors import ConfigError
from report.sweep_plots import SYSTEM, check_plot
from sim.experiments.grid import (
    ENTRY_KEYS,
    WORKLOAD_KEYS,
    check_name,
    load_experiment,
    resolve_path,
)
from sim.sweeps.sampling import SAMPLERS
from sim.systems.run import RunParams

SWEEP_KEYS = ("name", "description", "experiment", "grid", "zip", "sample", "plot")
SAMPLE_KEYS = ("method", "points", "seed", "ranges")
# Keys of the experiment a point may set: its grid's own dimensions, the per-system settings
# (set on every system entry) and the workload's.
RUN_KEYS = ("pair", "batch", "system", "sequence_length", "tau") + \
    tuple(k for k in ENTRY_KEYS if k not in ("system", "batches", "tau", "label")) + \
    tuple(f"workload.{k}" for k in WORKLOAD_KEYS)


@dataclass(frozen=True)
class Sweep:
    name: str
    source: str
    experiment: Path
    axes: tuple[str, ...]
    points: tuple[dict, ...]
    runs: tuple[tuple[int, RunParams], ...]     # (point index, run), point order
    plot: dict | None
    warnings: tuple[str, ...] = ()              # the base's memory_check: warn, per point


def _check_key(key, where: str) -> str:
    """``key`` if a point may set it (a RUN_KEYS key or a config key), else a ConfigError."""
    if not isinstance(key, str):
        raise ConfigError(f"{where}: expected a key, found {key!r}")
    if key in RUN_KEYS:
        return key
    if "." not in key or key.startswith("workload."):
        raise ConfigError(f"{where}: unknown key{suggest(key, RUN_KEYS)}; expected one of "
                          f"{', '.join(RUN_KEYS)} or a config key (hardware.FILE.KEY, ...)")
    from sim.overrides import resolve
    resolve(key, where)
    return key


def _values(data: dict, part: str, src: str) -> dict:
    table = get(data, part, dict, source=src, default={})
    for key, values in table.items():
        _check_key(key, f"{src}: {part}.{key}")
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{src}: {part}.{key}: expected a non-empty list of values, found {values!r}")
    return table


def _samples(data: dict, src: str) -> list[dict]:
    sample = get(data, "sample", dict, source=src, default=None)
    if sample is None:
        return [{}]
    check_keys(sample, SAMPLE_KEYS, source=src, where="sample")
    method = get(sample, "method", str, source=src, prefix="sample")
    if method not in SAMPLERS:
        raise ConfigError(f"{src}: sample.method: unknown method {method!r}{suggest(method, SAMPLERS)}; "
                          f"expected one of {', '.join(SAMPLERS)}")
    points = get(sample, "points", int, source=src, prefix="sample", positive=True)
    seed = get(sample, "seed", int, source=src, prefix="sample", default=0)
    ranges = get(sample, "ranges", dict, source=src, prefix="sample")
    if not ranges:
        raise ConfigError(f"{src}: sample.ranges: expected at least one key: [low, high]")
    bounds = {}
    for key, pair in ranges.items():
        where = f"{src}: sample.ranges.{key}"
        _check_key(key, where)
        if not (isinstance(pair, list) and len(pair) == 2 and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in pair)
                and pair[0] < pair[1]):
            raise ConfigError(f"{where}: expected [low, high], two numbers with low < high, found {pair!r}")
        bounds[key] = tuple(pair)
    return SAMPLERS[method](bounds, points, seed)


def points_of(data: dict, src: str) -> tuple[tuple[str, ...], list[dict]]:
    """The sweep's axes (in file order) and points ({axis: value})."""
    grid = _values(data, "grid", src)
    zipped = _values(data, "zip", src)
    lengths = {len(v) for v in zipped.values()}
    if len(lengths) > 1:
        raise ConfigError(f"{src}: zip: the lists have different lengths "
                          f"({', '.join(f'{k}: {len(v)}' for k, v in zipped.items())})")
    samples = _samples(data, src)
    axes = list(grid) + list(zipped) + list(samples[0])
    if not axes:
        raise ConfigError(f"{src}: no axis: give grid, zip or sample")
    twice = [key for i, key in enumerate(axes) if key in axes[:i]]
    if twice:
        raise ConfigError(f"{src}: {twice[0]}: an axis of more than one of grid, zip and sample")
    rows = [dict(zip(zipped, row)) for row in zip(*zipped.values())] or [{}]
    points = [dict(zip(grid, combo)) | row | drawn
              for combo in itertools.product(*grid.values()) for row in rows for drawn in samples]
    return tuple(axes), points


def edit(base: dict, point: dict) -> dict:
    """The base experiment's contents with the point's values set."""
    data = copy.deepcopy(base)
    entries = data.get("systems") if isinstance(data.get("systems"), list) else []
    entries = [e for e in entries if isinstance(e, dict)]
    for key, value in point.items():
        if key == "pair":
            data["pairs"] = [value]
        elif key == "batch":
            data["batches"] = [value]
            for entry in entries:           # the point's batch is the only one
                entry.pop("batches", None)
        elif key == "system":
            for entry in entries:
                entry["system"] = value
                entry.pop("label", None)
        elif key in ("sequence_length", "tau"):
            data[key] = value
            if key == "tau":                # an entry's own tau would win over the point's
                for entry in entries:
                    entry.pop("tau", None)
        elif key.startswith("workload."):
            work = data.setdefault("workload", {})
            field = key.split(".", 1)[1]
            if isinstance(work, dict):
                # requests and requests_per_batch exclude each other: the point's wins
                work.pop({"requests": "requests_per_batch",
                          "requests_per_batch": "requests"}.get(field, ""), None)
                work[field] = value
        elif key in RUN_KEYS:               # a per-system setting: on every entry
            for entry in entries:
                entry[key] = value
        else:
            overrides = data.setdefault("overrides", {})
            if isinstance(overrides, dict):
                overrides[key] = value
    return data


def describe(point: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in point.items())


def load_sweep(path: Path) -> Sweep:
    """The sweep and every run of every point, each point checked as ``saddle run`` checks an
    experiment; errors name the sweep file, the point and the key."""
    data = load_yaml(path)
    src = str(path)
    check_keys(data, SWEEP_KEYS, source=src)
    name = check_name(data, src)
    try:
        base_path = resolve_path(get(data, "experiment", str, source=src))
    except ConfigError as exc:
        raise ConfigError(f"{src}: experiment: {exc}") from None
    base = load_yaml(base_path)
    axes, points = points_of(data, src)
    runs: list[tuple[int, RunParams]] = []
    first: dict[RunParams, int] = {}
    warnings: list[str] = []
    for i, point in enumerate(points):
        at = f"{src}: point {i + 1} ({describe(point)})"
        try:
            loaded, point_runs = load_experiment(base_path, data=edit(base, point))
        except ConfigError as exc:
            raise ConfigError(f"{at}: {exc}") from None
        warnings += [f"{at}: {w}" for w in loaded.get("warnings", [])]
        for p in point_runs:
            same = dataclasses.replace(p, source="")
            if same in first:
                raise ConfigError(f"{at}: the same run as point {first[same] + 1} "
                                  f"({describe(points[first[same]])}); an axis changes nothing")
            first[same] = i
            runs.append((i, p))
    labels = {p.label or p.system for _, p in runs}
    varying = tuple(a for a in axes if len({repr(p[a]) for p in points}) > 1)
    plot = check_plot(get(data, "plot", dict, source=src, default={}), axes,
                      varying + ((SYSTEM,) if len(labels) > 1 and SYSTEM not in axes else ()), src)
    return Sweep(name=name, source=src, experiment=base_path, axes=axes, points=tuple(points),
                 runs=tuple(runs), plot=plot, warnings=tuple(warnings))
