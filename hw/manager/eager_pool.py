"""Eager Pools: one per micro-batch, splitting ``entries`` evenly (the model's EagerPools).

Pool k owns entries [k * C, (k + 1) * C) with C = entries // pools. An entry (an
``EagerEntry``) holds valid, request, position, token id and H; the micro-batch is the region.
Per request the block keeps its count of eager tokens (``eager_n``), per pool its occupancy.

Interface (``lib.wiring`` Component, one command per cycle, each completes in its cycle):

- ``op`` with ``mb``, ``req``, ``pos``, ``token``, ``h``:
  ``INSERT`` writes the lowest free entry of pool ``mb`` (the caller checks ``room``);
  ``TAKE`` removes the entry of (``req``, ``pos``) (one token moved to the Shared Pool);
  ``DROP`` removes every entry of ``req`` in pool ``mb`` (discard on a rejection or retirement).
- ``room`` (pool ``room_mb`` has a free entry: a query of its own, so that it does not wait
  for the command's ``mb``), ``look_hit``/``look_token``/``look_h``: the entry of
  (``req``, ``pos``), combinational, by a match on request and position of every entry.
- ``q_req`` -> ``q_n``: the request's eager count; ``holding``: one bit per request with
  eager tokens (the drain walks it with a priority encoder in ascending request order).

Cycle cost: 1 cycle per insert, per moved token and per dropped request.

Storage (``storage``): ``"ff"`` keeps every field in the entries (above). ``"sram"`` keeps the
token and H of each entry in an ``Sram`` macro (hw/manager/sram.py, one word per entry) and in
the entries what TAKE's and DROP's matches compare: valid, request, position. Reads then take a
cycle: ``look`` (an input) reads the entry of (``req``, ``pos``) into ``look_token``/``look_h``,
valid from the next cycle and held until the next ``look``; ``look_hit`` is still the match of
this cycle. ``TAKE`` removes the entry the last ``look`` hit (registered), whatever ``pos`` is
now, so a walk looks up its next position while it takes the current one: one token per cycle
after the first look. INSERT writes the macro at the entry it fills; an INSERT never shares a
cycle with a ``look``, so one port suffices.

SADDLE+ (``plus``): ``h`` and ``look_h`` are {H, h_prev, last} (``plus_h_bits``), stored and
moved as one field, so a moved token keeps the planner's value (hw/manager/shared_pool.py).

Structure: every entry is its own submodule (see ``hw/manager/shared_pool.py``: synthesis maps the
entries one at a time).

``fault``: one of ``FAULTS``, for mutation testing (hw/common/fault.py); None in the shipped
design.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import enum, wiring
from amaranth.lib.wiring import In, Out

from hw.common.fault import checked_fault
from hw.common.priority_encoder import first_one_hot, one_hot_index
from hw.common.read_mux import read
from hw.manager.sizes import STORAGES
from hw.manager.sram import Sram
from sim.manager.formats import CUM_PROB, MICROBATCH_ID, POSITION, REQUEST_ID, TOKEN_ID

# The pool of the fault "eager_count_not_decremented" (the configurations `saddle hw mutate`
# runs have several micro-batches).
FAULTY_POOL = 1


def plus_h_bits(plus: bool) -> int:
    """Width of the ``h`` field: H, and with SADDLE+ also h_prev and last."""
    return CUM_PROB.bits + (CUM_PROB.bits + 1 if plus else 0)


class EagerOp(enum.Enum, shape=2):
    NOP = 0
    INSERT = 1
    TAKE = 2
    DROP = 3


class EagerEntry(wiring.Component):
    """One Eager Pool entry. ``write`` stores the fields; ``take`` removes it if it is the entry
    of (``req``, ``pos``) (``hit``), ``drop`` if it belongs to ``req`` (``req_match``); at most
    one of the three per cycle. ``free`` = not valid; ``token_out``, ``h_out``: the stored values.
    Without ``payload`` (the pools' SRAM holds token and H): no token and H ports, and ``take``
    removes the entry whatever ``hit`` says (the pools decode it from the last look's index)."""

    def __init__(self, payload: bool = True, h_bits: int = CUM_PROB.bits):
        self.has_payload, self.h_bits = payload, h_bits
        data_in = {"token": In(TOKEN_ID.bits), "h": In(h_bits)} if payload else {}
        data_out = {"token_out": Out(TOKEN_ID.bits), "h_out": Out(h_bits)} if payload else {}
        super().__init__({"write": In(1), "take": In(1), "drop": In(1),
                          "req": In(REQUEST_ID.bits), "pos": In(POSITION.bits), **data_in,
                          "free": Out(1), "req_match": Out(1), "hit": Out(1), **data_out})

    def elaborate(self, platform):
        m = Module()
        valid = Signal()
        req, pos = Signal(REQUEST_ID.bits), Signal(POSITION.bits)
        stored = [valid.eq(1), req.eq(self.req), pos.eq(self.pos)]
        m.d.comb += [self.free.eq(~valid), self.req_match.eq(valid & (req == self.req)),
                     self.hit.eq(self.req_match & (pos == self.pos))]
        taken = self.take
        if self.has_payload:
            token, h = Signal(TOKEN_ID.bits), Signal(self.h_bits)
            m.d.comb += [self.token_out.eq(token), self.h_out.eq(h)]
            stored += [token.eq(self.token), h.eq(self.h)]
            taken = self.take & self.hit
        with m.If(self.write):
            m.d.sync += stored
        with m.If(taken | (self.drop & self.req_match)):
            m.d.sync += valid.eq(0)
        return m


class EagerPools(wiring.Component):
    FAULTS = {"eager_count_not_decremented":
              f"eager pools: micro-batch {FAULTY_POOL}'s occupancy is not decremented by TAKE or DROP",
              "sram_take_by_match": "eager pools, SRAM storage: TAKE removes the entry of (req, pos), the position "
                                    "being looked up next, instead of the one looked up last"}

    def __init__(self, pools: int, entries: int, requests: int, *, storage: str = "ff", plus: bool = False,
                 fault: str | None = None):
        if pools < 1 or entries < pools or entries % pools or requests < 1:
            raise ValueError(f"EagerPools: {entries} entries do not split over {pools} pools")
        if storage not in STORAGES:
            raise ValueError(f"EagerPools: storage {storage!r}, expected one of {', '.join(STORAGES)}")
        self.storage = storage
        self.pools, self.entries, self.requests = pools, entries, requests
        self.fault = checked_fault(fault, EagerPools)
        self.per_pool = entries // pools
        self.h_bits = h_bits = plus_h_bits(plus)
        per_req = range(POSITION.max_raw + 1)
        super().__init__({
            "op": In(EagerOp),
            "mb": In(MICROBATCH_ID.bits), "req": In(REQUEST_ID.bits), "pos": In(POSITION.bits),
            "token": In(TOKEN_ID.bits), "h": In(h_bits),
            "room_mb": In(MICROBATCH_ID.bits), "room": Out(1),
            "look_hit": Out(1), "look_token": Out(TOKEN_ID.bits), "look_h": Out(h_bits),
            "q_req": In(REQUEST_ID.bits), "q_n": Out(per_req),
            "holding": Out(requests),
            **({"look": In(1)} if storage == "sram" else {}),
        })

    def elaborate(self, platform):
        m = Module()
        n, c = self.entries, self.per_pool
        sram = self.storage == "sram"
        pool = [EagerEntry(payload=not sram, h_bits=self.h_bits) for _ in range(n)]
        per_req = range(POSITION.max_raw + 1)
        eager_n = [Signal(per_req, name=f"r{r}_eager") for r in range(self.requests)]
        occupancy = [Signal(range(c + 1), name=f"pool{k}_count") for k in range(self.pools)]

        m.d.comb += [
            self.room.eq(read(occupancy, self.room_mb) < c),
            self.q_n.eq(read(eager_n, self.q_req)),
            self.holding.eq(Cat(e != 0 for e in eager_n)),
        ]
        hit = Signal(n)
        m.d.comb += hit.eq(Cat(e.hit for e in pool))
        hit_index = one_hot_index(m, hit, "hit")
        m.d.comb += self.look_hit.eq(hit.any())
        if not sram:
            m.d.comb += [self.look_token.eq(read([e.token_out for e in pool], hit_index)),
                         self.look_h.eq(read([e.h_out for e in pool], hit_index))]

        free = Signal(n)
        m.d.comb += free.eq(Cat(e.free for e in pool))
        free_one_hot = [first_one_hot(m, free[k * c:(k + 1) * c], f"pool{k}_free") for k in range(self.pools)]
        write = Signal(n)
        m.d.comb += write.eq(Cat(*(Mux(self.mb == k, free_one_hot[k], 0) for k in range(self.pools))))
        inserting = Signal()
        m.d.comb += inserting.eq(self.op == EagerOp.INSERT)
        if sram:
            # The entry the last look hit is the one TAKE removes; token and H in the macro.
            looked = Signal(range(n), name="looked_index")
            with m.If(self.look):
                m.d.sync += looked.eq(hit_index)
            m.submodules.sram = mem = Sram(n, TOKEN_ID.bits + self.h_bits)
            m.d.comb += [mem.addr.eq(Mux(inserting, one_hot_index(m, write, "write"), hit_index)),
                         mem.w_en.eq(inserting), mem.w_data.eq(Cat(self.token, self.h)), mem.r_en.eq(self.look),
                         self.look_token.eq(mem.r_data[:TOKEN_ID.bits]), self.look_h.eq(mem.r_data[TOKEN_ID.bits:])]
        for i, e in enumerate(pool):
            m.submodules[f"e{i}"] = e
            taking = self.op == EagerOp.TAKE
            if sram:    # the entry the last look hit
                taking = taking & (hit[i] if self.fault == "sram_take_by_match" else looked == i)
            m.d.comb += [e.write.eq(inserting & write[i]), e.take.eq(taking),
                         e.drop.eq(self.op == EagerOp.DROP), e.req.eq(self.req), e.pos.eq(self.pos),
                         *([] if sram else [e.token.eq(self.token), e.h.eq(self.h)])]
        req_n = Signal(per_req)
        m.d.comb += req_n.eq(read(eager_n, self.req))

        with m.Switch(self.op):
            with m.Case(EagerOp.INSERT):
                self._count(m, eager_n, occupancy, +1, 1)
            with m.Case(EagerOp.TAKE):
                self._count(m, eager_n, occupancy, -1, 1)
            with m.Case(EagerOp.DROP):
                self._count(m, eager_n, occupancy, -1, req_n)
        return m

    def _count(self, m, eager_n, occupancy, sign, amount):
        for r in range(self.requests):
            with m.If(self.req == r):
                m.d.sync += eager_n[r].eq(eager_n[r] + amount if sign > 0 else eager_n[r] - amount)
        for k in range(self.pools):
            if sign < 0 and k == FAULTY_POOL and self.fault == "eager_count_not_decremented":
                continue
            with m.If(self.mb == k):
                m.d.sync += occupancy[k].eq(occupancy[k] + amount if sign > 0 else occupancy[k] - amount)
