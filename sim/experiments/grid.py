"""Experiment files and their grid of runs.

An experiment (``configs/experiments/NAME.yaml``)::

    name: default                    # results go to results/<name>/
    description: ...
    pairs: [opt-66b+opt-1.3b]
    batches: [64]
    systems:                         # one entry per system (more keys below)
      - {system: gpu-ad}
      - {system: gpu-sd, draft_length: search}    # N, [N, ...] or search
    workload: {split: test, requests: 256, batching: continuous, seed: 0}
                                     # or requests_per_batch: K (K x batch requests per run)
    sequence_length: [1024, 2048]    # optional: every request decodes until its context
                                     # reaches this (sim/workload.py); max = the pair's
                                     # max_sequence_length (configs/models/pairs); null = natural
    overrides: {hardware.links.nvlink.step_latency_ns: 2000}
                                     # optional: config-file values for every run (sim/overrides.py)
    memory_check: warn               # optional: simulate runs that do not fit in memory, with a
                                     # warning (default error; sim/systems/memory.py)
    published: {...}                 # optional: report/published.py
    compare: {reference: S, baseline: S}   # optional: report/compare.py
    select: [{pair: P, batch: [1, 2]}]  # optional: keep only runs matching one rule
    plot: {x: batch, metric: tokens_per_s, normalize: gpu-ad}   # or a list of such, each with
                                     # optional name and where: {batch: 64}

An entry of ``systems`` may also give ``batches`` (a subset of the experiment's), ``tau``,
``max_draft_len``, ``capacity_rule``, ``capacity_slack`` (with ``fc_slack``), ``issue_rule``,
``label`` (the name records and plots use, e.g. pim-sd-best for a second pim-sd entry), ``stop``
and ``stop_param`` (a rule of sim/systems/registry.py in place of the system's adaptive one, and
its parameter; default configs/stopping/<pair>.yaml), ``dlm_fc_threshold`` and
``tlm_attention_threshold`` (the Scheduler's; default: measured offline) and ``aging_passes: K``
or ``[K, ...]`` (the Shared Pool's aging, sim/manager/shared_pool.py; one run per K).

The grid is pairs x sequence_length x batches x systems (x draft lengths x aging). Each run is
written to ``runs/<key>.json`` as soon as it ends, so an interrupted grid resumes where it
stopped: a run whose file exists with the same parameters is not run again.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

from common.config import check_keys, config_path, get, load_yaml, suggest
from common.errors import ConfigError
from report.plots import check_plots
from sim.config import BASE, Configs
from sim.manager.config import ManagerConfig
from sim.model import load_pair
from sim.overrides import blamed, normalize
from sim.systems import resolve as rules
from sim.systems.registry import STOP_RULES, check_entropy, reads_tau
from sim.systems.resolve import RunParams, adapter, check_int, check_probability, workload
from sim.systems.spec import SystemSpec, load_system
from sim.workload import BATCHING, SPLITS

# Every key an experiment file may have; anything else is refused with the closest suggested.
EXPERIMENT_KEYS = ("name", "description", "pairs", "batches", "systems", "workload",
                   "sequence_length", "tau", "select", "plot", "published", "overrides", "compare",
                   "memory_check")
ENTRY_KEYS = ("system", "draft_length", "batches", "tau", "max_draft_len", "capacity_rule",
              "capacity_slack", "issue_rule", "label", "dlm_fc_threshold", "tlm_attention_threshold",
              "aging_passes", "stop", "stop_param")
# RunParams fields added after run files existed: left out of a run's key and saved parameters
# at their default, so runs saved before keep their keys.
LATER_FIELDS = {"overrides": (), "dlm_fc_threshold": None, "tlm_attention_threshold": None,
                "capacity_rule": None, "aging_passes": None, "stop": None, "stop_param": None,
                "memory_check": "error"}
WORKLOAD_KEYS = ("split", "requests", "requests_per_batch", "batching", "seed",
                 "validation_fraction")
RUN_FIELDS = ("pair", "batch", "system", "sequence_length", "draft_length", "aging_passes")


def resolve_path(name_or_path: str | None, folder: str = "experiments",
                 where: str | None = None) -> Path:
    """A file of ``configs/<folder>/`` by name (None: ``default``), or any file by path."""
    if name_or_path is None:
        return config_path(folder, "default")
    what = f"{folder.removesuffix('s')} file"
    if not name_or_path.strip():
        raise ConfigError(f"expected a name or a path, found {name_or_path!r}")
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists() or "/" in name_or_path:
        if path.is_dir():
            raise ConfigError(f"{path}: is a directory, expected a YAML file")
        if not path.is_file():
            raise ConfigError(f"{path}: no such {what}")
        return path
    return config_path(folder, name_or_path, where=where)


def _list(value) -> list:
    return value if isinstance(value, list) else [value]


def check_sequence_length(value, where: str) -> None:
    """A ``sequence_length`` setting: a positive integer, ``max`` (the pair's maximum) or null
    (each request's natural end)."""
    if value is not None and value != "max" and (isinstance(value, bool) or not isinstance(value, int)
                                                 or value < 1):
        raise ConfigError(f"{where}: expected a positive integer, max or null, found {value!r}")


def resolve_sequence_length(value, pair: str, configs: Configs = BASE) -> int | None:
    return load_pair(pair, configs=configs).max_sequence_length if value == "max" else value


def check_name(data: dict, src: str) -> str:
    """The file's ``name`` (its results folder), its ``description`` checked too."""
    name = get(data, "name", str, source=src)
    if not name or "/" in name or name in (".", ".."):
        raise ConfigError(f"{src}: name: expected a folder name (no '/'), found {name!r}")
    get(data, "description", str, source=src, default=None)
    return name


def check_batches(batches: list, src: str) -> list:
    if not batches:
        raise ConfigError(f"{src}: batches: expected a non-empty list")
    for i, b in enumerate(batches):
        check_int(b, f"{src}: batches[{i}]")
    return batches


def check_pair(pair, source: str | None, where: str, configs: Configs = BASE) -> None:
    """``pair`` names a pair file whose models exist; errors name ``source`` and ``where``."""
    if not isinstance(pair, str):
        raise ConfigError(f"{source + ': ' if source else ''}{where}: expected a pair name, found {pair!r}")
    path = config_path("models/pairs", pair, source=source, where=where)
    data = configs.yaml(path)
    for key in ("tlm", "dlm"):
        config_path("models", get(data, key, str, source=path), source=path, where=key)
    load_pair(pair, configs=configs)


def check_system(name, source: str, where: str, configs: Configs = BASE) -> SystemSpec:
    """The system's spec (its file checked completely, its hardware preset existing)."""
    if not isinstance(name, str):
        raise ConfigError(f"{source}: {where}: expected a system name, found {name!r}")
    path = config_path("systems", name, source=source, where=where)
    spec = load_system(name, configs=configs)
    config_path("hardware", spec.hardware, source=path, where="hardware")
    return spec


def load_experiment(path: Path, trace: str | None = None, requests: int | str | None = None,
                    data: dict | None = None) -> tuple[dict, list[RunParams]]:
    """The experiment's runs, every setting checked before anything runs (keys, names, values,
    and every file a run will read, overrides set: each trace is read and its split and request
    count checked). Errors name the file and the key path (``systems[2].draft_length``).
    ``trace`` replaces the (single) pair's trace; ``requests`` replaces ``workload.requests``
    (an int, or ``"all"`` for the whole split). ``data``: the experiment's contents, when they
    are not ``path``'s (a sweep's point, sim/sweeps/); errors still name ``path``."""
    data = load_yaml(path) if data is None else data
    src = str(path)
    check_keys(data, EXPERIMENT_KEYS, source=src)
    overrides = normalize(get(data, "overrides", dict, source=src, default={}), f"{src}: overrides")
    try:
        return _load(data, src, trace, requests, overrides)
    except ConfigError as exc:
        flag = f"{src}: requests: "         # the command line's value, not the file's
        if requests is not None and str(exc).startswith(flag):
            raise ConfigError(f"--requests {requests}: {str(exc).removeprefix(flag)}") from None
        raise blamed(exc, overrides, f"{src}: overrides") from None


def _load(data: dict, src: str, trace: str | None, requests: int | str | None,
          overrides: tuple[tuple[str, object], ...]) -> tuple[dict, list[RunParams]]:
    configs = Configs.of(overrides)
    name = check_name(data, src)
    pairs, batches, systems = (get(data, key, list, source=src)
                               for key in ("pairs", "batches", "systems"))
    seqs = _list(get(data, "sequence_length", (int, str, list), source=src, default=[None]))
    tau = get(data, "tau", float, source=src, default=None)
    memory_check = rules.check_memory_mode(get(data, "memory_check", str, source=src,
                                               default="error"), src)
    if tau is not None:
        check_probability(tau, f"{src}: tau")
    for key, items in (("pairs", pairs), ("systems", systems)):
        if not items:
            raise ConfigError(f"{src}: {key}: expected a non-empty list")
    for i, pair in enumerate(pairs):
        check_pair(pair, src, f"pairs[{i}]", configs)
    if len(set(pairs)) != len(pairs):
        raise ConfigError(f"{src}: pairs: {pairs} names a pair twice")
    if trace is not None:
        trace = _check_trace(trace, len(pairs), src)
    check_batches(batches, src)
    shared, n_requests, per_batch = _workload_settings(data, src, requests)
    for i, seq in enumerate(seqs):
        check_sequence_length(seq, f"{src}: sequence_length[{i}]")
    entries: list[_Entry] = []
    for i, entry in enumerate(systems):
        entries.append(_check_entry(entry, f"systems[{i}]", src, pairs, batches, tau, configs))
        _check_distinct(entries, src)
    runs = [RunParams(pair=pair, batch=batch, sequence_length=seq, draft_length=d, aging_passes=k,
                      requests=n_requests if per_batch is None else per_batch * batch,
                      trace=trace, source=src, overrides=overrides, memory_check=memory_check,
                      **shared, **e.fields)
            for pair in pairs for seq in (resolve_sequence_length(s, pair, configs) for s in seqs)
            for batch in batches for e in entries if batch in e.batches
            for d in e.draft_lengths for k in e.aging]
    runs = _select(data, src, runs)
    plot = get(data, "plot", (dict, list), source=src, default={"x": "batch", "metric": "tokens_per_s"})
    _check_extras(data, src, plot, list(dict.fromkeys(p.label or p.system for p in runs)))
    check_workloads(runs)
    if overrides:
        check_costs(runs, f"{src}: overrides")
    warnings = check_memory(runs)
    return dict(data, name=name, plot=plot) | ({"warnings": warnings} if warnings else {}), runs


def check_memory(runs: list[RunParams]) -> list[str]:
    """Every run fits in memory (sim/systems/memory.py), or under ``memory_check: warn`` the
    warnings of those that do not, each said once."""
    found: dict[str, None] = {}
    for p in {(p.system, p.pair, p.batch, p.draft_length, p.max_seq(), p.overrides): p
              for p in runs}.values():
        message = rules.precheck_fits(p)
        if message:
            found[message] = None
    return list(found)


def _check_trace(trace, n_pairs: int, src: str) -> str:
    """``--trace``: an existing file, for an experiment of one pair."""
    if n_pairs != 1:
        raise ConfigError(f"{src}: --trace replaces the trace of one pair; this experiment has {n_pairs}")
    path = Path(trace)
    if path.is_dir():
        raise ConfigError(f"--trace {path}: is a directory, expected a trace file (.jsonl or .jsonl.gz)")
    if not path.is_file():
        raise ConfigError(f"--trace {path}: no such trace file")
    return str(path)


def check_costs(runs: list[RunParams], where: str) -> None:
    """Load each run's cost model and price one TLM step with it, so a config value that
    loads but cannot be priced (a zero clock, ...) stops the grid before its first run."""
    for p in {(p.system, p.pair, p.overrides): p for p in runs}.values():
        configs = p.configs()
        hardware = load_system(p.system, configs=configs).hardware
        models = load_pair(p.pair, configs=configs)
        try:
            costs = adapter(hardware, models.tlm.name, models.dlm.name, configs)
            costs.system.price_step(costs.tlm, [(models.max_sequence_length // 2, 1)],
                                    devices=costs.n_devices)
        except ConfigError:
            raise
        except Exception as exc:        # arithmetic on an impossible value
            raise ConfigError(f"{where}: the cost model of {hardware} fails with these values "
                              f"({type(exc).__name__}: {exc})") from None


def _workload_settings(data: dict, src: str, requests) -> tuple[dict, int | None, int | None]:
    """``workload:``'s settings as RunParams fields, its request count and its requests per
    batch (``requests``: the command line's, which replaces both)."""
    work = get(data, "workload", dict, source=src, default={})
    check_keys(work, WORKLOAD_KEYS, source=src, where="workload")
    w = lambda key, kind, default=None, **kw: get(work, key, kind, source=src, prefix="workload",
                                                  default=default, **kw)
    n_requests = w("requests", int)
    if n_requests is not None:
        check_int(n_requests, f"{src}: workload.requests")
    per_batch = w("requests_per_batch", int, positive=True)
    if per_batch is not None and n_requests is not None:
        raise ConfigError(f"{src}: workload: give requests or requests_per_batch, not both")
    if requests is not None:
        n_requests, per_batch = (None if requests == "all" else requests), None
    settings = dict(split=w("split", str, "test"), batching=w("batching", str, "continuous"),
                    seed=w("seed", int, 0), validation_fraction=w("validation_fraction", float, 0.5))
    for key, choices in (("split", SPLITS), ("batching", BATCHING)):
        if settings[key] not in choices:
            raise ConfigError(f"{src}: workload.{key}: unknown {key} {settings[key]!r}"
                              f"{suggest(settings[key], choices)}; expected one of {', '.join(choices)}")
    if not 0 < settings["validation_fraction"] < 1:
        raise ConfigError(f"{src}: workload.validation_fraction: expected a number in (0, 1), "
                          f"found {settings['validation_fraction']!r}")
    return settings, n_requests, per_batch


@dataclasses.dataclass
class _Entry:
    """One checked entry of ``systems:``: its RunParams fields, batches, d and aging values."""

    at: str                                 # systems[i]
    fields: dict
    batches: list
    draft_lengths: list
    aging: list

    @property
    def name(self) -> str:
        return self.fields["label"] or self.fields["system"]


def _check_entry(entry, at: str, src: str, pairs: list, batches: list, tau: float | None,
                 configs: Configs) -> _Entry:
    """An entry of ``systems:`` checked by the rules a run is resolved by
    (``sim/systems/resolve.py``); errors name the entry's key."""
    if not isinstance(entry, dict):
        raise ConfigError(f"{src}: {at}: expected a mapping with 'system', found {entry!r}")
    check_keys(entry, ENTRY_KEYS, source=src, where=at)
    if "system" not in entry:
        raise ConfigError(f"{src}: {at}: missing key 'system'")
    spec = check_system(entry["system"], src, f"{at}.system", configs)
    where = f"{src}: {at}."
    value = lambda key, kind: get(entry, key, kind, source=src, prefix=at, default=None)
    own = value("batches", list)
    for j, b in enumerate(own or []):
        if b not in batches:
            raise ConfigError(f"{src}: {at}.batches[{j}]: {b!r} is not one of the experiment's "
                              f"batches {batches}")
    ds = _each(entry, "draft_length", lambda d, w: rules.check_draft_length(d, spec, w), where)
    stop = value("stop", str)
    if stop is not None:
        rules.check_stop(stop, spec, f"{src}: {at}")
    stop = stop or spec.stop
    threshold = lambda v, w: rules.check_threshold(v, spec, w)
    checks = {"stop_param": (float, lambda v, w: rules.check_stop_param(v, stop, w)),
              "tau": (float, lambda v, w: _check_tau(v, stop, spec, w)),
              "dlm_fc_threshold": (int, threshold), "tlm_attention_threshold": (int, threshold),
              "max_draft_len": (int, check_int)}
    for key, (kind, check) in checks.items():
        if key in entry:
            check(value(key, kind), where + key)
    rules.check_capacity(spec, value("capacity_rule", str), value("capacity_slack", float), where)
    rules.check_issue_rule(value("issue_rule", str), spec, f"{where}issue_rule")
    ks = _each(entry, "aging_passes", lambda k, w: rules.check_aging(k, spec, w), where) \
        if "aging_passes" in entry else [None]
    if value("label", str) == "":
        raise ConfigError(f"{where}label: expected a non-empty name")
    _check_tuned(stop, "stop_param" in entry, get(entry, "tau", float, source=src, prefix=at, default=tau),
                 pairs, f"{src}: {at}")
    cfg = ManagerConfig.load(None, configs=configs)
    for j, b in enumerate(own or batches):
        rules.check_slots(b, spec, cfg, None, f"{src}: {at}.batches[{j}]" if own
                          else f"{src}: batches[{j}]", f" ({at})")
    fields = {k: entry.get(k) for k in ENTRY_KEYS
              if k not in ("system", "draft_length", "batches", "aging_passes")}
    fields.update({k: float(entry[k]) for k in ("capacity_slack", "stop_param") if k in entry},
                  system=spec.name, tau=float(entry["tau"]) if "tau" in entry else tau)
    return _Entry(at, fields, own or batches, ds, ks)


def _each(entry: dict, key: str, check, where: str) -> list:
    """The entry's values of ``key`` (one, or a list), each checked as ``key[j]``."""
    values = _list(entry.get(key))
    for j, v in enumerate(values):
        check(v, f"{where}{key}" + (f"[{j}]" if isinstance(entry.get(key), list) else ""))
    return values


def _check_tau(tau: float, stop: str | None, spec: SystemSpec, where: str) -> None:
    check_probability(tau, where)
    if not reads_tau(stop):
        raise ConfigError(f"{where}: system {spec.name} has no stopping threshold (its "
                          f"stop rule {stop!r} does not read tau); leave tau out")


def _check_distinct(entries: list[_Entry], src: str) -> None:
    """The last entry does not repeat the runs of an earlier one."""
    new = entries[-1]
    for other in entries[:-1]:
        if other.name == new.name and set(other.batches) & set(new.batches) \
                and any(d in other.draft_lengths for d in new.draft_lengths) \
                and any(k in other.aging for k in new.aging):
            raise ConfigError(f"{src}: {new.at}: the same runs as "
                              f"{other.at} (system {new.name}, draft length, aging, batches); "
                              "give one a label")


def _check_tuned(stop: str | None, has_param: bool, tau: float | None, pairs: list,
                 where: str) -> None:
    """What a rule reads from configs/ when the entry does not give it (a rule's tuned
    parameter, the threshold rule's tau) exists for every pair."""
    for pair in pairs:
        try:
            if stop is not None and not has_param and STOP_RULES[stop].param_name is not None:
                rules.load_stop_param(pair, stop)
            if reads_tau(stop) and tau is None:
                rules.load_tau(pair)
        except ConfigError as e:
            raise ConfigError(f"{where}: {e}") from None


def _select(data: dict, src: str, runs: list[RunParams]) -> list[RunParams]:
    """The runs matching one rule of ``select:``, if the experiment has one."""
    select = get(data, "select", list, source=src, default=None)
    if select is None:
        return runs
    for i, rule in enumerate(select):
        if not isinstance(rule, dict):
            raise ConfigError(f"{src}: select[{i}]: expected a mapping of run field -> value "
                              "or list of values")
        check_keys(rule, RUN_FIELDS, source=src, where=f"select[{i}]")
    runs = [p for p in runs if any(matches(p, rule) for rule in select)]
    if not runs:
        raise ConfigError(f"{src}: select: no run of the grid matches any rule")
    return runs


def _check_extras(data: dict, src: str, plot, names: list[str]) -> None:
    """The plot specs, ``published:`` and ``compare:`` (``names``: the runs' systems), each by
    the report module that reads it."""
    check_plots(plot, src, names, RUN_FIELDS)
    if "published" in data:
        from report.published import check
        check(data["published"], src)
    if "compare" in data:
        from report import compare
        compare.check(data["compare"], names, src)


def check_workloads(runs: list[RunParams]) -> None:
    """Read every trace the runs replay and take each run's requests from it, as the run will
    (cached), so a bad trace, a missing split, too few requests or a too short trace stop the
    experiment before its first run."""
    seen = set()
    for p in runs:
        trace = p.trace_path()
        key = (trace, p.split, p.requests, p.seed, p.validation_fraction, p.max_seq(),
               p.sequence_length)
        if key not in seen:
            seen.add(key)
            work = workload(p)
            rules.check_batch_fills(p.batch, len(work.requests), p.source)
            rule = p.stop_rule()
            if rule is not None and STOP_RULES[rule].needs_entropy:
                check_entropy(work.requests, trace)


def matches(p: RunParams, rule: dict) -> bool:
    """A run matches a ``select`` rule when each named field equals the value (or is in the
    list of values)."""
    for key, want in rule.items():
        have = (p.label or p.system) if key == "system" else getattr(p, key)
        if have not in (want if isinstance(want, list) else [want]):
            return False
    return True


def params_dict(p: RunParams) -> dict:
    """``p`` as saved and hashed: without its source, and without the ``LATER_FIELDS`` at their
    default."""
    out = dataclasses.asdict(p) | {"source": None}
    for name, default in LATER_FIELDS.items():
        if getattr(p, name) == default:
            del out[name]
    if p.overrides:
        out["overrides"] = [list(pair) for pair in p.overrides]
    return out


def run_key(p: RunParams) -> str:
    text = json.dumps(params_dict(p), sort_keys=True)
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    d = "" if p.draft_length is None else f"_d{p.draft_length}"
    s = "" if p.sequence_length is None else f"_L{p.sequence_length}"
    return f"{p.pair}_{p.label or p.system}_b{p.batch}{d}{s}_{digest}"
