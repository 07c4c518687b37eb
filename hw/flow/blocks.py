"""Every RTL block that `saddle hw export` and `saddle hw synth` know, by name.

Each entry maps a block name to a zero-argument factory returning the ``wiring.Component`` at
its shipped (full) size. Tests build smaller instances from the classes directly.
Factories import lazily so that listing the blocks does not elaborate anything.
"""
from __future__ import annotations

from collections.abc import Callable


def _bank_pe():
    from hw.pe.bank_pe import BankPE
    from sim.pe_ref import load_params

    return BankPE(lanes=load_params().lanes)


def _fp16_mul():
    from hw.pe.fp16_mul import FP16Mul

    return FP16Mul()


def _fp32_add():
    from hw.pe.fp32_add import FP32Add

    return FP32Add()


def _fp16_round():
    from hw.pe.fp16_round import FP32ToFP16

    return FP32ToFP16()


def _manager(block: str) -> Callable[[], object]:
    def factory():
        from hw.manager.sizes import full_size

        return full_size(block)
    return factory


BLOCKS: dict[str, Callable[[], object]] = {
    "bank_pe": _bank_pe,
    "fp16_mul": _fp16_mul,
    "fp32_add": _fp32_add,
    "fp16_round": _fp16_round,
    "softmax": _manager("softmax"),
    "controller": _manager("controller"),
    "shared_pool": _manager("shared_pool"),
    "eager_pool": _manager("eager_pool"),
    "scheduler": _manager("scheduler"),
    "manager": _manager("manager"),
}
