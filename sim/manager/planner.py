"""The pass planner of SADDLE+ (off in SADDLE): how many tokens a verification takes and whether
it waits for another prediction step, from the pool's cumulative probabilities and a small table
of pass costs (``PassCosts``, measured offline from the cost model: sim/systems/offline.py).

Integers only. A token's value is the expected number of tokens its verification commits: given
its round's earlier tokens accepted (probability ``h_prev``, the H before it) it commits one, its
own or the TLM's correction; the round's stopping token (``last``) adds the TLM's bonus token
when it is accepted too (probability ``h``). In UQ.8: ``h_prev >> 8`` plus ``h >> 8`` if
``last``. A pass of k tokens over r requests costs ``fc[ceil(k / 16)] + r * per_request``
(units of 2**16 ps). In selection order (shared_pool.py) the prefix k has value E_k and cost T_k:

- **capacity** (``select``): the prefix with the highest E_k / T_k, a running argmax (replace the
  best when E_k * T_best > E_best * T_k) over the whole pool (without it: the first capacity-input
  tokens);
- **issue** (``issue``, when the pool holds fewer tokens than the capacity input and the TLM is
  idle): wait iff E * T' < (E + G) * T, i.e. another prediction step would raise the expected
  tokens per unit of pass cost, where G = the sum of h >> 8 over the drafting
  requests (the value of their next tokens) and T' = the cost with those tokens (requests with
  no token in the pool counted as new); never more than ``wait_bound`` consecutive waits.
"""
from __future__ import annotations

from dataclasses import dataclass

from sim.manager.shared_pool import PoolEntry

COST_BUCKET = 16        # tokens per entry of the FC cost table
COST_MAX = (1 << 22) - 1   # COST format: 22-bit unsigned, units of 2**16 ps


@dataclass(frozen=True)
class PassCosts:
    fc: tuple[int, ...]     # fc[i]: a pass of up to 16 i tokens (TLM FC, all-reduces, launch)
    per_request: int        # each request in the pass (attention over its KV cache)
    wait_bound: int         # the most consecutive waits while the TLM is idle
    select: bool = True     # capacity by the argmax (else the capacity input)
    issue: bool = True      # issue by the wait comparison (else whenever the TLM is idle)

    def check(self, entries: int) -> str | None:
        """What is wrong with the table for a pool of ``entries`` (None: nothing)."""
        if len(self.fc) != -(-entries // COST_BUCKET) + 1:
            return f"fc: expected {-(-entries // COST_BUCKET) + 1} entries, found {len(self.fc)}"
        values = (*self.fc, self.per_request)
        if not all(type(v) is int and 0 <= v <= COST_MAX for v in values):
            return f"costs: expected integers in [0, {COST_MAX}]"
        if not 0 <= self.wait_bound <= 255:
            return f"wait_bound: expected an integer in [0, 255], found {self.wait_bound!r}"
        return None

    def cost(self, tokens: int, requests: int) -> int:
        return self.fc[-(-tokens // COST_BUCKET)] + requests * self.per_request


def best_prefix(order: list[PoolEntry], limit: int, costs: PassCosts) -> tuple[int, int, int, int]:
    """(k, E_k, T_k, requests) of the pass over the first tokens of ``order`` (selection
    order): the argmax of E_k / T_k over 1 <= k <= ``limit`` (the first of ties) with
    ``costs.select``, else k = min(limit, len(order))."""
    seen: set[int] = set()
    select = costs.select
    value = k = best_k = best_value = best_requests = 0
    best_t = 1
    for entry in order[:limit]:
        k += 1
        seen.add(entry.request)
        value += (entry.h_prev >> 8) + (entry.h >> 8 if entry.last else 0)
        t = costs.cost(k, len(seen))
        if k == 1 or not select or value * best_t > best_value * t:
            best_k, best_value, best_t, best_requests = k, value, t, len(seen)
    return best_k, best_value, best_t, best_requests


def should_wait(best: tuple[int, int, int, int], drafting: list[tuple[int, bool]],
                costs: PassCosts) -> bool:
    """Whether a pass of ``best`` (``best_prefix``) waits for another prediction step;
    ``drafting``: (h, has tokens in the pool) of every drafting request."""
    k, value, t, requests = best
    if not drafting:
        return False
    new = sum(1 for _, pooled in drafting if not pooled)
    gain = sum(h >> 8 for h, _ in drafting)
    later = costs.cost(min(k + len(drafting), COST_BUCKET * (len(costs.fc) - 1)), requests + new)
    return value * later < (value + gain) * t
