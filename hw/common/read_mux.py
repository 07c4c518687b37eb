"""Small mux helpers that keep the exported Verilog lint-clean.

``read(values, index)`` is ``Array(values)[index]`` padded to every value the index can take
(the padding repeats the last value, unreachable in use), so the generated ``case`` covers its
index and Verilator's CASEINCOMPLETE stays quiet without a waiver.
"""
from __future__ import annotations

from amaranth.hdl import Array


def read(values, index):
    values = list(values)
    span = 1 << len(index)
    if len(values) > span:
        raise ValueError(f"{len(values)} values cannot be indexed by {len(index)} bits")
    return Array(values + [values[-1]] * (span - len(values)))[index]
