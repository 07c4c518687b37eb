"""``ManagerConfig``: the Manager's parameters, read from ``configs/manager.yaml``."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from common.config import get
from common.errors import ConfigError
from common.paths import CONFIGS
from sim.config import BASE, Configs
from sim.manager.controller import ACCEPTANCE_BINS
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
from sim.manager.transactions import Device

DEFAULT_PATH = CONFIGS / "manager.yaml"

# Field -> key path in the YAML file, so that validation errors name what the user wrote.
_KEYS = {
    "max_requests": "controller.max_requests", "max_draft_len": "controller.max_draft_len",
    "tau": "controller.tau (raw UQ1.16)", "shared_entries": "pools.shared_entries",
    "eager_entries": "pools.eager_entries", "micro_batches": "pools.micro_batches",
    "dlm_fc_threshold": "scheduler.dlm_fc_threshold",
    "tlm_attention_threshold": "scheduler.tlm_attention_threshold",
    "aging_passes": "pools.aging_passes",
    "static_dlm_fc": "scheduler.static.dlm_fc", "static_tlm_attention": "scheduler.static.tlm_attention",
    "acceptance_table": "controller.acceptance_table (raw UQ1.16)",
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

    def __post_init__(self):
        self.validate()

    def validate(self, source: str = "ManagerConfig") -> None:
        """Every value fits the formats the RTL is built with; ConfigError names the field."""
        def bounded(name, low, high):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ConfigError(f"{source}: {_KEYS[name]}: expected an integer in [{low}, {high}], found {value!r}")

        bounded("max_requests", 1, REQUEST_ID.max_raw + 1)
        bounded("max_draft_len", 1, POSITION.max_raw)
        bounded("tau", 0, TAU.max_raw)
        bounded("shared_entries", 1, POOL_COUNT.max_raw)
        bounded("eager_entries", 0, POOL_COUNT.max_raw)
        bounded("micro_batches", 1, MICROBATCH_ID.max_raw + 1)
        bounded("dlm_fc_threshold", 0, THRESHOLD.max_raw)
        bounded("tlm_attention_threshold", 0, THRESHOLD.max_raw)
        if self.aging_passes is not None:
            bounded("aging_passes", 1, AGE.max_raw)
        if self.eager_entries % self.micro_batches:
            raise ConfigError(f"{source}: pools.eager_entries: {self.eager_entries} does not split evenly "
                              f"over {self.micro_batches} micro-batches")
        table = self.acceptance_table
        if table is not None and (not isinstance(table, tuple) or len(table) != ACCEPTANCE_BINS or not all(
                type(v) is int and 0 <= v <= PROB_ONE for v in table)):
            raise ConfigError(f"{source}: {_KEYS['acceptance_table']}: expected {ACCEPTANCE_BINS} integers "
                              f"in [0, {PROB_ONE}], found {table!r}")
        for name in ("static_dlm_fc", "static_tlm_attention"):
            if not isinstance(getattr(self, name), Device):
                raise ConfigError(f"{source}: {_KEYS[name]}: expected gpu or pim, found {getattr(self, name)!r}")

    def to_dict(self) -> dict:
        """The YAML shape of ``configs/manager.yaml`` (``from_dict`` reads it back exactly)."""
        return {
            "controller": {"max_requests": self.max_requests, "max_draft_len": self.max_draft_len,
                           "tau": self.tau / (1 << TAU.frac),
                           **({} if self.acceptance_table is None
                              else {"acceptance_table": list(self.acceptance_table)})},
            "pools": {"shared_entries": self.shared_entries, "eager_entries": self.eager_entries,
                      "micro_batches": self.micro_batches}
            | ({} if self.aging_passes is None else {"aging_passes": self.aging_passes}),
            "scheduler": {"dynamic": self.dynamic_mapping, "dlm_fc_threshold": self.dlm_fc_threshold,
                          "tlm_attention_threshold": self.tlm_attention_threshold,
                          "static": {"dlm_fc": self.static_dlm_fc.value,
                                     "tlm_attention": self.static_tlm_attention.value}},
        }

    def replace(self, **changes) -> ManagerConfig:
        return dataclasses.replace(self, **changes)

    @classmethod
    def load(cls, path: str | Path | None = None, *, configs: Configs = BASE) -> ManagerConfig:
        path = Path(path) if path is not None else DEFAULT_PATH
        return cls.from_dict(configs.yaml(path), source=str(path))

    @classmethod
    def from_dict(cls, data: dict, source: str = "manager config") -> ManagerConfig:
        ctl = get(data, "controller", dict, source=source)
        pools = get(data, "pools", dict, source=source)
        sched = get(data, "scheduler", dict, source=source)
        static = get(sched, "static", dict, source=source, prefix="scheduler")
        tau = get(ctl, "tau", float, source=source, prefix="controller")
        if not 0.0 <= tau <= 1.0:
            raise ConfigError(f"{source}: controller.tau: expected a probability in [0, 1], found {tau!r}")

        def device(key):
            value = get(static, key, str, source=source, prefix="scheduler.static")
            try:
                return Device(value)
            except ValueError:
                raise ConfigError(f"{source}: scheduler.static.{key}: expected gpu or pim, found {value!r}") from None

        def ints(section: dict, prefix: str, *keys: str) -> dict:
            return {key: get(section, key, int, source=source, prefix=prefix) for key in keys}

        config = cls.__new__(cls)
        values = dict(
            **ints(ctl, "controller", "max_requests", "max_draft_len"),
            tau=quantize_prob(tau),
            **ints(pools, "pools", "shared_entries", "eager_entries", "micro_batches"),
            aging_passes=get(pools, "aging_passes", (int, type(None)), source=source, prefix="pools",
                             default=None),
            dynamic_mapping=get(sched, "dynamic", bool, source=source, prefix="scheduler"),
            **ints(sched, "scheduler", "dlm_fc_threshold", "tlm_attention_threshold"),
            static_dlm_fc=device("dlm_fc"),
            static_tlm_attention=device("tlm_attention"),
            acceptance_table=(tuple(ctl["acceptance_table"]) if isinstance(ctl.get("acceptance_table"), list)
                              else ctl.get("acceptance_table")),
        )
        for key, value in values.items():
            object.__setattr__(config, key, value)
        config.validate(source)
        return config
