"""One simulated run: a system, a model pair, a batch size and a workload -> ``RunRecord``.

Offline choices (SpecPIM's mapping, a searched fixed d, the Scheduler thresholds, the TLM pass
capacity) are made here from the cost model and the validation split, then the system's run
class replays the test split. Cost adapters are shared by runs in one process, so a grid
prices each distinct step once.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

from sim.config import config_path, get, load_yaml
from sim.engine.costs import CostAdapter
from sim.errors import ConfigError
from sim.manager.config import ManagerConfig
from sim.manager.formats import quantize_prob
from sim.manager.transactions import Device
from sim.metrics import RunRecord
from sim.model import load_pair
from sim.systems import offline
from sim.systems.catalog import run_class
from sim.systems.pooled import PooledRun
from sim.paths import CONFIGS
from sim.systems.registry import STOP_RULES, calibration_table, check_entropy
from sim.systems.base import RunSetup
from sim.systems.spec import (CAPACITY_RULES, ISSUE_RULES, IssueRule, Kind, SystemSpec,
                              check_slack, load_manager_timing, load_system)
from sim.workload import Workload, load_workload


@dataclass(frozen=True)
class RunParams:
    system: str
    pair: str
    batch: int
    draft_length: int | str | None = None     # int, "search", or None (adaptive / AD)
    tau: float | None = None                  # None: configs/tau/<pair>.yaml
    max_draft_len: int | None = None          # None: configs/manager.yaml
    trace: str | None = None                  # None: traces/data/<pair>.synth.jsonl.gz
    split: str = "test"
    requests: int | None = None
    seed: int = 0
    validation_fraction: float = 0.5
    batching: str = "continuous"
    max_seq_len: int | None = None
    sequence_length: int | None = None
    capacity_rule: str | None = None          # None: the system's configs/systems/ value
    capacity_slack: float | None = None       # capacity_rule fc_slack; None: the system's value
    issue_rule: str | None = None             # None: the system's configs/systems/ value
    stop: str | None = None                   # stop rule (registry.py); None: the system's
    stop_param: float | None = None           # its parameter; None: configs/stopping/<pair>.yaml
    label: str | None = None                  # the name in records and plots (None: system)
    manager: str | None = None                # Manager config file (pool sizes); None: configs/manager.yaml
    search_d_max: int = 12
    # The Scheduler's thresholds (dynamic mapping); None: measured offline (offline.py)
    dlm_fc_threshold: int | None = None
    tlm_attention_threshold: int | None = None
    # Shared Pool aging K (sim/manager/shared_pool.py); None: the Manager config's (off by default)
    aging_passes: int | None = None
    # Config-file values set for this run only: sorted (dotted key, value) pairs (sim/overrides.py)
    overrides: tuple[tuple[str, object], ...] = ()
    source: str = "<run>"

    def key(self) -> str:
        stop = "" if self.stop is None else f"|{self.stop}{'' if self.stop_param is None else self.stop_param}"
        return f"{self.system}|{self.pair}|b{self.batch}|d{self.draft_length}|tau{self.tau}{stop}"

    def stop_rule(self) -> str | None:
        """The stop rule this run uses: its own, else its system's."""
        return self.stop or load_system(self.system).stop

    def trace_path(self) -> str:
        """The trace this run replays: ``trace``, else the pair's synthetic one (with the
        modelled entropy when the stop rule reads it)."""
        if self.trace:
            return str(self.trace)
        rule = self.stop_rule()
        return str(default_trace(self.pair, self.sequence_length,
                                 entropy=rule is not None and STOP_RULES[rule].needs_entropy))


def default_trace(pair: str, sequence_length: int | None = None, entropy: bool = False) -> Path:
    """The pair's synthetic trace, long enough for ``sequence_length`` (traces/synth.py)."""
    from traces.synth import trace_for_context
    return trace_for_context(pair, sequence_length, entropy)


def capacity_rule(spec: SystemSpec, p: RunParams) -> tuple[str, float | None]:
    """The run's pass-capacity rule and, for ``fc_slack``, its slack: the run's own, else the
    system's."""
    rule = p.capacity_rule or spec.capacity_rule
    if rule not in CAPACITY_RULES:
        raise ConfigError(f"{p.source}: capacity_rule: expected one of {list(CAPACITY_RULES)}, found {rule!r}")
    if rule != "fc_slack":
        if p.capacity_slack is not None:
            raise ConfigError(f"{p.source}: capacity_slack: only capacity_rule fc_slack has a slack "
                              f"(the run's rule is {rule!r})")
        return rule, None
    slack = p.capacity_slack if p.capacity_slack is not None else spec.capacity_slack
    if slack is None:
        raise ConfigError(f"{p.source}: capacity_rule fc_slack needs capacity_slack "
                          f"({spec.name}'s config has none)")
    return rule, check_slack(slack, f"{p.source}: capacity_slack")


def load_tau(pair: str) -> float:
    path = config_path("tau", pair)
    return get(load_yaml(path), "tau", float, source=path)


def load_stop_param(pair: str, rule: str) -> float:
    """The tuned parameter of ``rule`` for ``pair`` (``saddle tune-stop``)."""
    path = CONFIGS / "stopping" / f"{pair}.yaml"
    if not path.is_file():
        raise ConfigError(f"{path}: does not exist: stop rule {rule!r} needs its tuned parameter "
                          f"for {pair} (give stop_param, or run saddle tune-stop --pair {pair} "
                          f"--rule {rule})")
    data = load_yaml(path)
    entry = get(data, rule, dict, source=path, default=None)
    if entry is None:
        raise ConfigError(f"{path}: {rule}: missing (run saddle tune-stop --pair {pair} --rule {rule})")
    return get(entry, "value", float, source=path, prefix=rule)


@lru_cache(maxsize=8)
def _calibration(trace: str, seed: int, fraction: float, max_seq: int, source: str,
                 sequence_length: int | None) -> tuple[int, ...]:
    validation = _workload(trace, "validation", None, seed, fraction, max_seq, source, sequence_length)
    return calibration_table(validation.requests)


@lru_cache(maxsize=None)
def adapter(hardware: str, tlm: str, dlm: str) -> CostAdapter:
    return CostAdapter.named(hardware, tlm, dlm)


@lru_cache(maxsize=32)
def _workload(trace: str, split: str, requests: int | None, seed: int, fraction: float,
              max_seq_len: int | None, source: str, sequence_length: int | None = None) -> Workload:
    return load_workload(trace, split=split, n_requests=requests, seed=seed,
                         validation_fraction=fraction, max_seq_len=max_seq_len, source=source,
                         sequence_length=sequence_length)


@contextmanager
def _without_cycle_collection():
    """A run allocates millions of short-lived objects (events, transactions, priced steps)
    next to large long-lived caches; the cyclic collector's passes over those caches cost a
    fifth of a run. Reference counting frees the run's garbage. After the run, what is still
    tracked (mostly the price caches it filled, about a million objects after a large run) is
    moved to the permanent generation (``gc.freeze``): the collector would otherwise traverse
    all of it at its next pass, 5 % of a run. The price is that the run's own reference cycles
    (the Manager's few hundred objects) are kept, not collected."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.freeze()
            gc.enable()


def simulate(p: RunParams, timeline: bool = False, record: bool = False) -> tuple[RunRecord, object]:
    """Run ``p``; returns the metrics and the run object (its interval log feeds a timeline).
    ``record``: a Shared Pool system keeps every Manager transaction and its events in
    ``run.events`` (co-verification of the RTL, ``hw/flow/coverify.py``)."""
    if p.overrides:
        from dataclasses import replace
        from sim.overrides import applied
        with applied(p.overrides):
            return simulate(replace(p, overrides=()), timeline, record)
    with _without_cycle_collection():
        return _simulate(p, record)


def _simulate(p: RunParams, record: bool) -> tuple[RunRecord, object]:
    spec = load_system(p.system)
    pair = load_pair(p.pair)
    costs = adapter(spec.hardware, pair.tlm.name, pair.dlm.name)
    rule_name = p.stop_rule()
    if p.stop is not None:
        check_stop(p.stop, spec, p.source)
    trace = p.trace_path()
    max_seq = max(p.max_seq_len or pair.max_sequence_length, p.sequence_length or 0)
    work = _workload(trace, p.split, p.requests, p.seed, p.validation_fraction, max_seq, p.source,
                     p.sequence_length)
    base_cfg = ManagerConfig.load(p.manager)
    max_len = p.max_draft_len or base_cfg.max_draft_len
    tau = p.tau if p.tau is not None else (load_tau(p.pair) if rule_name == "threshold" else 0.0)

    mapping = dict(spec.static_mapping) if spec.static_mapping else None
    draft_length = p.draft_length
    if spec.speculative and spec.stop == "fixed":
        if draft_length is None:
            raise ConfigError(f"{p.source}: system {p.system} needs draft_length (a number or 'search')")
        if draft_length == "search":
            validation = _workload(trace, "validation", None, p.seed, p.validation_fraction,
                                   max_seq, p.source, p.sequence_length)
            mapping_for = ((lambda d: offline.specpim_mapping(costs, p.batch, max_seq, d))
                           if spec.mapping == "specpim" else (lambda d: mapping))
            draft_length, mapping = offline.search_draft_length(
                costs, mapping_for, validation.requests, p.batch, max_seq, p.search_d_max)
        elif not isinstance(draft_length, int) or isinstance(draft_length, bool) or draft_length < 1:
            raise ConfigError(f"{p.source}: draft_length: expected an integer >= 1 or 'search', "
                              f"found {draft_length!r}")
    elif draft_length is not None:
        raise ConfigError(f"{p.source}: draft_length: system {p.system} does not take a fixed d "
                          f"(found {draft_length!r}); leave it out")
    if spec.mapping == "specpim" and mapping is None:
        mapping = offline.specpim_mapping(costs, p.batch, max_seq, draft_length or 1)

    stop = None
    rule_extra = {}
    if spec.speculative:
        rule = STOP_RULES[rule_name]
        param, calibration = p.stop_param, None
        if rule.param_name is not None and param is None:
            param = load_stop_param(p.pair, rule_name)
        if rule.needs_calibration:
            calibration = _calibration(trace, p.seed, p.validation_fraction, max_seq, p.source,
                                       p.sequence_length)
            rule_extra["acceptance_table"] = list(calibration)
        if rule.needs_entropy:
            check_entropy(work.requests, trace)
        if rule.param_name is not None:
            rule_extra["stop_param"] = param
        stop = rule(draft_length=draft_length if rule_name == "fixed" else None,
                    tau_raw=quantize_prob(tau), max_draft_len=max_len, param=param,
                    calibration=calibration)
    n_mb = costs.n_devices
    if spec.verify == "shared_pool":
        where = p.manager or "configs/manager.yaml"
        if p.batch > base_cfg.max_requests:
            raise ConfigError(f"{p.source}: batch {p.batch} exceeds the {base_cfg.max_requests} Controller "
                              f"slots of {where} (controller.max_requests)")
        if spec.eager and base_cfg.eager_entries < n_mb:
            raise ConfigError(f"{where}: pools.eager_entries {base_cfg.eager_entries}: needs at least one "
                              f"entry for each of the {n_mb} micro-batches of {spec.hardware}")
    if p.aging_passes is not None and spec.verify != "shared_pool":
        raise ConfigError(f"{p.source}: aging_passes: system {p.system} has no Shared Pool "
                          "(only systems with verify: shared_pool); leave it out")
    cfg = base_cfg.replace(max_draft_len=max_len, tau=stop.controller_tau if stop else 0,
                           acceptance_table=stop.acceptance_table if stop else None,
                           micro_batches=n_mb,
                           eager_entries=(base_cfg.eager_entries // n_mb * n_mb) if spec.eager else 0,
                           dynamic_mapping=spec.mapping == "dynamic",
                           static_dlm_fc=Device(mapping["dlm_fc"]),
                           static_tlm_attention=Device(mapping["tlm_attention"]),
                           aging_passes=(base_cfg.aging_passes if p.aging_passes is None
                                         else p.aging_passes))
    cfg.validate(p.source)
    setup_extra = {}
    if spec.verify == "shared_pool":
        if spec.mapping == "dynamic":
            context = max_seq // 2
            dlm_thr, tlm_thr = offline.scheduler_thresholds(
                costs, mapping, p.batch, context, max_batch=128, max_tokens=max_len)
            dlm_thr = dlm_thr if p.dlm_fc_threshold is None else p.dlm_fc_threshold
            tlm_thr = tlm_thr if p.tlm_attention_threshold is None else p.tlm_attention_threshold
            cfg = cfg.replace(dlm_fc_threshold=dlm_thr, tlm_attention_threshold=tlm_thr)
            setup_extra["scheduler_thresholds"] = {"dlm_fc": dlm_thr, "tlm_attention": tlm_thr}
        rule, slack = capacity_rule(spec, p)
        ridge = offline.verify_capacity(costs, cfg.shared_entries, rule, slack)
        capacity = min(max(ridge, p.batch), cfg.shared_entries)
        setup_extra["verify_capacity"] = capacity
        setup_extra["capacity_rule"] = rule if slack is None else f"{rule} {slack:g}"
        if cfg.aging_passes is not None:
            setup_extra["aging_passes"] = cfg.aging_passes
    issue_rule = spec.issue_rule
    if p.issue_rule is not None:
        if not spec.eager:
            raise ConfigError(f"{p.source}: issue_rule: system {p.system} has no Eager Pool; drafting "
                              f"and verification alternate (leave issue_rule out)")
        if p.issue_rule not in ISSUE_RULES:
            raise ConfigError(f"{p.source}: issue_rule: expected one of {list(ISSUE_RULES)}, "
                              f"found {p.issue_rule!r}")
        issue_rule = p.issue_rule
    if issue_rule is not None:
        setup_extra["issue_rule"] = issue_rule
    setup = RunSetup(spec=spec, pair=p.pair, workload=work, batch=p.batch, batching=p.batching,
                     costs=costs, stop=stop, mapping=mapping,
                     timing=load_manager_timing() if spec.manager_hardware else None,
                     manager_config=cfg,
                     draft_length=draft_length if spec.stop == "fixed" else None,
                     capacity=setup_extra.get("verify_capacity", 0),
                     issue_rule=IssueRule(issue_rule or IssueRule.DRAINED), record=record)
    run_type = run_class(spec, stop)
    if record and not issubclass(run_type, PooledRun):
        raise ConfigError(f"{p.source}: system {p.system} has no Manager to record (verify: shared_pool)")
    run = run_type(setup)
    metrics = run.execute()
    metrics.sequence_length = p.sequence_length
    if p.label is not None:
        metrics.system = p.label
        metrics.system_config = p.system
    annotations = {**setup_extra, **rule_extra}
    metrics = replace(metrics, **{key: str(value) if isinstance(value, Kind) else value
                                  for key, value in annotations.items()})
    if rule_name == "threshold":
        metrics.tau = tau
    if p.stop is not None:
        metrics.stop = p.stop
    return metrics, run


def check_stop(stop: str, spec, where: str) -> None:
    """``stop`` may replace the rule of ``spec``: a known adaptive rule on a speculative system
    that does not draft a fixed d."""
    if stop not in STOP_RULES or stop == "fixed":
        raise ConfigError(f"{where}: stop: expected one of {sorted(set(STOP_RULES) - {'fixed'})}, "
                          f"found {stop!r}")
    if not spec.speculative or spec.stop == "fixed":
        raise ConfigError(f"{where}: stop: system {spec.name} has no adaptive stopping rule to "
                          f"replace (its stop is {spec.stop!r}); leave stop out")
