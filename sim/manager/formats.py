"""Every fixed-point and integer format of the SADDLE Manager, defined once: the model computes
with their raw integers and the RTL (hw/) sizes its signals from the same objects. Floats appear
only in ``to_float`` / ``from_float`` / ``quantize_prob``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Final


@dataclass(frozen=True)
class FixedFormat:
    """A two's-complement or unsigned fixed-point number ``raw / 2**frac``, ``bits`` wide (sign
    bit included); integer formats (request ids, counts) have ``frac = 0``."""

    name: str
    bits: int
    frac: int
    signed: bool = False

    def __post_init__(self):
        if self.bits < 1 or not 0 <= self.frac <= self.bits:
            raise ValueError(f"format {self.name}: invalid bits={self.bits} frac={self.frac}")

    @cached_property
    def min_raw(self) -> int:
        return -(1 << (self.bits - 1)) if self.signed else 0

    @cached_property
    def max_raw(self) -> int:
        return (1 << (self.bits - 1)) - 1 if self.signed else (1 << self.bits) - 1

    @property
    def q_name(self) -> str:
        """Q notation, e.g. ``UQ1.16`` (integer bits include the sign bit for signed formats)."""
        return f"{'Q' if self.signed else 'UQ'}{self.bits - self.frac}.{self.frac}"

    def check(self, raw: int, what: str) -> int:
        """``raw`` if representable (an int, not a bool), else ValueError naming ``what``."""
        if type(raw) is not int or not self.min_raw <= raw <= self.max_raw:
            raise ValueError(f"{what}: expected an integer in [{self.min_raw}, {self.max_raw}] "
                             f"({self.name}, {self.q_name}), found {raw!r}")
        return raw

    def to_float(self, raw: int) -> float:
        return self.check(raw, self.name) / (1 << self.frac)

    def from_float(self, x: float) -> int:
        """Round half up of ``x * 2**frac``, saturated to the format's range."""
        if math.isnan(x):
            raise ValueError(f"{self.name}: cannot represent NaN")
        if math.isinf(x):
            return self.max_raw if x > 0 else self.min_raw
        raw = math.floor(x * (1 << self.frac) + 0.5)
        return min(max(raw, self.min_raw), self.max_raw)


# Probability of a draft token, cumulative probability H and the threshold tau share one layout:
# UQ1.16, 1.0 = 65536. One integer bit is needed so that 1.0 itself is exact (p = 1 after a
# saturated softmax); raws above 65536 are never produced (quantize_prob clamps).
PROB = FixedFormat("prob", 17, 16)
CUM_PROB = FixedFormat("cum_prob", 17, 16)
TAU = FixedFormat("tau", 17, 16)
PROB_ONE: Final = 65536      # 1.0 in UQ1.16; a literal, so compiled code inlines it

TOKEN_ID = FixedFormat("token_id", 17, 0)           # the 128256 tokens of Llama-3 (OPT: 50272)
REQUEST_ID = FixedFormat("request_id", 7, 0)        # Controller slots: up to 128 requests
MICROBATCH_ID = FixedFormat("microbatch_id", 4, 0)  # one per SADDLE device (8 in the paper)
POSITION = FixedFormat("position", 6, 0)            # of a draft token in its round, 1-based
POOL_COUNT = FixedFormat("pool_count", 10, 0)       # pool occupancy, capacity of a verification
VERIFY_ID = FixedFormat("verify_id", 16, 0)         # verification number, wraps modulo 2**16
THRESHOLD = FixedFormat("threshold", 16, 0)         # Scheduler thresholds (units: scheduler.py)
# Aging K, the passes a Shared Pool token may be passed over before it is served first, and
# each entry's count of such passes (shared_pool.py).
AGE = FixedFormat("age", 8, 0)

# The DLM's entropy at a draft token, in nats, for the entropy stopping rule
# (sim/systems/registry.py): UQ4.12 covers ln(128256) = 11.8 (the largest vocabulary's uniform
# distribution) in steps of 1/4096.
ENTROPY = FixedFormat("entropy", 16, 12)
# DLM logits at the Controller's softmax unit (softmax.py): Q8.8, natural-log units, range
# [-128, 128) in steps of 1/256. Logits are shift-invariant, so the GPU may subtract any offset
# before quantizing; 1/256 of a logit is 0.4 % of a probability.
LOGIT = FixedFormat("logit", 16, 8, signed=True)

FORMATS = {f.name: f for f in (PROB, CUM_PROB, TAU, TOKEN_ID, REQUEST_ID, MICROBATCH_ID,
                               POSITION, POOL_COUNT, VERIFY_ID, THRESHOLD, AGE, ENTROPY, LOGIT)}


def quantize_prob(x: float) -> int:
    """A probability as raw UQ1.16: round half up of ``x * 65536``, clamped to [0, 65536]."""
    if 0.0 < x < 1.0:       # the common case first (NaN fails it); int() is the floor here
        return int(x * PROB_ONE + 0.5)
    if math.isnan(x):
        raise ValueError("quantize_prob: probability is NaN")
    return PROB_ONE if x >= 1.0 else 0
