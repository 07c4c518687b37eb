"""``SystemSpec``: what a system is made of, read from ``configs/systems/NAME.yaml``. The
Manager's latency (``ManagerTiming``) lives in sim/manager/timing.py."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import TypeVar

from common.config import check_keys, config_path, get, suggest
from common.errors import ConfigError
from sim.config import BASE, Configs


class Kind(str, Enum):
    """A configuration choice: equal to its YAML spelling, so a spec read as text compares
    equal to it."""

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:   # messages quote a choice as the YAML spells it
        return repr(self.value)


K = TypeVar("K", bound=Kind)


class Decoding(Kind):
    AUTOREGRESSIVE = "autoregressive"
    SPECULATIVE = "speculative"


class Verify(Kind):
    LOCKSTEP = "lockstep"          # every request's round verified by one pass, in step
    SHARED_POOL = "shared_pool"    # the Manager's pools decide what a pass verifies


class MappingKind(Kind):
    STATIC = "static"
    SPECPIM = "specpim"            # SpecPIM's offline search (sim/systems/offline.py)
    DYNAMIC = "dynamic"            # the Manager's Scheduler


class IssueRule(Kind):
    """When a verification may start with fewer tokens than one pass holds (pooled.py)."""
    GPU_IDLE = "gpu-idle"
    TLM_IDLE = "tlm-idle"
    DRAINED = "drained"
    COST = "cost"                  # SADDLE+: the Manager's pass planner decides (planner.py)


class CapacityRule(Kind):
    """How many tokens one TLM pass verifies (sim/systems/offline.py)."""
    RIDGE = "ridge"
    FC_SLACK = "fc_slack"
    POOL = "pool"
    COST = "cost"                  # SADDLE+: the planner's argmax of value per cost (planner.py)


OPERATORS = ("dlm_fc", "dlm_attention", "tlm_fc", "tlm_attention")
DEVICES = ("gpu", "pim")
ISSUE_RULES = tuple(k.value for k in IssueRule)
CAPACITY_RULES = tuple(k.value for k in CapacityRule)
SYSTEM_KEYS = ("hardware", "decoding", "stop", "verify", "eager", "mapping", "static_mapping",
               "manager_hardware", "capacity_rule", "capacity_slack", "issue_rule", "tau_table",
               "pass_aware")


@dataclass(frozen=True)
class SystemSpec:
    name: str
    hardware: str                     # configs/hardware/<name>.yaml (the cost model's system)
    decoding: Decoding
    stop: str | None                  # stop rule name (the rules' registry, registry.py)
    verify: Verify | None
    eager: bool
    mapping: MappingKind
    static_mapping: dict[str, str] | None
    manager_hardware: bool            # Manager latency (monitoring, decision) is charged
    capacity_rule: CapacityRule | None = None   # shared_pool: how the TLM pass capacity is chosen
    capacity_slack: float | None = None   # capacity_rule fc_slack: FC time within 1 + slack
    issue_rule: IssueRule | None = None   # eager: when a pass below capacity may start
    tau_table: bool = False           # SADDLE+: tau per load (configs/tau/plus/<pair>.yaml)
    pass_aware: bool = False          # SADDLE+: DLM FC threshold while a pass runs (offline.py)

    @property
    def speculative(self) -> bool:
        return self.decoding is Decoding.SPECULATIVE


def choice(value: str, choices: Sequence[str], where: str) -> str:
    if value not in choices:
        raise ConfigError(f"{where}: expected one of {list(choices)}, found {value!r}"
                          f"{suggest(value, choices)}")
    return value


def _kind(data: dict, key: str, kind: type[K], source: str) -> K:
    return kind(choice(get(data, key, str, source=source), [k.value for k in kind],
                       f"{source}: {key}"))


def load_system(name: str, *, configs: Configs = BASE) -> SystemSpec:
    path = config_path("systems", name)
    data, src = configs.yaml(path), str(path)
    check_keys(data, SYSTEM_KEYS, source=src)   # first: a typo is not reported as a missing key
    from sim.systems.registry import STOP_RULES

    def only(key: str, allowed: bool, why: str) -> None:
        if key in data and not allowed:
            raise ConfigError(f"{src}: {key}: {why}")

    decoding = _kind(data, "decoding", Decoding, src)
    speculative = decoding is Decoding.SPECULATIVE
    stop = get(data, "stop", str, source=src) if speculative else None
    if stop is not None and stop not in STOP_RULES:
        raise ConfigError(f"{src}: stop: expected one of {sorted(STOP_RULES)}, found {stop!r}")
    mapping = _kind(data, "mapping", MappingKind, src)
    static = get(data, "static_mapping", dict, source=src, default=None)
    if mapping != "specpim" or static is not None:
        if static is None:
            raise ConfigError(f"{src}: missing key 'static_mapping' (needed by mapping {mapping!r})")
        check_keys(static, OPERATORS, source=src, where="static_mapping")
        for op in OPERATORS:
            if get(static, op, str, source=src, prefix="static_mapping") not in DEVICES:
                raise ConfigError(f"{src}: static_mapping.{op}: expected gpu or pim, found "
                                  f"{static[op]!r}")
    verify = _kind(data, "verify", Verify, src) if speculative else None
    pooled = verify is Verify.SHARED_POOL
    eager = get(data, "eager", bool, source=src, default=False)
    only("eager", pooled or not eager, "the Eager Pool needs verify: shared_pool")
    only("mapping", pooled or mapping != "dynamic",
         "dynamic needs the Manager (verify: shared_pool)")
    for key, needed in (("capacity_rule", pooled), ("issue_rule", eager)):
        if needed:
            get(data, key, str, source=src)         # a missing key's error
    spec = SystemSpec(
        name=name, hardware=get(data, "hardware", str, source=src), decoding=decoding, stop=stop,
        verify=verify, eager=eager, mapping=mapping,
        static_mapping=dict(static) if static else None,
        manager_hardware=get(data, "manager_hardware", bool, source=src, default=False),
        tau_table=get(data, "tau_table", bool, source=src, default=False),
        pass_aware=get(data, "pass_aware", bool, source=src, default=False))
    only("tau_table", pooled or not spec.tau_table, "needs the Manager (verify: shared_pool)")
    only("pass_aware", spec.mapping == "dynamic" or not spec.pass_aware, "needs mapping: dynamic")
    # The choices a run may override, checked as a run's are (spec has none of its own yet).
    rule, slack = check_capacity(spec, get(data, "capacity_rule", str, source=src, default=None),
                                 get(data, "capacity_slack", float, source=src, default=None),
                                 f"{src}: ")
    issue_rule = check_issue_rule(get(data, "issue_rule", str, source=src, default=None), spec,
                                  f"{src}: issue_rule")
    return replace(spec, capacity_rule=rule, capacity_slack=slack, issue_rule=issue_rule)


def check_capacity(spec: SystemSpec, rule: str | None, slack: float | None, where: str
                   ) -> tuple[CapacityRule | None, float | None]:
    """The pass-capacity rule and, for ``fc_slack``, its slack: the given ones, else the
    system's. ``where`` is the prefix of the keys ``capacity_rule`` and ``capacity_slack``."""
    if spec.verify != "shared_pool":
        for name, value in (("capacity_rule", rule), ("capacity_slack", slack)):
            if value is not None:
                raise ConfigError(f"{where}{name}: only systems with verify: shared_pool have a "
                                  f"pass capacity, not {spec.name}; leave it out")
        return None, None
    kind = spec.capacity_rule if rule is None else CapacityRule(
        choice(rule, CAPACITY_RULES, where + "capacity_rule"))
    if kind is not CapacityRule.FC_SLACK:
        if slack is not None:
            raise ConfigError(f"{where}capacity_slack: only capacity_rule fc_slack has a "
                              f"slack ({spec.name}'s rule here is {kind!r})")
        return kind, None
    if slack is None:
        slack = spec.capacity_slack
        if slack is None:
            raise ConfigError(f"{where.rstrip('. :')}: missing key 'capacity_slack': capacity_rule "
                              f"fc_slack needs capacity_slack ({spec.name}'s config has none)")
    if not 0 <= slack <= 10:
        raise ConfigError(f"{where}capacity_slack: expected a number in [0, 10], found {slack!r}")
    return kind, slack


def check_issue_rule(rule: str | None, spec: SystemSpec, where: str) -> IssueRule | None:
    """The run's issue rule: the given one (on a system with an Eager Pool), else the system's.
    ``where`` names the key."""
    if rule is None:
        return spec.issue_rule
    if not spec.eager:
        raise ConfigError(f"{where}: system {spec.name} has no Eager Pool; drafting and "
                          "verification alternate (leave issue_rule out)")
    return IssueRule(choice(rule, ISSUE_RULES, where))
