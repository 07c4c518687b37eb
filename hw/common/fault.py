"""Elaboration-time faults for mutation testing (``saddle hw mutate``, hw/flow/mutate.py).

A block that can carry a fault lists the ones it implements in its class attribute ``FAULTS``
(name -> what the fault does) and takes ``fault`` (one name, or None for the shipped design) in
its constructor, checked against its own ``FAULTS`` and those of the sub-blocks it builds; it
hands a sub-block the fault only if the sub-block implements it (``fault_for``). With
``fault=None`` no block changes what it elaborates, so the shipped Verilog stays byte for byte
the same.
"""
from __future__ import annotations


def known_faults(*blocks) -> dict[str, str]:
    """Every fault of ``blocks`` (classes with a ``FAULTS`` dict), name -> description."""
    faults: dict[str, str] = {}
    for block in blocks:
        faults.update(block.FAULTS)
    return faults


def checked_fault(fault: str | None, *blocks) -> str | None:
    """``fault`` if it is None or implemented by one of ``blocks`` (the block and every
    sub-block it passes the fault to); a ValueError otherwise, so a typo never yields the
    shipped design under a mutant's name."""
    if fault is not None and fault not in known_faults(*blocks):
        names = ", ".join(sorted(known_faults(*blocks)))
        raise ValueError(f"unknown fault {fault!r}; known: {names}")
    return fault


def fault_for(fault: str | None, *blocks) -> str | None:
    """``fault`` if one of the classes ``blocks`` (a sub-block and those it builds) implements
    it, else None: the fault is elsewhere."""
    return fault if fault in known_faults(*blocks) else None
