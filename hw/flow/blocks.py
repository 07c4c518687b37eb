"""Every RTL block that `saddle hw export` and `saddle hw synth` know, by name.

Each entry maps a block name to a zero-argument factory returning the ``wiring.Component`` at
its shipped (full) size. Tests build smaller instances from the classes directly.
Factories import lazily so that listing the blocks does not elaborate anything.
"""
from __future__ import annotations

from collections.abc import Callable


def _bank_pe():
    from hw.pe.bank_pe import BankPE
    from hw.pe.reference import load_params

    return BankPE(lanes=load_params().lanes)


def _fp16_mul():
    from hw.pe.fp16_mul import FP16Mul

    return FP16Mul()


def _fixed_to_fp32():
    from hw.pe.fixed_to_fp32 import FixedToFP32
    from hw.pe.reference import ACC_BITS, FRAC_BITS

    return FixedToFP32(ACC_BITS, FRAC_BITS)


def _fp16_round():
    from hw.pe.fp16_round import FP32ToFP16

    return FP32ToFP16()


def full_size(block: str, stage_levels: int | None = None, storage: str | None = None, plus: bool = False):
    """The named Manager block (``softmax``, ``controller``, ``shared_pool``, ``eager_pool``,
    ``scheduler``, ``manager``) at its shipped size; the Shared Pool's selector pipelined every
    ``stage_levels`` levels and the pools' ``storage`` (None: the shipped ones); the Manager
    with SADDLE+ (``plus``)."""
    from hw.manager.sizes import pool_storage, selector_stage_levels, softmax_params
    from sim.manager.config import ManagerConfig
    from sim.manager.formats import POOL_COUNT

    if stage_levels is None:
        stage_levels = selector_stage_levels()
    storage = storage or pool_storage()
    cfg = ManagerConfig.load()
    if block == "softmax":
        from hw.manager.softmax import Softmax
        return Softmax(softmax_params())
    if block == "controller":
        from hw.manager.controller import Controller
        return Controller(cfg.max_requests, softmax_params())
    if block == "shared_pool":
        from hw.manager.shared_pool import SharedPool
        return SharedPool(cfg.shared_entries, cfg.max_requests, cfg.aging_passes, stage_levels=stage_levels,
                          storage=storage)
    if block == "eager_pool":
        from hw.manager.eager_pool import EagerPools
        return EagerPools(cfg.micro_batches, cfg.eager_entries, cfg.max_requests, storage=storage)
    if block == "scheduler":
        from hw.manager.scheduler import Scheduler
        return Scheduler(cfg.max_requests, POOL_COUNT.max_raw)
    if block == "manager":
        from hw.manager.manager import Manager
        return Manager.from_config(cfg, softmax_params(), selector_stage_levels=stage_levels, storage=storage,
                                   plus=plus)
    raise ValueError(f"unknown Manager block {block!r}")


def _manager(block: str, storage: str | None = None, plus: bool = False) -> Callable[[], object]:
    def factory():
        return full_size(block, storage=storage, plus=plus)
    return factory


BLOCKS: dict[str, Callable[[], object]] = {
    "bank_pe": _bank_pe,
    "fp16_mul": _fp16_mul,
    "fixed_to_fp32": _fixed_to_fp32,
    "fp16_round": _fp16_round,
    "softmax": _manager("softmax"),
    "controller": _manager("controller"),
    "shared_pool": _manager("shared_pool"),
    "eager_pool": _manager("eager_pool"),
    "scheduler": _manager("scheduler"),
    "manager": _manager("manager"),
    # The pools' token records in SRAM macros (hw/manager/sram.py), for the area and timing tables.
    "manager_sram": _manager("manager", "sram"),
    # SADDLE+ (hw/manager/planner.py and the plus option of the blocks), for its area and timing.
    "manager_plus": _manager("manager", plus=True),
}
