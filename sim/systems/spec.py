"""``SystemSpec``: what a system is made of, read from ``configs/systems/NAME.yaml``. The
Manager's latency (``ManagerTiming``) lives in sim/manager/timing.py."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TypeVar

from common.config import check_keys, config_path, get
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


class CapacityRule(Kind):
    """How many tokens one TLM pass verifies (sim/systems/offline.py)."""
    RIDGE = "ridge"
    FC_SLACK = "fc_slack"
    POOL = "pool"


OPERATORS = ("dlm_fc", "dlm_attention", "tlm_fc", "tlm_attention")
DEVICES = ("gpu", "pim")
ISSUE_RULES = tuple(k.value for k in IssueRule)
CAPACITY_RULES = tuple(k.value for k in CapacityRule)
SYSTEM_KEYS = ("hardware", "decoding", "stop", "verify", "eager", "mapping", "static_mapping",
               "manager_hardware", "capacity_rule", "capacity_slack", "issue_rule")


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

    @property
    def speculative(self) -> bool:
        return self.decoding is Decoding.SPECULATIVE


def _choice(data: dict, key: str, kind: type[K], source: str) -> K:
    value = get(data, key, str, source=source)
    choices = [k.value for k in kind]
    if value not in choices:
        raise ConfigError(f"{source}: {key}: expected one of {choices}, found {value!r}")
    return kind(value)


def load_system(name: str, *, configs: Configs = BASE) -> SystemSpec:
    path = config_path("systems", name)
    data = configs.yaml(path)
    src = str(path)
    check_keys(data, SYSTEM_KEYS, source=src)   # first: a typo is not reported as a missing key
    decoding = _choice(data, "decoding", Decoding, src)
    spec_keys = decoding == "speculative"
    from sim.systems.registry import STOP_RULES
    stop = get(data, "stop", str, source=src) if spec_keys else None
    if stop is not None and stop not in STOP_RULES:
        raise ConfigError(f"{src}: stop: expected one of {sorted(STOP_RULES)}, found {stop!r}")
    mapping = _choice(data, "mapping", MappingKind, src)
    static = get(data, "static_mapping", dict, source=src, default=None)
    if mapping != "specpim" or static is not None:
        if static is None:
            raise ConfigError(f"{src}: missing key 'static_mapping' (needed by mapping {mapping!r})")
        for op in OPERATORS:
            dev = get(static, op, str, source=src, prefix="static_mapping")
            if dev not in DEVICES:
                raise ConfigError(f"{src}: static_mapping.{op}: expected gpu or pim, found {dev!r}")
        unknown = sorted(set(static) - set(OPERATORS))
        if unknown:
            raise ConfigError(f"{src}: static_mapping: unknown operator(s) {unknown}; expected {list(OPERATORS)}")
    verify = _choice(data, "verify", Verify, src) if spec_keys else None
    eager = get(data, "eager", bool, source=src, default=False)
    if eager and verify != "shared_pool":
        raise ConfigError(f"{src}: eager: the Eager Pool needs verify: shared_pool")
    if mapping == "dynamic" and verify != "shared_pool":
        raise ConfigError(f"{src}: mapping: dynamic needs the Manager (verify: shared_pool)")
    rule: CapacityRule | None = None
    slack: float | None = None
    if verify == "shared_pool":
        rule = _choice(data, "capacity_rule", CapacityRule, src)
        if rule == "fc_slack":
            slack = check_slack(get(data, "capacity_slack", float, source=src), f"{src}: capacity_slack")
        elif "capacity_slack" in data:
            raise ConfigError(f"{src}: capacity_slack: only capacity_rule fc_slack has a slack "
                              f"(capacity_rule is {rule!r})")
    else:
        for key in ("capacity_rule", "capacity_slack"):
            if key in data:
                raise ConfigError(f"{src}: {key}: only systems with verify: shared_pool have a pass capacity")
    issue_rule: IssueRule | None = None
    if eager:
        issue_rule = _choice(data, "issue_rule", IssueRule, src)
    elif "issue_rule" in data:
        raise ConfigError(f"{src}: issue_rule: only systems with an Eager Pool (eager: true) choose it; "
                          "without one, drafting and verification alternate")
    return SystemSpec(name=name, hardware=get(data, "hardware", str, source=src),
                      decoding=decoding, stop=stop, verify=verify, eager=eager, mapping=mapping,
                      static_mapping=dict(static) if static else None,
                      manager_hardware=get(data, "manager_hardware", bool, source=src, default=False),
                      capacity_rule=rule, capacity_slack=slack, issue_rule=issue_rule)


def check_slack(value: float, where: str) -> float:
    if not 0 <= value <= 10:
        raise ConfigError(f"{where}: expected a number in [0, 10], found {value!r}")
    return value


