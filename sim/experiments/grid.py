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
                                     # per entry also tau, max_draft_len, capacity_rule,
                                     # capacity_slack (with capacity_rule fc_slack),
                                     # issue_rule, label (the name records and plots use,
                                     # e.g. pim-sd-best for a second pim-sd entry),
                                     # dlm_fc_threshold, tlm_attention_threshold (the
                                     # Scheduler's; default: measured offline),
                                     # aging_passes: K or [K, ...] (the Shared Pool's aging,
                                     # sim/manager/shared_pool.py; one run per K)
    workload: {split: test, requests: 256, batching: continuous, seed: 0}
                                     # or requests_per_batch: K (K x batch requests per run)
    sequence_length: [1024, 2048]    # optional sweep: every request decodes until its context
                                     # reaches this (sim/workload.py); max = the pair's
                                     # max_sequence_length (configs/models/pairs); null = natural
    overrides: {hardware.links.nvlink.step_latency_ns: 2000}
                                     # optional: config-file values for every run (sim/overrides.py)
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

import dataclasses
import hashlib
import json
from pathlib import Path

from sim.config import check_keys, config_path, get, load_yaml, suggest
from sim.errors import ConfigError
from sim.experiments.plots import PLOT_KEYS, check_spec
from sim.model import load_pair
from sim.paths import CONFIGS
from sim.systems.run import RunParams

PLOT_X = ("batch", "draft_length", "sequence_length", "system", "aging_passes")
# Every key an experiment file may have; anything else is refused with the closest suggested.
EXPERIMENT_KEYS = ("name", "description", "pairs", "batches", "systems", "workload",
                   "sequence_length", "tau", "select", "plot", "published", "overrides")
ENTRY_KEYS = ("system", "draft_length", "batches", "tau", "max_draft_len", "capacity_rule",
              "capacity_slack", "issue_rule", "label", "dlm_fc_threshold", "tlm_attention_threshold",
              "aging_passes")
# RunParams fields added after run files existed: left out of a run's key and saved parameters
# at their default, so runs saved before keep their keys.
LATER_FIELDS = {"overrides": (), "dlm_fc_threshold": None, "tlm_attention_threshold": None,
                "capacity_rule": None, "aging_passes": None}
WORKLOAD_KEYS = ("split", "requests", "requests_per_batch", "batching", "seed",
                 "validation_fraction")
RUN_FIELDS = ("pair", "batch", "system", "sequence_length", "draft_length", "aging_passes")


def resolve_path(name_or_path: str | None) -> Path:
    if name_or_path is None:
        return config_path("experiments", "default")
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists() or "/" in name_or_path:
        if path.is_dir():
            raise ConfigError(f"{path}: is a directory, expected an experiment file (.yaml)")
        if not path.is_file():
            raise ConfigError(f"{path}: no such experiment file")
        return path
    return config_path("experiments", name_or_path)


def _list(value) -> list:
    return value if isinstance(value, list) else [value]


def check_sequence_length(value, where: str) -> None:
    """A ``sequence_length`` setting: a positive integer, ``max`` (the pair's maximum) or null
    (each request's natural end)."""
    if value is not None and value != "max" and (isinstance(value, bool) or not isinstance(value, int)
                                                 or value < 1):
        raise ConfigError(f"{where}: expected a positive integer, max or null, found {value!r}")


def resolve_sequence_length(value, pair: str) -> int | None:
    return load_pair(pair).max_sequence_length if value == "max" else value


def check_pair(pair, source: str | None, where: str) -> None:
    """``pair`` names a pair file whose models exist; errors name ``source`` and ``where``."""
    if not isinstance(pair, str):
        raise ConfigError(f"{source + ': ' if source else ''}{where}: expected a pair name, found {pair!r}")
    path = config_path("models/pairs", pair, source=source, where=where)
    data = load_yaml(path)
    for key in ("tlm", "dlm"):
        config_path("models", get(data, key, str, source=path), source=path, where=key)
    load_pair(pair)


def check_system(name, source: str, where: str):
    """The system's spec (its file checked completely, its hardware preset existing)."""
    from sim.systems.spec import load_system
    if not isinstance(name, str):
        raise ConfigError(f"{source}: {where}: expected a system name, found {name!r}")
    path = config_path("systems", name, source=source, where=where)
    spec = load_system(name)
    config_path("hardware", spec.hardware, source=path, where="hardware")
    return spec


def check_trace_file(path, what: str) -> Path:
    """A trace path given by hand (``what`` says where: ``--trace``) that exists and is a file."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{what} {path}: is a directory, expected a trace file (.jsonl or .jsonl.gz)")
    if not path.is_file():
        raise ConfigError(f"{what} {path}: no such trace file")
    return path


def _int(value, where: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{where}: expected an integer >= {low}, found {value!r}")
    return value


def _probability(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ConfigError(f"{where}: expected a number in [0, 1], found {value!r}")
    return float(value)


def load_experiment(path: Path, trace: str | None = None, requests: int | str | None = None,
                    data: dict | None = None) -> tuple[dict, list[RunParams]]:
    """The experiment's runs, every setting checked before anything runs (unknown keys with
    the closest known one suggested, unknown pair / system / model / hardware / split names,
    values, and every file a run will read: each trace is read and its split and request
    count checked). Errors name the file and the key path (``systems[2].draft_length``).
    ``trace`` replaces the (single) pair's trace; ``requests`` replaces ``workload.requests``
    (an int, or ``"all"`` for the whole split). ``data``: the experiment's contents, when they
    are not ``path``'s (a sweep's point, sim/sweeps/); errors still name ``path``.

    ``overrides: {config key: value}`` (sim/overrides.py) sets config-file values for every
    run; the whole check runs with them in force, so a value a loader refuses stops it."""
    from sim.overrides import applied, normalize

    data = load_yaml(path) if data is None else data
    src = str(path)
    check_keys(data, EXPERIMENT_KEYS, source=src)
    overrides = normalize(get(data, "overrides", dict, source=src, default={}), f"{src}: overrides")
    with applied(overrides):
        experiment, runs = _load(data, src, trace, requests)
        if overrides:
            check_costs(runs, f"{src}: overrides")
    return experiment, [dataclasses.replace(p, overrides=overrides) for p in runs]


def check_costs(runs: list[RunParams], where: str) -> None:
    """Load each run's cost model and price one TLM step with it, so a config value that
    loads but cannot be priced (a zero clock, ...) stops the grid before its first run."""
    from sim.systems.run import adapter
    from sim.systems.spec import load_system

    for hardware, pair in sorted({(load_system(p.system).hardware, p.pair) for p in runs}):
        models = load_pair(pair)
        try:
            costs = adapter(hardware, models.tlm.name, models.dlm.name)
            costs.system.price_step(costs.tlm, [(models.max_sequence_length // 2, 1)],
                                    devices=costs.n_devices)
        except ConfigError:
            raise
        except Exception as exc:        # arithmetic on an impossible value
            raise ConfigError(f"{where}: the cost model of {hardware} fails with these values "
                              f"({type(exc).__name__}: {exc})") from None


def _load(data: dict, src: str, trace, requests) -> tuple[dict, list[RunParams]]:
    from sim.systems.spec import CAPACITY_RULES, ISSUE_RULES, check_slack
    from sim.workload import BATCHING, SPLITS

    name = get(data, "name", str, source=src)
    if not name or "/" in name or name in (".", ".."):
        raise ConfigError(f"{src}: name: expected a folder name (no '/'), found {name!r}")
    get(data, "description", str, source=src, default=None)
    pairs = get(data, "pairs", list, source=src)
    batches = get(data, "batches", list, source=src)
    systems = get(data, "systems", list, source=src)
    work = get(data, "workload", dict, source=src, default={})
    seqs = _list(get(data, "sequence_length", (int, str, list), source=src, default=[None]))
    tau = get(data, "tau", float, source=src, default=None)
    if tau is not None:
        _probability(tau, f"{src}: tau")
    for key, items in (("pairs", pairs), ("batches", batches), ("systems", systems)):
        if not items:
            raise ConfigError(f"{src}: {key}: expected a non-empty list")
    for i, pair in enumerate(pairs):
        check_pair(pair, src, f"pairs[{i}]")
    if len(set(pairs)) != len(pairs):
        raise ConfigError(f"{src}: pairs: {pairs} names a pair twice")
    if trace is not None:
        if len(pairs) != 1:
            raise ConfigError(f"{src}: --trace replaces the trace of one pair; this experiment has {len(pairs)}")
        trace = str(check_trace_file(trace, "--trace"))
    for i, b in enumerate(batches):
        _int(b, f"{src}: batches[{i}]")
    check_keys(work, WORKLOAD_KEYS, source=src, where="workload")
    n_requests = get(work, "requests", int, source=src, prefix="workload", default=None)
    if n_requests is not None:
        _int(n_requests, f"{src}: workload.requests")
    per_batch = get(work, "requests_per_batch", int, source=src, prefix="workload", default=None,
                    positive=True)
    if per_batch is not None and n_requests is not None:
        raise ConfigError(f"{src}: workload: give requests or requests_per_batch, not both")
    if requests is not None:
        n_requests, per_batch = (None if requests == "all" else requests), None
    split = get(work, "split", str, source=src, prefix="workload", default="test")
    if split not in SPLITS:
        raise ConfigError(f"{src}: workload.split: unknown split {split!r}{suggest(split, SPLITS)}; "
                          f"expected one of {', '.join(SPLITS)}")
    batching = get(work, "batching", str, source=src, prefix="workload", default="continuous")
    if batching not in BATCHING:
        raise ConfigError(f"{src}: workload.batching: unknown batching {batching!r}"
                          f"{suggest(batching, BATCHING)}; expected one of {', '.join(BATCHING)}")
    seed = get(work, "seed", int, source=src, prefix="workload", default=0)
    fraction = get(work, "validation_fraction", float, source=src, prefix="workload", default=0.5)
    if not 0 < fraction < 1:
        raise ConfigError(f"{src}: workload.validation_fraction: expected a number in (0, 1), "
                          f"found {fraction!r}")
    for i, seq in enumerate(seqs):
        check_sequence_length(seq, f"{src}: sequence_length[{i}]")

    entries = []            # (entry, spec, draft lengths, aging Ks)
    for i, entry in enumerate(systems):
        at = f"systems[{i}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"{src}: {at}: expected a mapping with 'system', found {entry!r}")
        check_keys(entry, ENTRY_KEYS, source=src, where=at)
        if "system" not in entry:
            raise ConfigError(f"{src}: {at}: missing key 'system'")
        spec = check_system(entry["system"], src, f"{at}.system")
        own = get(entry, "batches", list, source=src, prefix=at, default=None)
        for j, b in enumerate(own or []):
            if b not in batches:
                raise ConfigError(f"{src}: {at}.batches[{j}]: {b!r} is not one of the "
                                  f"experiment's batches {batches}")
        ds = _list(entry.get("draft_length"))
        fixed = spec.speculative and spec.stop == "fixed"
        for j, d in enumerate(ds):
            where = f"{src}: {at}.draft_length" + (f"[{j}]" if isinstance(entry.get("draft_length"), list) else "")
            if fixed and d is None:
                raise ConfigError(f"{where}: system {spec.name} drafts a fixed d: give a number "
                                  "or 'search'")
            if fixed and d != "search":
                _int(d, where)
            if not fixed and d is not None:
                raise ConfigError(f"{where}: system {spec.name} does not take a fixed d "
                                  f"(found {d!r}); leave it out")
        if "tau" in entry:
            _probability(get(entry, "tau", float, source=src, prefix=at), f"{src}: {at}.tau")
            if spec.stop != "threshold":
                raise ConfigError(f"{src}: {at}.tau: system {spec.name} has no stopping threshold "
                                  "(its stop rule is not 'threshold'); leave tau out")
        for key in ("dlm_fc_threshold", "tlm_attention_threshold"):
            if key in entry:
                from sim.manager.formats import THRESHOLD
                value = _int(get(entry, key, int, source=src, prefix=at), f"{src}: {at}.{key}", low=0)
                if value > THRESHOLD.max_raw:
                    raise ConfigError(f"{src}: {at}.{key}: expected at most {THRESHOLD.max_raw}, "
                                      f"found {value}")
                if spec.mapping != "dynamic":
                    raise ConfigError(f"{src}: {at}.{key}: system {spec.name} has no Scheduler "
                                      "(mapping: dynamic); leave it out")
        if "max_draft_len" in entry:
            _int(get(entry, "max_draft_len", int, source=src, prefix=at), f"{src}: {at}.max_draft_len")
        for key in ("capacity_rule", "capacity_slack"):
            if key in entry and spec.verify != "shared_pool":
                raise ConfigError(f"{src}: {at}.{key}: system {spec.name} has no pass "
                                  "capacity (only systems with verify: shared_pool); leave it out")
        rule = spec.capacity_rule
        if "capacity_rule" in entry:
            rule = get(entry, "capacity_rule", str, source=src, prefix=at)
            if rule not in CAPACITY_RULES:
                raise ConfigError(f"{src}: {at}.capacity_rule: unknown rule {rule!r}"
                                  f"{suggest(rule, CAPACITY_RULES)}; expected one of {', '.join(CAPACITY_RULES)}")
        if "capacity_slack" in entry:
            slack = get(entry, "capacity_slack", float, source=src, prefix=at)
            if rule != "fc_slack":
                raise ConfigError(f"{src}: {at}.capacity_slack: only capacity_rule fc_slack has a "
                                  f"slack ({spec.name}'s rule here is {rule!r})")
            check_slack(slack, f"{src}: {at}.capacity_slack")
        elif rule == "fc_slack" and spec.capacity_slack is None:
            raise ConfigError(f"{src}: {at}: capacity_rule fc_slack needs capacity_slack "
                              f"({spec.name}'s config has none)")
        if "issue_rule" in entry:
            rule = get(entry, "issue_rule", str, source=src, prefix=at)
            if not spec.eager:
                raise ConfigError(f"{src}: {at}.issue_rule: system {spec.name} has no Eager Pool; "
                                  "drafting and verification alternate (leave issue_rule out)")
            if rule not in ISSUE_RULES:
                raise ConfigError(f"{src}: {at}.issue_rule: unknown rule {rule!r}"
                                  f"{suggest(rule, ISSUE_RULES)}; expected one of {', '.join(ISSUE_RULES)}")
        ks = _list(entry.get("aging_passes"))
        if "aging_passes" in entry:
            from sim.manager.formats import AGE
            for j, k in enumerate(ks):
                where = f"{src}: {at}.aging_passes" + (f"[{j}]" if isinstance(entry["aging_passes"], list) else "")
                if _int(k, where) > AGE.max_raw:
                    raise ConfigError(f"{where}: expected at most {AGE.max_raw}, found {k}")
            if spec.verify != "shared_pool":
                raise ConfigError(f"{src}: {at}.aging_passes: system {spec.name} has no Shared Pool "
                                  "(only systems with verify: shared_pool); leave it out")
        label = get(entry, "label", str, source=src, prefix=at, default=None)
        if label == "":
            raise ConfigError(f"{src}: {at}.label: expected a non-empty name")
        if spec.stop == "threshold" and get(entry, "tau", float, source=src, prefix=at,
                                            default=tau) is None:
            for pair in pairs:      # tau comes from configs/tau/<pair>.yaml
                if not (CONFIGS / "tau" / f"{pair}.yaml").is_file():
                    raise ConfigError(f"{src}: {at}: system {spec.name} needs a tau for {pair}: "
                                      f"configs/tau/{pair}.yaml does not exist (give tau, or run "
                                      f"saddle tune-tau --pair {pair})")
        if spec.verify == "shared_pool":
            from sim.manager.config import ManagerConfig
            slots = ManagerConfig.load(None).max_requests
            for j, b in enumerate(own or batches):
                if b > slots:
                    key = f"{at}.batches[{j}]" if own else f"batches[{j}]"
                    raise ConfigError(f"{src}: {key}: batch {b} of {spec.name} ({at}) exceeds the "
                                      f"{slots} Controller slots of configs/manager.yaml "
                                      "(controller.max_requests)")
        for other, (o_entry, o_spec, o_ds, o_ks) in enumerate(entries):
            same = (o_entry.get("label") or o_spec.name) == (label or spec.name)
            shared = set(o_entry.get("batches", batches)) & set(own or batches)
            if same and shared and any(d in o_ds for d in ds) and any(k in o_ks for k in ks):
                raise ConfigError(f"{src}: {at}: the same runs as systems[{other}] (system "
                                  f"{label or spec.name}, draft length, aging, batches); give one a label")
        entries.append((entry, spec, ds, ks))

    runs = []
    for pair in pairs:
        for seq_entry in seqs:
            seq = resolve_sequence_length(seq_entry, pair)
            for batch in batches:
                for i, (entry, spec, ds, ks) in enumerate(entries):
                    if batch not in entry.get("batches", batches):
                        continue
                    for d, k in ((d, k) for d in ds for k in ks):
                        runs.append(RunParams(
                            system=spec.name, pair=pair, batch=batch, draft_length=d,
                            tau=float(entry["tau"]) if "tau" in entry else tau,
                            max_draft_len=entry.get("max_draft_len"),
                            capacity_rule=entry.get("capacity_rule"),
                            capacity_slack=(float(entry["capacity_slack"])
                                            if "capacity_slack" in entry else None),
                            issue_rule=entry.get("issue_rule"), label=entry.get("label"),
                            dlm_fc_threshold=entry.get("dlm_fc_threshold"),
                            tlm_attention_threshold=entry.get("tlm_attention_threshold"),
                            aging_passes=k, trace=trace, split=split,
                            requests=n_requests if per_batch is None else per_batch * batch,
                            seed=seed, validation_fraction=fraction, batching=batching,
                            sequence_length=seq, source=src))
    select = get(data, "select", list, source=src, default=None)
    if select is not None:
        for i, rule in enumerate(select):
            if not isinstance(rule, dict):
                raise ConfigError(f"{src}: select[{i}]: expected a mapping of run field -> value "
                                  "or list of values")
            check_keys(rule, RUN_FIELDS, source=src, where=f"select[{i}]")
        runs = [p for p in runs if any(_matches(p, rule, f"{src}: select[{i}]")
                                       for i, rule in enumerate(select))]
        if not runs:
            raise ConfigError(f"{src}: select: no run of the grid matches any rule")
    names = {p.label or p.system for p in runs}
    plot = get(data, "plot", (dict, list), source=src, default={"x": "batch", "metric": "tokens_per_s"})
    for i, spec in enumerate(plot if isinstance(plot, list) else [plot]):
        at = "plot" + (f"[{i}]" if isinstance(plot, list) else "")
        where = f"{src}: {at}"
        if not isinstance(spec, dict):
            raise ConfigError(f"{where}: expected a mapping (x, metric, ...), found {spec!r}")
        check_keys(spec, PLOT_KEYS, source=src, where=at)
        if spec.get("x", "batch") not in PLOT_X:
            raise ConfigError(f"{where}.x: expected one of {list(PLOT_X)}, found {spec.get('x')!r}")
        check_spec(spec, where)
        norm = spec.get("normalize")
        if norm is not None and norm not in names:
            raise ConfigError(f"{where}.normalize: no system of the experiment is named {norm!r}"
                              f"{suggest(norm, names)}; systems: {', '.join(sorted(names))}")
        plot_where = spec.get("where", {})
        if not isinstance(plot_where, dict):
            raise ConfigError(f"{where}.where: expected a mapping of run field -> value, found {plot_where!r}")
        check_keys(plot_where, RUN_FIELDS, source=src, where=f"{at}.where")
    if "published" in data:
        from sim.experiments.published import check
        check(data["published"], src)
    check_workloads(runs)
    data = dict(data, name=name, plot=plot)
    return data, runs


def check_workloads(runs: list[RunParams]) -> None:
    """Read every trace the runs replay and take each run's requests from it, as the run will
    (cached: the runs in this process reuse it), so a bad trace, a split the trace lacks, too
    few requests or a too short trace stop the experiment before its first run, once."""
    from sim.systems.run import _workload, default_trace

    seen = set()
    for p in runs:
        trace = str(p.trace or default_trace(p.pair, p.sequence_length))
        max_seq = max(p.max_seq_len or load_pair(p.pair).max_sequence_length, p.sequence_length or 0)
        key = (trace, p.split, p.requests, p.seed, p.validation_fraction, max_seq, p.sequence_length)
        if key not in seen:
            seen.add(key)
            _workload(trace, p.split, p.requests, p.seed, p.validation_fraction, max_seq, p.source,
                      p.sequence_length)


def _matches(p: RunParams, rule: dict, where: str) -> bool:
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
