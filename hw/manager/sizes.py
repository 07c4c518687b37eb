"""Shipped sizes of the Manager RTL blocks: ``configs/manager.yaml`` (shared with the model) and
``configs/hardware/manager_rtl.yaml`` (the softmax unit, the Shared Pool's selector, the pools'
storage).

Only configuration reading: the blocks import this module, never the other way round (the
blocks at their shipped size are built by ``hw.flow.blocks.full_size``)."""
from __future__ import annotations

from common.config import config_path, get, load_yaml
from common.errors import ConfigError
from sim.manager.softmax import SoftmaxParams

# Where the pools keep their token records: flip-flops (every field in the entries) or an SRAM
# macro model for the fields no cycle compares (hw/manager/sram.py, shared_pool.py, eager_pool.py).
STORAGES = ("ff", "sram")


def softmax_params() -> SoftmaxParams:
    path = config_path("hardware", "manager_rtl")
    sec = get(load_yaml(path), "softmax", dict, source=path)
    size = {k: get(sec, k, int, source=path, prefix="softmax", positive=True)
            for k in ("lanes", "vocab", "exp_frac_bits")}
    return SoftmaxParams(**size)


def selector_stage_levels() -> int:
    """Tree levels between the Shared Pool selector's registers (0: combinational)."""
    path = config_path("hardware", "manager_rtl")
    sec = get(load_yaml(path), "shared_pool", dict, source=path)
    levels = get(sec, "selector_stage_levels", int, source=path, prefix="shared_pool")
    if levels < 0:
        raise ConfigError(f"{path}: shared_pool.selector_stage_levels: expected >= 0 (0 = combinational), "
                          f"found {levels}")
    return levels


def pool_storage() -> str:
    """Where the pools keep their token records: ``ff`` or ``sram`` (hw/manager/sram.py)."""
    path = config_path("hardware", "manager_rtl")
    sec = get(load_yaml(path), "pools", dict, source=path)
    storage = get(sec, "storage", str, source=path, prefix="pools")
    if storage not in STORAGES:
        raise ConfigError(f"{path}: pools.storage: expected one of {', '.join(STORAGES)}, found {storage!r}")
    return storage
