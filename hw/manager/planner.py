"""Planner: SADDLE+'s pass planner (the model's ``sim.manager.planner``), fed by the Shared
Pool's selector one entry per cycle in selection order.

A token's value is ``(h_prev >> 8) + (last ? h >> 8 : 0)``; the prefix of k tokens over r
requests has value E_k (an accumulator) and cost T_k = ``fc[ceil(k / 16)] + r * per_request``
(r and ``r * per_request`` are accumulated: a request counts when its first token of the walk
arrives, a 128-bit ``seen`` register). The best prefix is a running argmax by
cross-multiplication: prefix k replaces the best iff k = 1, or ``select`` is low, or
E_k * T_best > E_best * T_k (two multipliers, no divider). Then the wait comparison of
``should_wait``: with D drafting requests (``drafting``), ``new`` of them holding no token
(``holding``), G = ``gain`` (the Controller's incremental sum of their H >> 8) and
T' = ``fc[min(ceil((k + D) / 16), len(fc) - 1)] + (r + new) * per_request``: wait iff D > 0 and
E * T' < (E + G) * T, and fewer than ``wait_bound`` waits since the last ``issued``.

Interface (``lib.wiring`` Component; plain signals):

- configuration, held stable: ``fc`` (``fc_entries`` costs of ``COST_BITS``, entry i in bits
  [22 i, 22 i + 22)), ``per_request``, ``wait_bound``, ``select``.
- ``start``: clear the walk (k, E, r, the requests seen, the best prefix).
- ``valid`` with ``req``, ``h``, ``h_prev``, ``last``: the next entry of the walk.
- ``drafting``, ``holding`` (one bit per request), ``gain``: the wait comparison's inputs,
  stable from a cycle before the walk's end to the decision (their counts are registered).
- ``waited`` (the Manager answered a wait: one more), ``issued`` (a pass issued: none).
- ``best_k`` (the best prefix's length) and ``wait``: final ``LATENCY`` cycles after the cycle of
  the walk's last entry (from registers).

Structure: the four wide products (value x cost) are ``Multiplier`` submodules of one size, so
synthesis maps that module once.

Cycle behaviour: an entry in cycle c is accumulated into registers at its clock edge (E_k, k, r,
T_k: the seen-bit test, the cost table read at ``k >> 4`` + 1 and two adders), compared with
the best in c + 1 (two multipliers and a comparator, then the best registers); c + 2 reads the
cost table for T' and adds E + G, c + 3 multiplies and compares into ``wait``.

``fault``: one of ``FAULTS``, for mutation testing (hw/common/fault.py); None in the shipped design.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.common.fault import checked_fault
from hw.common.multiplier import Multiplier
from hw.common.popcount import popcount
from hw.common.read_mux import read
from hw.manager.controller import GAIN_SHIFT, gain_max
from sim.manager.formats import AGE, CUM_PROB, PROB_ONE, REQUEST_ID
from sim.manager.planner import COST_BUCKET, COST_MAX

COST_BITS = COST_MAX.bit_length()
LATENCY = 4         # cycles from a walk's last entry to a final ``wait``
VALUE_MAX = 2 * (PROB_ONE >> GAIN_SHIFT)    # h_prev >> 8 plus the bonus h >> 8


def fc_entries(entries: int) -> int:
    """Entries of the FC cost table for a Shared Pool of ``entries``: ceil(entries / 16) + 1."""
    return -(-entries // COST_BUCKET) + 1


class Planner(wiring.Component):
    FAULTS = {
        "planner_argmax_reversed": "planner: a prefix replaces the best when E_k * T_best < E_best * T_k "
                                   "(the model: >)",
        "planner_value_without_bonus": "planner: the accumulator leaves out the bonus term h >> 8 of a round's "
                                       "last token",
        "planner_requests_per_token": "planner: every token of the walk counts as a new request in the cost",
        "planner_wait_bound_le": "planner: a wait is allowed while the waits since the last pass are <= "
                                 "wait_bound (the model: <)",
        "planner_waits_not_reset": "planner: an issued pass does not reset the count of consecutive waits",
        "planner_later_without_new": "planner: the cost after one more step leaves out the drafting requests "
                                     "that hold no token",
    }

    def __init__(self, entries: int, requests: int, *, fault: str | None = None):
        self.entries, self.requests = entries, requests
        self.fc_entries = fc_entries(entries)
        self.fault = checked_fault(fault, Planner)
        self.value_bits = (VALUE_MAX * entries).bit_length()
        self.sum_bits = (VALUE_MAX * entries + gain_max(requests)).bit_length()    # E + G
        self.cost_bits = (COST_MAX * (requests + 1)).bit_length()
        super().__init__({
            "fc": In(self.fc_entries * COST_BITS), "per_request": In(COST_BITS), "wait_bound": In(AGE.bits),
            "select": In(1),
            "start": In(1), "valid": In(1), "req": In(REQUEST_ID.bits), "h": In(CUM_PROB.bits),
            "h_prev": In(CUM_PROB.bits), "last": In(1),
            "drafting": In(requests), "holding": In(requests), "gain": In(range(gain_max(requests) + 1)),
            "waited": In(1), "issued": In(1),
            "best_k": Out(range(entries + 1)), "wait": Out(1),
        })

    def _cost(self, m, index, name: str):
        """``fc[index]`` (an index past the table reads its last entry)."""
        words = [self.fc[i * COST_BITS:(i + 1) * COST_BITS] for i in range(self.fc_entries)]
        value = Signal(COST_BITS, name=name)
        m.d.comb += value.eq(read(words, index))
        return value

    def _product(self, m, name: str, a, b):
        """``a`` x ``b`` by the submodule ``name``: a value (E or E + G) times a cost."""
        m.submodules[name] = mul = Multiplier(self.sum_bits, self.cost_bits)
        m.d.comb += [mul.a.eq(a), mul.b.eq(b)]
        return mul.product

    def elaborate(self, platform):
        m = Module()
        fault = self.fault
        k_shape, r_shape = range(self.entries + 1), range(self.requests + 1)
        # The walk's accumulators: the prefix of k entries (the candidate, valid in ``cand``).
        k, value, requests = Signal(k_shape), Signal(self.value_bits), Signal(r_shape)
        per_requests = Signal(self.cost_bits)       # requests * per_request
        cost = Signal(self.cost_bits)
        cand = Signal()
        seen = Signal(self.requests)
        best_k, best_value, best_cost = Signal(k_shape), Signal(self.value_bits), Signal(self.cost_bits, init=1)
        best_requests = Signal(r_shape)

        # Accumulate the entry of this cycle.
        bit = Signal(self.requests)
        new = Signal()
        term = Signal(range(VALUE_MAX + 1))
        bonus = 0 if fault == "planner_value_without_bonus" else Mux(self.last, self.h >> GAIN_SHIFT, 0)
        m.d.comb += [bit.eq(Cat(self.req == i for i in range(self.requests))),
                     new.eq(1 if fault == "planner_requests_per_token" else ~(seen & bit).any()),
                     term.eq((self.h_prev >> GAIN_SHIFT) + bonus)]
        added = Signal(self.cost_bits)
        m.d.comb += added.eq(per_requests + Mux(new, self.per_request, 0))
        m.d.sync += cand.eq(self.valid & ~self.start)
        with m.If(self.start):
            m.d.sync += [k.eq(0), value.eq(0), requests.eq(0), per_requests.eq(0), seen.eq(0)]
        with m.Elif(self.valid):
            # ceil((k + 1) / 16) = (k >> 4) + 1
            m.d.sync += [k.eq(k + 1), value.eq(value + term), requests.eq(requests + new),
                         per_requests.eq(added), seen.eq(seen | bit),
                         cost.eq(self._cost(m, (k >> 4) + 1, "cost_fc") + added)]

        # The running argmax: compare the candidate with the best.
        ahead, behind = self._product(m, "ahead", value, best_cost), self._product(m, "behind", best_value, cost)
        better = ahead < behind if fault == "planner_argmax_reversed" else ahead > behind
        with m.If(self.start):
            m.d.sync += [best_k.eq(0), best_value.eq(0), best_cost.eq(1), best_requests.eq(0)]
        with m.Elif(cand & ((k == 1) | ~self.select | better)):
            m.d.sync += [best_k.eq(k), best_value.eq(value), best_cost.eq(cost), best_requests.eq(requests)]
        m.d.comb += self.best_k.eq(best_k)

        # The wait comparison, two cycles on the best prefix.
        # The counts of drafting and new requests in registers (their inputs are stable from the
        # Issue's accept on), so that the pools' counters do not reach the cost multiplier.
        idle = Signal(self.requests)
        m.d.comb += idle.eq(self.drafting & ~self.holding)
        drafting_n, new_n = Signal(range(self.requests + 1)), Signal(range(self.requests + 1))
        m.d.sync += [drafting_n.eq(popcount(m, self.drafting, "drafting_pop")),
                     new_n.eq(0 if fault == "planner_later_without_new" else popcount(m, idle, "new_pop"))]
        bucket = Signal(range(self.fc_entries))
        tokens = Signal(range(self.entries + self.requests + COST_BUCKET))
        m.d.comb += [tokens.eq(best_k + drafting_n + COST_BUCKET - 1),
                     bucket.eq(Mux(tokens >> 4 >= self.fc_entries - 1, self.fc_entries - 1, tokens >> 4))]
        later, gained, any_drafting = Signal(self.cost_bits), Signal(self.sum_bits), Signal()
        m.d.sync += [later.eq(self._cost(m, bucket, "cost_later") + (best_requests + new_n) * self.per_request),
                     gained.eq(best_value + self.gain), any_drafting.eq(self.drafting.any())]
        now, wait_more = self._product(m, "now", best_value, later), self._product(m, "wait_more", gained, best_cost)
        waits = Signal(AGE.bits)
        room = waits <= self.wait_bound if fault == "planner_wait_bound_le" else waits < self.wait_bound
        m.d.sync += self.wait.eq(any_drafting & (now < wait_more) & room)
        with m.If(0 if fault == "planner_waits_not_reset" else self.issued):
            m.d.sync += waits.eq(0)
        with m.Elif(self.waited):
            m.d.sync += waits.eq(waits + 1)
        return m
