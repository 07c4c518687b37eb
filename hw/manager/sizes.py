"""Shipped sizes of the Manager RTL blocks: ``configs/manager.yaml`` (shared with the model) and
``configs/hardware/manager_rtl.yaml`` (the softmax unit, the Shared Pool's selector)."""
from __future__ import annotations

from common.config import config_path, get, load_yaml
from common.errors import ConfigError
from sim.manager.softmax import SoftmaxParams


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


def full_size(block: str, stage_levels: int | None = None):
    """The named Manager block (``softmax``, ``controller``, ``shared_pool``, ``eager_pool``,
    ``scheduler``, ``manager``) at its shipped size; the Shared Pool's selector pipelined every
    ``stage_levels`` levels (None: the shipped selector)."""
    if stage_levels is None:
        stage_levels = selector_stage_levels()
    from sim.manager.config import ManagerConfig
    from sim.manager.formats import POOL_COUNT

    cfg = ManagerConfig.load()
    if block == "softmax":
        from hw.manager.softmax import Softmax
        return Softmax(softmax_params())
    if block == "controller":
        from hw.manager.controller import Controller
        return Controller(cfg.max_requests, softmax_params())
    if block == "shared_pool":
        from hw.manager.shared_pool import SharedPool
        return SharedPool(cfg.shared_entries, cfg.max_requests, cfg.aging_passes, stage_levels=stage_levels)
    if block == "eager_pool":
        from hw.manager.eager_pool import EagerPools
        return EagerPools(cfg.micro_batches, cfg.eager_entries, cfg.max_requests)
    if block == "scheduler":
        from hw.manager.scheduler import Scheduler
        return Scheduler(cfg.max_requests, POOL_COUNT.max_raw)
    if block == "manager":
        from hw.manager.manager import Manager
        return Manager.from_config(cfg, softmax_params(), selector_stage_levels=stage_levels)
    raise ValueError(f"unknown Manager block {block!r}")
