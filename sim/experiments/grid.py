"""Experiment files and their grid of runs.

An experiment (``configs/experiments/NAME.yaml``)::

    name: default                    # results go to results/<name>/
    description: ...
    pairs: [opt-66b+opt-1.3b]
    batches: [64]
    systems:                         # one entry per system; draft_length: N, [N, ...] or search;
                                     # optional per-entry batches: [...] (subset of batches)
      - {system: gpu-ad}
      - {system: gpu-sd, draft_length: search}
                                     # per entry also tau, max_draft_len, capacity_slack,
                                     # issue_rule, label (the name records and plots use,
                                     # e.g. pim-sd-best for a second pim-sd entry)
    workload: {split: test, requests: 256, batching: continuous, seed: 0}
                                     # or requests_per_batch: K (K x batch requests per run)
    sequence_length: [1024, 2048]    # optional sweep: every request decodes until its context
                                     # reaches this (sim/workload.py); max = the pair's
                                     # max_sequence_length (configs/models/pairs); null = natural
    published: {...}                 # optional: published values to print ours beside
                                     # (sim/experiments/published.py)
    select: [{pair: P, batch: [1, 2]}]  # optional: keep only runs matching one rule
    plot: {x: batch, metric: tokens_per_s, normalize: gpu-ad}   # or a list of such, each with
                                     # optional name and where: {batch: 64}

The grid is pairs x sequence_length x batches x systems (x draft lengths). Each run is written to
``runs/<key>.json`` as soon as it ends, so an interrupted grid resumes where it stopped: a run
whose file exists with the same parameters is not run again.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

from sim.config import config_path, get, load_yaml
from sim.errors import ConfigError
from sim.experiments.plots import check_spec
from sim.model import load_pair
from sim.systems.run import RunParams

PLOT_X = ("batch", "draft_length", "sequence_length", "system")


def resolve_path(name_or_path: str | None) -> Path:
    if name_or_path is None:
        return config_path("experiments", "default")
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise ConfigError(f"{path}: no such experiment file")
        return path
    return config_path("experiments", name_or_path)


def _list(value, what: str, src: str) -> list:
    return value if isinstance(value, list) else [value]


def check_sequence_length(value, where: str) -> None:
    """A ``sequence_length`` setting: a positive integer, ``max`` (the pair's maximum) or null
    (each request's natural end)."""
    if value is not None and value != "max" and (isinstance(value, bool) or not isinstance(value, int)
                                                 or value < 1):
        raise ConfigError(f"{where}: expected a positive integer, max or null, found {value!r}")


def resolve_sequence_length(value, pair: str) -> int | None:
    return load_pair(pair).max_sequence_length if value == "max" else value


def load_experiment(path: Path, trace: str | None = None,
                    requests: int | str | None = None) -> tuple[dict, list[RunParams]]:
    """The experiment's runs. ``trace`` replaces the (single) pair's trace; ``requests``
    replaces ``workload.requests`` (an int, or ``"all"`` for the whole split)."""
    data = load_yaml(path)
    src = str(path)
    name = get(data, "name", str, source=src)
    pairs = get(data, "pairs", list, source=src)
    batches = get(data, "batches", list, source=src)
    systems = get(data, "systems", list, source=src)
    work = get(data, "workload", dict, source=src, default={})
    seqs = _list(get(data, "sequence_length", (int, str, list), source=src, default=[None]),
                 "sequence_length", src)
    tau = get(data, "tau", float, source=src, default=None)
    if trace is not None and len(pairs) != 1:
        raise ConfigError(f"{src}: --trace replaces the trace of one pair; this experiment has {len(pairs)}")
    for i, b in enumerate(batches):
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise ConfigError(f"{src}: batches[{i}]: expected an integer >= 1, found {b!r}")
    known = {"split", "requests", "requests_per_batch", "batching", "seed", "validation_fraction"}
    unknown = sorted(set(work) - known)
    if unknown:
        raise ConfigError(f"{src}: workload: unknown key(s) {unknown}; expected some of {sorted(known)}")
    n_requests = get(work, "requests", int, source=src, default=None)
    per_batch = get(work, "requests_per_batch", int, source=src, prefix="workload", default=None,
                    positive=True)
    if per_batch is not None and n_requests is not None:
        raise ConfigError(f"{src}: workload: give requests or requests_per_batch, not both")
    if requests is not None:
        n_requests, per_batch = (None if requests == "all" else requests), None
    for i, seq in enumerate(seqs):
        check_sequence_length(seq, f"{src}: sequence_length[{i}]")
    runs = []
    for pair in pairs:
        for seq_entry in seqs:
            seq = resolve_sequence_length(seq_entry, pair)
            for batch in batches:
                for i, entry in enumerate(systems):
                    if not isinstance(entry, dict):
                        raise ConfigError(f"{src}: systems[{i}]: expected a mapping with 'system'")
                    if batch not in entry.get("batches", batches):
                        continue
                    system = get(entry, "system", str, source=src, prefix=f"systems[{i}]")
                    ds = _list(entry.get("draft_length"), "draft_length", src)
                    for d in ds:
                        runs.append(RunParams(
                            system=system, pair=pair, batch=batch, draft_length=d,
                            tau=get(entry, "tau", float, source=src, prefix=f"systems[{i}]", default=tau),
                            max_draft_len=get(entry, "max_draft_len", int, source=src,
                                              prefix=f"systems[{i}]", default=None),
                            capacity_slack=get(entry, "capacity_slack", float, source=src,
                                               prefix=f"systems[{i}]", default=None),
                            issue_rule=get(entry, "issue_rule", str, source=src,
                                           prefix=f"systems[{i}]", default=None),
                            label=get(entry, "label", str, source=src, prefix=f"systems[{i}]",
                                      default=None),
                            trace=trace, split=get(work, "split", str, source=src, default="test"),
                            requests=n_requests if per_batch is None else per_batch * batch,
                            seed=get(work, "seed", int, source=src, default=0),
                            validation_fraction=get(work, "validation_fraction", float, source=src,
                                                    default=0.5),
                            batching=get(work, "batching", str, source=src, default="continuous"),
                            sequence_length=seq, source=src))
    select = get(data, "select", list, source=src, default=None)
    if select is not None:
        runs = [p for p in runs if any(_matches(p, rule, f"{src}: select[{i}]")
                                       for i, rule in enumerate(select))]
    plot = get(data, "plot", (dict, list), source=src, default={"x": "batch", "metric": "tokens_per_s"})
    for i, spec in enumerate(plot if isinstance(plot, list) else [plot]):
        where = f"{src}: plot" + (f"[{i}]" if isinstance(plot, list) else "")
        if not isinstance(spec, dict):
            raise ConfigError(f"{where}: expected a mapping (x, metric, ...), found {spec!r}")
        if spec.get("x", "batch") not in PLOT_X:
            raise ConfigError(f"{where}.x: expected one of {list(PLOT_X)}, found {spec.get('x')!r}")
        check_spec(spec, where)
    if "published" in data:
        from sim.experiments.published import check
        check(data["published"], src)
    data = dict(data, name=name, plot=plot)
    return data, runs


def _matches(p: RunParams, rule: dict, where: str) -> bool:
    """A run matches a ``select`` rule when each named field equals the value (or is in the
    list of values)."""
    if not isinstance(rule, dict):
        raise ConfigError(f"{where}: expected a mapping of run field -> value or list of values")
    for key, want in rule.items():
        if key not in ("pair", "batch", "system", "sequence_length", "draft_length"):
            raise ConfigError(f"{where}: unknown field {key!r}; expected pair, batch, system, "
                              "sequence_length or draft_length")
        have = (p.label or p.system) if key == "system" else getattr(p, key)
        if have not in (want if isinstance(want, list) else [want]):
            return False
    return True


def run_key(p: RunParams) -> str:
    text = json.dumps(asdict(p) | {"source": None}, sort_keys=True)
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    d = "" if p.draft_length is None else f"_d{p.draft_length}"
    s = "" if p.sequence_length is None else f"_L{p.sequence_length}"
    return f"{p.pair}_{p.label or p.system}_b{p.batch}{d}{s}_{digest}"
