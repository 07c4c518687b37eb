"""Shared helpers of the trace tests: the hand-written tiny trace and the shipped traces (read
and summarised once per session)."""
from __future__ import annotations

import functools
from pathlib import Path

from traces.io import read_trace
from traces.synth import default_trace_path, pair_names

TINY = Path(__file__).parent / "data" / "tiny.jsonl"


@functools.cache
def shipped(pair: str):
    return read_trace(default_trace_path(pair))


@functools.cache
def shipped_stats(pair: str) -> dict:
    from traces.stats import trace_stats

    return trace_stats(*shipped(pair))


PAIRS = pair_names()
