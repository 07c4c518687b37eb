"""``ManagerConfig``: the Manager's parameters, read from ``configs/manager.yaml``."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from common.config import get
from common.errors import ConfigError
from common.paths import CONFIGS
from sim.config import BASE, Configs
from sim.manager.controller import ACCEPTANCE_BINS, TAU_BUCKETS
from sim.manager.formats import (
    AGE,
    MICROBATCH_ID,
    POOL_COUNT,
    POSITION,
    PROB_ONE,
    REQUEST_ID,
    TAU,
    THRESHOLD,
    quantize_prob,
)
from sim.manager.planner import PassCosts
from sim.manager.transactions import Device

DEFAULT_PATH = CONFIGS / "manager.yaml"

# Integer field -> (its key path in the YAML file, lowest, highest): the ranges of the formats
# the RTL is built with. Errors name the key path, so that they name what the user wrote.
_BOUNDS = {
    "max_requests": ("controller.max_requests", 1, REQUEST_ID.max_raw + 1),
    "max_draft_len": ("controller.max_draft_len", 1, POSITION.max_raw),
    "tau": ("controller.tau (raw UQ1.16)", 0, TAU.max_raw),
    "shared_entries": ("pools.shared_entries", 1, POOL_COUNT.max_raw),
    "eager_entries": ("pools.eager_entries", 0, POOL_COUNT.max_raw),
    "micro_batches": ("pools.micro_batches", 1, MICROBATCH_ID.max_raw + 1),
    "dlm_fc_threshold": ("scheduler.dlm_fc_threshold", 0, THRESHOLD.max_raw),
    "tlm_attention_threshold": ("scheduler.tlm_attention_threshold", 0, THRESHOLD.max_raw),
    "aging_passes": ("pools.aging_passes", 1, AGE.max_raw),
}


@dataclass(frozen=True)
class ManagerConfig:
    """Sizes, tau (raw UQ1.16) and thresholds have no defaults here: they come from
    ``configs/manager.yaml`` (``load``) or are given explicitly (tests, testbenches)."""
    max_requests: int
    max_draft_len: int
    tau: int
    shared_entries: int
    eager_entries: int               # total over all micro-batches
    micro_batches: int
    dlm_fc_threshold: int
    tlm_attention_threshold: int
    dynamic_mapping: bool = True     # the design; False is the SADDLE-s ablation
    static_dlm_fc: Device = Device.GPU
    static_tlm_attention: Device = Device.PIM
    aging_passes: int | None = None  # Shared Pool aging K (shared_pool.py); None: off, the paper's
    # The calibrated stop rule's table (raw UQ1.16, ACCEPTANCE_BINS entries; controller.py);
    # None: H multiplies the probabilities themselves (SADDLE's rule)
    acceptance_table: tuple[int, ...] | None = None
    # SADDLE+ (all None in SADDLE): the Controller's tau per load (raw UQ1.16, TAU_BUCKETS
    # entries; controller.py), the Scheduler's DLM FC threshold while a pass runs
    # (scheduler.py), the pass planner's cost table (planner.py)
    tau_table: tuple[int, ...] | None = None
    dlm_fc_threshold_locked: int | None = None
    pass_costs: PassCosts | None = None

    def __post_init__(self):
        self.validate()

    def validate(self, source: str = "ManagerConfig") -> None:
        """Every value fits the formats the RTL is built with; ConfigError names the field."""
        _check(vars(self), source)

    def to_dict(self) -> dict:
        """The YAML shape of ``configs/manager.yaml`` (``from_dict`` reads it back exactly)."""
        return {
            "controller": {"max_requests": self.max_requests, "max_draft_len": self.max_draft_len,
                           "tau": self.tau / (1 << TAU.frac),
                           **({} if self.acceptance_table is None
                              else {"acceptance_table": list(self.acceptance_table)}),
                           **({} if self.tau_table is None else {"tau_table": list(self.tau_table)})},
            "pools": {"shared_entries": self.shared_entries, "eager_entries": self.eager_entries,
                      "micro_batches": self.micro_batches}
            | ({} if self.aging_passes is None else {"aging_passes": self.aging_passes}),
            "scheduler": {"dynamic": self.dynamic_mapping, "dlm_fc_threshold": self.dlm_fc_threshold,
                          "tlm_attention_threshold": self.tlm_attention_threshold,
                          "static": {"dlm_fc": self.static_dlm_fc.value,
                                     "tlm_attention": self.static_tlm_attention.value}}
            | ({} if self.dlm_fc_threshold_locked is None
               else {"dlm_fc_threshold_locked": self.dlm_fc_threshold_locked}),
        } | ({} if self.pass_costs is None else {"planner": dataclasses.asdict(self.pass_costs)})

    def replace(self, **changes) -> ManagerConfig:
        return dataclasses.replace(self, **changes)

    @classmethod
    def load(cls, path: str | Path | None = None, *, configs: Configs = BASE) -> ManagerConfig:
        path = Path(path) if path is not None else DEFAULT_PATH
        return cls.from_dict(configs.yaml(path), source=str(path))

    @classmethod
    def from_dict(cls, data: dict, source: str = "manager config") -> ManagerConfig:
        sections = {key: get(data, key, dict, source=source)
                    for key in ("controller", "pools", "scheduler")}
        sections["scheduler.static"] = get(sections["scheduler"], "static", dict, source=source,
                                           prefix="scheduler")

        def read(path: str, kind: type | tuple[type, ...] = int, **kw):
            prefix, key = path.rsplit(".", 1)
            return get(sections[prefix], key, kind, source=source, prefix=prefix, **kw)

        tau = read("controller.tau", float)
        if not 0.0 <= tau <= 1.0:
            raise ConfigError(f"{source}: controller.tau: expected a probability in [0, 1], "
                              f"found {tau!r}")
        values = {name: read(key) for name, (key, _, _) in _BOUNDS.items()
                  if name not in ("tau", "aging_passes")}
        table = sections["controller"].get("acceptance_table")
        taus = sections["controller"].get("tau_table")      # raw UQ1.16 integers
        planner = data.get("planner")
        values.update(tau=quantize_prob(tau), dynamic_mapping=read("scheduler.dynamic", bool),
                      aging_passes=read("pools.aging_passes", (int, type(None)), default=None),
                      acceptance_table=tuple(table) if isinstance(table, list) else table,
                      tau_table=tuple(taus) if isinstance(taus, list) else taus,
                      dlm_fc_threshold_locked=read("scheduler.dlm_fc_threshold_locked",
                                                   (int, type(None)), default=None),
                      pass_costs=None if planner is None else PassCosts(
                          **{**planner, "fc": tuple(planner.get("fc", ()))}))
        for key in ("dlm_fc", "tlm_attention"):
            value = read(f"scheduler.static.{key}", str)
            if value not in ("gpu", "pim"):
                raise ConfigError(f"{source}: scheduler.static.{key}: expected gpu or pim, "
                                  f"found {value!r}")
            values[f"static_{key}"] = Device(value)
        _check(values, source)
        return cls(**values)


def _check(values: dict, source: str) -> None:
    """``ManagerConfig.validate`` of the fields in ``values``."""
    for name, (key, low, high) in _BOUNDS.items():
        value = values[name]
        if name == "aging_passes" and value is None:      # aging off
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ConfigError(f"{source}: {key}: expected an integer in [{low}, {high}], "
                              f"found {value!r}")
    if values["eager_entries"] % values["micro_batches"]:
        raise ConfigError(f"{source}: pools.eager_entries: {values['eager_entries']} does not "
                          f"split evenly over {values['micro_batches']} micro-batches")
    table = values["acceptance_table"]
    if table is not None and (not isinstance(table, tuple) or len(table) != ACCEPTANCE_BINS
                              or not all(type(v) is int and 0 <= v <= PROB_ONE for v in table)):
        raise ConfigError(f"{source}: controller.acceptance_table (raw UQ1.16): expected "
                          f"{ACCEPTANCE_BINS} integers in [0, {PROB_ONE}], found {table!r}")
    taus = values.get("tau_table")
    if taus is not None and (not isinstance(taus, tuple) or len(taus) != TAU_BUCKETS
                             or not all(type(v) is int and 0 <= v <= TAU.max_raw for v in taus)):
        raise ConfigError(f"{source}: controller.tau_table (raw UQ1.16): expected {TAU_BUCKETS} "
                          f"integers in [0, {TAU.max_raw}], found {taus!r}")
    locked = values.get("dlm_fc_threshold_locked")
    if locked is not None and (type(locked) is not int or not 0 <= locked <= THRESHOLD.max_raw):
        raise ConfigError(f"{source}: scheduler.dlm_fc_threshold_locked: expected an integer in "
                          f"[0, {THRESHOLD.max_raw}], found {locked!r}")
    costs = values.get("pass_costs")
    if costs is not None:
        wrong = costs.check(values["shared_entries"]) if isinstance(costs, PassCosts) else "not a table"
        if wrong:
            raise ConfigError(f"{source}: planner: {wrong}")
    for name in ("static_dlm_fc", "static_tlm_attention"):
        if not isinstance(values[name], Device):
            raise ConfigError(f"{source}: scheduler.static.{name[7:]}: expected gpu or pim, "
                              f"found {values[name]!r}")
