"""``SystemSpec``: what a system is made of, read from ``configs/systems/NAME.yaml``. The
Manager's latency (``ManagerTiming``) lives in sim/manager/timing.py."""
from __future__ import annotations

from dataclasses import dataclass

from sim.config import check_keys, config_path, get, load_yaml
from sim.errors import ConfigError
from sim.manager.timing import ManagerTiming, load_manager_timing  # noqa: F401  (their old home)

DECODING = ("autoregressive", "speculative")
VERIFY = ("lockstep", "shared_pool")
MAPPING = ("static", "specpim", "dynamic")
OPERATORS = ("dlm_fc", "dlm_attention", "tlm_fc", "tlm_attention")
DEVICES = ("gpu", "pim")
# When a verification may start with fewer tokens than one pass holds (sim/systems/pooled.py).
ISSUE_RULES = ("gpu-idle", "tlm-idle", "drained")
# How many tokens one TLM pass verifies, "what the GPU can verify at once" (sim/systems/offline.py).
CAPACITY_RULES = ("ridge", "fc_slack", "pool")
SYSTEM_KEYS = ("hardware", "decoding", "stop", "verify", "eager", "mapping", "static_mapping",
               "manager_hardware", "capacity_rule", "capacity_slack", "issue_rule")


@dataclass(frozen=True)
class SystemSpec:
    name: str
    hardware: str                     # configs/hardware/<name>.yaml (the cost model's system)
    decoding: str
    stop: str | None                  # stop rule name (sim/systems/registry.py)
    verify: str | None
    eager: bool
    mapping: str
    static_mapping: dict[str, str] | None
    manager_hardware: bool            # Manager latency (monitoring, decision) is charged
    capacity_rule: str | None = None      # shared_pool: how the TLM pass capacity is chosen
    capacity_slack: float | None = None   # capacity_rule fc_slack: FC time within 1 + slack
    issue_rule: str | None = None         # eager: when a pass below capacity may start (ISSUE_RULES)

    @property
    def speculative(self) -> bool:
        return self.decoding == "speculative"


def _choice(data: dict, key: str, choices: tuple[str, ...], source: str, default=...) -> str:
    value = get(data, key, str, source=source, default=default)
    if value is not None and value not in choices:
        raise ConfigError(f"{source}: {key}: expected one of {list(choices)}, found {value!r}")
    return value


def load_system(name: str) -> SystemSpec:
    path = config_path("systems", name)
    data = load_yaml(path)
    src = str(path)
    check_keys(data, SYSTEM_KEYS, source=src)   # first: a typo is not reported as a missing key
    decoding = _choice(data, "decoding", DECODING, src)
    spec_keys = decoding == "speculative"
    from sim.systems.registry import STOP_RULES
    stop = get(data, "stop", str, source=src) if spec_keys else None
    if stop is not None and stop not in STOP_RULES:
        raise ConfigError(f"{src}: stop: expected one of {sorted(STOP_RULES)}, found {stop!r}")
    mapping = _choice(data, "mapping", MAPPING, src)
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
    verify = _choice(data, "verify", VERIFY, src) if spec_keys else None
    eager = get(data, "eager", bool, source=src, default=False)
    if eager and verify != "shared_pool":
        raise ConfigError(f"{src}: eager: the Eager Pool needs verify: shared_pool")
    if mapping == "dynamic" and verify != "shared_pool":
        raise ConfigError(f"{src}: mapping: dynamic needs the Manager (verify: shared_pool)")
    rule = slack = None
    if verify == "shared_pool":
        rule = _choice(data, "capacity_rule", CAPACITY_RULES, src)
        if rule == "fc_slack":
            slack = check_slack(get(data, "capacity_slack", float, source=src), f"{src}: capacity_slack")
        elif "capacity_slack" in data:
            raise ConfigError(f"{src}: capacity_slack: only capacity_rule fc_slack has a slack "
                              f"(capacity_rule is {rule!r})")
    else:
        for key in ("capacity_rule", "capacity_slack"):
            if key in data:
                raise ConfigError(f"{src}: {key}: only systems with verify: shared_pool have a pass capacity")
    issue_rule = None
    if eager:
        issue_rule = _choice(data, "issue_rule", ISSUE_RULES, src)
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


