"""The resolve step: a run's parameters (``RunParams``) -> its full setup (``RunSetup``): the
files it reads (through one ``Configs`` with its overrides), every check of a parameter against
its system, and the offline choices (``offline.py``). Experiment files
(``sim/experiments/grid.py``) check their entries with the same ``check_*`` functions.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from common.config import get, load_yaml
from common.errors import ConfigError
from common.paths import CONFIGS
from sim.config import BASE, Configs
from sim.cost.system import load_hardware
from sim.engine.costs import CostAdapter
from sim.manager.config import DEFAULT_PATH, ManagerConfig
from sim.manager.formats import AGE, THRESHOLD, quantize_prob
from sim.manager.planner import PassCosts
from sim.manager.timing import ManagerTiming, load_manager_timing
from sim.manager.transactions import Device
from sim.model import load_model, load_pair
from sim.systems import memory, offline
from sim.systems.registry import STOP_RULES, StopRule, calibration_table, check_entropy, reads_tau
from sim.systems.spec import (
    CapacityRule,
    IssueRule,
    SystemSpec,
    check_capacity,
    check_issue_rule,
    load_system,
)
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
    # A run that does not fit in memory (sim/systems/memory.py): "error", or "warn" (simulated
    # as if the memory were larger, the overflow in RunSetup.warnings)
    memory_check: str = "error"
    source: str = "<run>"

    def key(self) -> str:
        stop = "" if self.stop is None else f"|{self.stop}{'' if self.stop_param is None else self.stop_param}"
        return f"{self.system}|{self.pair}|b{self.batch}|d{self.draft_length}|tau{self.tau}{stop}"

    def configs(self) -> Configs:
        return Configs.of(self.overrides)

    def stop_rule(self) -> str | None:
        """The stop rule this run uses: its own, else its system's."""
        return self.stop or load_system(self.system, configs=self.configs()).stop

    def trace_path(self) -> str:
        """The trace this run replays: ``trace``, else the pair's synthetic one, long enough
        for ``sequence_length`` (with the modelled entropy when the stop rule reads it)."""
        if self.trace:
            return str(self.trace)
        from traces.synth import trace_for_context
        rule = self.stop_rule()
        return str(trace_for_context(self.pair, self.sequence_length,
                                     rule is not None and STOP_RULES[rule].needs_entropy))

    def max_seq(self) -> int:
        """The longest context a request may reach: the run's limit, else the pair's, and at
        least the forced ``sequence_length``."""
        pair = load_pair(self.pair, configs=self.configs())
        return max(self.max_seq_len or pair.max_sequence_length, self.sequence_length or 0)


# -- checks shared with experiment files ---------------------------------------------------------
# ``where`` names the value: ``FILE: systems[2].tau`` in an experiment, ``SOURCE: tau`` in a run;
# a check of several keys takes their prefix instead (``FILE: systems[2].``, ``SOURCE: ``).

def check_int(value: Any, where: str, low: int = 1, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{where}: expected an integer >= {low}, found {value!r}")
    if high is not None and value > high:
        raise ConfigError(f"{where}: expected at most {high}, found {value}")
    return value


def check_probability(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ConfigError(f"{where}: expected a number in [0, 1], found {value!r}")
    return float(value)


def check_draft_length(d: Any, spec: SystemSpec, where: str) -> None:
    """``where`` names the key. A fixed-d system needs d (a number or ``search``); no other
    system takes one."""
    if spec.speculative and spec.stop == "fixed":
        if d is None:
            raise ConfigError(f"{where}: system {spec.name} drafts a fixed d: give a number or "
                              "'search'")
        if d != "search":
            check_int(d, where)
    elif d is not None:
        raise ConfigError(f"{where}: system {spec.name} does not take a fixed d (found {d!r}); "
                          "leave it out")


def check_stop(stop: str, spec: SystemSpec, where: str) -> None:
    """``stop`` may replace the rule of ``spec``: a known adaptive rule on a speculative system
    that does not draft a fixed d. ``where`` is the message's prefix (the key is ``stop``)."""
    if stop not in STOP_RULES or stop == "fixed":
        raise ConfigError(f"{where}: stop: expected one of {sorted(set(STOP_RULES) - {'fixed'})}, "
                          f"found {stop!r}")
    if not spec.speculative or spec.stop == "fixed":
        raise ConfigError(f"{where}: stop: system {spec.name} has no adaptive stopping rule to "
                          f"replace (its stop is {spec.stop!r}); leave stop out")


def check_stop_param(param: Any, rule: str | None, where: str) -> None:
    check_probability(param, where)
    if rule is None or STOP_RULES[rule].param_name is None:
        raise ConfigError(f"{where}: stop rule {rule!r} takes no parameter; leave stop_param out")


def check_threshold(value: Any, spec: SystemSpec, where: str) -> None:
    """A Scheduler threshold given by hand: a register's value, on a system with a Scheduler."""
    check_int(value, where, low=0, high=THRESHOLD.max_raw)
    if spec.mapping != "dynamic":
        raise ConfigError(f"{where}: system {spec.name} has no Scheduler (mapping: dynamic); "
                          "leave it out")


def check_aging(k: Any, spec: SystemSpec, where: str) -> None:
    """A Shared Pool aging K (``where`` names the key)."""
    check_int(k, where, high=AGE.max_raw)
    if spec.verify != "shared_pool":
        raise ConfigError(f"{where}: system {spec.name} has no Shared Pool (only systems with "
                          "verify: shared_pool); leave it out")


def check_slots(batch: int, spec: SystemSpec, cfg: ManagerConfig, manager: str | None,
                where: str, entry: str = "") -> None:
    """A Shared Pool system's batch fits the Controller's slots of its Manager config
    (``entry``: where the system was named, when not in ``where``)."""
    if spec.verify == "shared_pool" and batch > cfg.max_requests:
        file = manager or DEFAULT_PATH.relative_to(CONFIGS.parent)
        raise ConfigError(f"{where}: batch {batch} exceeds the {cfg.max_requests} Controller "
                          f"slots of {file} (controller.max_requests) for {spec.name}{entry}")


def check_batch_fills(batch: int, requests: int, where: str) -> None:
    """A batch is at most the requests a run replays (a larger one would never fill)."""
    if batch > requests:
        raise ConfigError(f"{where}: batch {batch} exceeds the {requests} requests the run "
                          f"replays: the batch would never fill (give batch <= {requests}, or "
                          "more requests)")


MEMORY_CHECKS = ("error", "warn")


def check_memory_mode(mode: Any, where: str) -> str:
    if mode not in MEMORY_CHECKS:
        raise ConfigError(f"{where}: memory_check: expected one of {list(MEMORY_CHECKS)}, "
                          f"found {mode!r}")
    return mode


def memory_shape(p: RunParams) -> memory.Shape:
    """The run's batch, longest context and largest TLM pass: batch x (1 + the longest
    draft: d, ``search_d_max`` when searched, else ``max_draft_len``), at most the Shared
    Pool's entries plus one query per request."""
    configs = p.configs()
    spec, cfg = load_system(p.system, configs=configs), ManagerConfig.load(p.manager, configs=configs)
    longest, d = 0, p.draft_length
    if spec.speculative:
        fixed = d if isinstance(d, int) else p.search_d_max
        longest = fixed if spec.stop == "fixed" else (p.max_draft_len or cfg.max_draft_len)
    tokens = p.batch * (1 + longest)
    if spec.verify == "shared_pool":
        tokens = min(tokens, cfg.shared_entries + p.batch)
    return memory.Shape(p.batch, p.max_seq(), tokens)


def _memory_of(p: RunParams) -> tuple:
    configs = p.configs()
    spec, pair = load_system(p.system, configs=configs), load_pair(p.pair, configs=configs)
    return adapter(spec.hardware, pair.tlm.name, pair.dlm.name, configs).system, pair, spec


def check_fits(p: RunParams, mapping: dict[str, str]) -> str | None:
    """Whether ``p`` fits in memory with ``mapping`` (sim/systems/memory.py): None, a
    ``ConfigError``, or under ``memory_check: warn`` the message."""
    system, pair, spec = _memory_of(p)
    name = (p.label or p.system) + ("" if p.draft_length is None else f" (d {p.draft_length})")
    return memory.check_memory(system, pair, spec, mapping, memory_shape(p), p.source,
                               check_memory_mode(p.memory_check, p.source), name)


def precheck_fits(p: RunParams) -> str | None:
    """``check_fits`` before the run, where its mapping is known: a static or dynamic one; for
    SpecPIM's search (which picks among the mappings that fit), whether some mapping fits."""
    system, pair, spec = _memory_of(p)
    if spec.mapping != "specpim":
        return check_fits(p, dict(spec.static_mapping or {}))
    shape = memory_shape(p)
    candidates = offline.placements(system.pim is not None)
    if any(memory.overflow(system, pair, spec, m, shape) is None for m in candidates):
        return None
    least = min(candidates, key=lambda m: sum(x.bytes for x in memory.pieces(system, pair, spec, m, shape)))
    return check_fits(p, least)


def load_tau(pair: str) -> float:
    path = CONFIGS / "tau" / f"{pair}.yaml"
    if not path.is_file():
        raise ConfigError(f"configs/tau/{pair}.yaml does not exist: the threshold rule needs a "
                          f"tau for {pair} (give tau, or run saddle tune-tau --pair {pair})")
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


# -- what a run reads ---------------------------------------------------------------------------

def adapter(hardware: str, tlm: str, dlm: str, configs: Configs = BASE) -> CostAdapter:
    """The cost adapter of ``configs``'s hardware and models: shared by the runs of a process
    with the same overrides, so a grid prices each distinct step once."""
    return configs.cached(("adapter", hardware, tlm, dlm), lambda: CostAdapter(
        load_hardware(hardware, configs=configs), load_model(tlm, configs=configs),
        load_model(dlm, configs=configs)))


def workload(p: RunParams, split: str | None = None) -> Workload:
    """The requests ``p`` replays (or all of ``split``), as ``load_workload`` checks them."""
    return _workload(p.trace_path(), split or p.split, None if split else p.requests, p.seed,
                     p.validation_fraction, p.max_seq(), p.source, p.sequence_length)


@lru_cache(maxsize=32)
def _workload(trace: str, split: str, requests: int | None, seed: int, fraction: float,
              max_seq_len: int | None, source: str, sequence_length: int | None = None) -> Workload:
    """Cached by the trace's path and the split's settings: a grid replays each split for
    every batch and system, and reading a trace takes seconds."""
    return load_workload(trace, split=split, n_requests=requests, seed=seed,
                         validation_fraction=fraction, max_seq_len=max_seq_len, source=source,
                         sequence_length=sequence_length)


@lru_cache(maxsize=8)
def _calibration(trace: str, seed: int, fraction: float, max_seq: int, source: str,
                 sequence_length: int | None) -> tuple[int, ...]:
    validation = _workload(trace, "validation", None, seed, fraction, max_seq, source,
                           sequence_length)
    return calibration_table(validation.requests)


# -- the run's setup ----------------------------------------------------------------------------

@dataclass
class RunSetup:
    """A run's full setup, what its system is built from: what it reads and every choice made
    before its first event."""

    params: RunParams
    spec: SystemSpec
    costs: CostAdapter
    workload: Workload
    max_seq: int
    manager_config: ManagerConfig
    rule_name: str | None                 # the stop rule (the run's or its system's)
    tau: float = 0.0                      # the threshold rule's tau (0.0 for other rules)
    draft_length: int | None = None       # a fixed-d system's d (searched when "search")
    mapping: dict[str, str] = field(default_factory=dict)   # operator -> gpu|pim (initial)
    stop: StopRule | None = None
    timing: ManagerTiming | None = None
    capacity: int = 0                     # shared_pool: tokens one TLM pass verifies at most
    issue_rule: IssueRule = IssueRule.DRAINED    # eager: when a pass below capacity may start
    record: bool = False                  # shared_pool: keep every Manager transaction (run.events)
    warnings: list[str] = field(default_factory=list)   # not in the record (memory_check: warn)
    # What the record says about the choices, in the order records have always listed them.
    notes: dict[str, Any] = field(default_factory=dict)
    rule_notes: dict[str, Any] = field(default_factory=dict)

    def annotations(self) -> dict[str, Any]:
        """The record's fields that say how the run was set up."""
        p = self.params
        out = dict(self.notes)
        if p.label is not None:
            out["system_config"] = p.system
        if reads_tau(self.rule_name):
            out["tau"] = self.tau
        if p.stop is not None:
            out["stop"] = p.stop
        return out | self.rule_notes


def resolve(p: RunParams) -> RunSetup:
    """``p``'s setup, every parameter checked against its system; errors name ``p.source``."""
    configs = p.configs()
    spec = load_system(p.system, configs=configs)
    pair = load_pair(p.pair, configs=configs)
    costs = adapter(spec.hardware, pair.tlm.name, pair.dlm.name, configs)
    if p.stop is not None:
        check_stop(p.stop, spec, p.source)
    where = f"{p.source}: "
    for name in ("dlm_fc_threshold", "tlm_attention_threshold"):
        if getattr(p, name) is not None:
            check_threshold(getattr(p, name), spec, where + name)
    base = ManagerConfig.load(p.manager, configs=configs)
    r = RunSetup(params=p, spec=spec, costs=costs, workload=workload(p), max_seq=p.max_seq(),
                 manager_config=base, rule_name=p.stop_rule(),
                 mapping=dict(spec.static_mapping or {}))
    if p.tau is not None:
        r.tau = p.tau
    elif reads_tau(r.rule_name):
        r.tau = load_tau(p.pair)
    _draft_length_and_mapping(r)
    if spec.speculative:
        _stop_rule(r, p.max_draft_len or base.max_draft_len)
    r.manager_config = _manager_config(r, p.max_draft_len or base.max_draft_len)
    check_batch_fills(p.batch, len(r.workload.requests), p.source)
    found = check_fits(p, r.mapping)
    if found:
        r.warnings.append(found)
    issue_rule = check_issue_rule(p.issue_rule, spec, where + "issue_rule")
    if spec.verify == "shared_pool":
        _pool_setup(r, issue_rule)
    else:
        check_capacity(spec, p.capacity_rule, p.capacity_slack, where)
    if issue_rule is not None:
        r.issue_rule = issue_rule
        r.notes["issue_rule"] = str(issue_rule)
    if spec.manager_hardware:
        r.timing = load_manager_timing(configs=configs)
    return r


def _draft_length_and_mapping(r: RunSetup) -> None:
    """A fixed-d system's d (searched offline for ``search``) and SpecPIM's mapping for it."""
    p, spec = r.params, r.spec
    check_draft_length(p.draft_length, spec, f"{p.source}: draft_length")
    if p.draft_length == "search":
        validation = workload(p, "validation")
        mapping_for = ((lambda d: offline.specpim_mapping(r.costs, p.batch, r.max_seq, d,
                                                          _fits(r)))
                       if spec.mapping == "specpim" else (lambda d: r.mapping))
        r.draft_length, r.mapping = offline.search_draft_length(
            r.costs, mapping_for, validation.requests, p.batch, r.max_seq, p.search_d_max)
    else:
        r.draft_length = p.draft_length  # type: ignore[assignment]  # checked: an int or None
    if spec.mapping == "specpim" and not r.mapping:
        d = r.draft_length or 1
        r.mapping = offline.specpim_mapping(r.costs, p.batch, r.max_seq, d, _fits(r))


def _fits(r: RunSetup):
    """Whether a mapping of the run fits in memory."""
    system, pair, spec = _memory_of(r.params)
    shape = memory_shape(r.params)
    return lambda m: memory.overflow(system, pair, spec, m, shape) is None


def _stop_rule(r: RunSetup, max_len: int) -> None:
    """The stop rule object, with its tuned parameter and calibration table."""
    p = r.params
    assert r.rule_name is not None     # a speculative system has a stop rule
    rule = STOP_RULES[r.rule_name]
    param, calibration = p.stop_param, None
    if rule.param_name is not None and param is None:
        param = load_stop_param(p.pair, r.rule_name)
    if rule.needs_calibration:
        calibration = _calibration(p.trace_path(), p.seed, p.validation_fraction, r.max_seq,
                                   p.source, p.sequence_length)
        r.rule_notes["acceptance_table"] = list(calibration)
    if rule.needs_entropy:
        check_entropy(r.workload.requests, p.trace_path())
    if rule.param_name is not None:
        r.rule_notes["stop_param"] = param
    r.stop = rule(draft_length=r.draft_length if r.rule_name == "fixed" else None,
                  tau_raw=quantize_prob(r.tau), max_draft_len=max_len, param=param,
                  calibration=calibration)


def _manager_config(r: RunSetup, max_len: int) -> ManagerConfig:
    """The Manager's configuration for this run: its file's, with the run's stop rule, micro-
    batches, mapping and aging."""
    p, spec, n_mb, base = r.params, r.spec, r.costs.n_devices, r.manager_config
    if spec.verify == "shared_pool":
        check_slots(p.batch, spec, base, p.manager, p.source)
        if spec.eager and base.eager_entries < n_mb:
            raise ConfigError(f"{p.manager or 'configs/manager.yaml'}: pools.eager_entries "
                              f"{base.eager_entries}: needs at least one entry for each of the "
                              f"{n_mb} micro-batches of {spec.hardware}")
    if p.aging_passes is not None:
        check_aging(p.aging_passes, spec, f"{p.source}: aging_passes")
    cfg = base.replace(max_draft_len=max_len, tau=r.stop.controller_tau if r.stop else 0,
                       acceptance_table=r.stop.acceptance_table if r.stop else None,
                       micro_batches=n_mb,
                       eager_entries=(base.eager_entries // n_mb * n_mb) if spec.eager else 0,
                       dynamic_mapping=spec.mapping == "dynamic",
                       static_dlm_fc=Device(r.mapping["dlm_fc"]),
                       static_tlm_attention=Device(r.mapping["tlm_attention"]),
                       aging_passes=base.aging_passes if p.aging_passes is None else p.aging_passes)
    cfg.validate(p.source)
    return cfg


def _pool_setup(r: RunSetup, issue_rule: IssueRule | None) -> None:
    """A Shared Pool system's offline choices: the Scheduler's thresholds (dynamic mapping),
    the TLM pass capacity and SADDLE+'s tables."""
    p, spec, cfg = r.params, r.spec, r.manager_config
    if spec.mapping == "dynamic":
        dlm_thr, tlm_thr = offline.scheduler_thresholds(
            r.costs, r.mapping, p.batch, r.max_seq // 2, max_batch=128,
            max_tokens=cfg.max_draft_len)
        dlm_thr = dlm_thr if p.dlm_fc_threshold is None else p.dlm_fc_threshold
        tlm_thr = tlm_thr if p.tlm_attention_threshold is None else p.tlm_attention_threshold
        cfg = r.manager_config = cfg.replace(dlm_fc_threshold=dlm_thr, tlm_attention_threshold=tlm_thr)
        r.notes["scheduler_thresholds"] = {"dlm_fc": dlm_thr, "tlm_attention": tlm_thr}
    rule, slack = check_capacity(spec, p.capacity_rule, p.capacity_slack, f"{p.source}: ")
    assert rule is not None
    ridge = offline.verify_capacity(r.costs, cfg.shared_entries, rule, slack)
    r.capacity = min(max(ridge, p.batch), cfg.shared_entries)
    if issue_rule is IssueRule.COST:
        r.capacity = cfg.shared_entries       # the planner decides every pass below the pool
    r.notes["verify_capacity"] = r.capacity
    r.notes["capacity_rule"] = str(rule) if slack is None else f"{rule} {slack:g}"
    if cfg.aging_passes is not None:
        r.notes["aging_passes"] = cfg.aging_passes
    _plus_setup(r, issue_rule is IssueRule.COST, rule is CapacityRule.COST)


PLUS_FILE = CONFIGS / "tau" / "plus"     # SADDLE+'s tuned tables: <pair>.yaml (tuning/plus.py)


def _plus_setup(r: RunSetup, issue: bool, select: bool) -> None:
    """SADDLE+'s Manager tables: the planner's pass costs, the load-aware tau, the pass-aware
    DLM FC threshold (each only if the system or run asks for it)."""
    p, spec, cfg = r.params, r.spec, r.manager_config
    context = r.max_seq // 2
    changes: dict[str, Any] = {}
    plus: dict[str, Any] = {}
    if issue or select:
        fc, per_request = offline.pass_costs(r.costs, r.mapping, p.batch, context, cfg.shared_entries)
        changes["pass_costs"] = PassCosts(fc=tuple(fc), per_request=per_request,
                                          wait_bound=wait_bound(p.pair), select=select, issue=issue)
        plus["pass_costs"] = {"fc": fc, "per_request": per_request, "select": select, "issue": issue,
                              "wait_bound": changes["pass_costs"].wait_bound}
    # The table replaces the run's tau (or calibrated h), which the experiment runner fills in
    # from configs/tau/ (or configs/stopping/): one tau is saddle-plus-flat-tau's.
    if spec.tau_table and r.rule_name is not None and STOP_RULES[r.rule_name].planned_by_controller:
        changes["tau_table"] = load_tau_table(p.pair, r.rule_name)
        plus["tau_table"] = list(changes["tau_table"])
    if spec.pass_aware:
        changes["dlm_fc_threshold_locked"] = offline.locked_dlm_fc_threshold(
            r.costs, r.mapping, p.batch, context, max_batch=128)
        plus["dlm_fc_threshold_locked"] = changes["dlm_fc_threshold_locked"]
    if changes:
        r.notes["plus"] = plus
        r.manager_config = cfg.replace(**changes)
        r.manager_config.validate(p.source)


def _plus_file(pair: str, key: str) -> Any:
    path = PLUS_FILE / f"{pair}.yaml"
    value = load_yaml(path).get(key) if path.is_file() else None
    if value is None:
        raise ConfigError(f"{path}: {key}: missing: SADDLE+'s tuned tables for {pair} (give tau, "
                          f"or tune them: saddle tune-plus --pair {pair})")
    return value


def wait_bound(pair: str) -> int:
    """The planner's most consecutive waits (tuned with the tau table)."""
    return int(_plus_file(pair, "wait_bound"))


def load_tau_table(pair: str, rule: str) -> tuple[int, ...]:
    """SADDLE+'s Controller threshold per load for ``rule`` (raw UQ1.16; configs/tau/plus/)."""
    entry = _plus_file(pair, rule)
    return tuple(quantize_prob(x) for x in get(entry, "table", list, source=PLUS_FILE, prefix=rule))
