"""Shared Pool: a CAM of draft tokens with the greedy selector of one verification.

Each of ``entries`` entries (a ``CamEntry``) holds valid, in-flight, request, micro-batch,
position, token id and H (widths from ``sim.manager.formats``). Per request the pool also keeps
how many of its tokens wait (``wait_n``) and how many are in flight (``fly_n``), so occupancy
and the Scheduler's counts never need a population count over the CAM.

Interface (``lib.wiring`` Component, one command per cycle, no handshake: every command
completes in the cycle it is given):

- ``op`` with ``req``, ``mb``, ``pos``, ``token``, ``h``:
  ``INSERT`` writes the lowest free entry (the caller checks ``count < entries``);
  ``SELECT`` moves ``best`` in flight; ``CLEAR`` removes the request's in-flight entries
  (``clear_fly``) and/or its waiting entries (``clear_wait``) in one cycle, by a match on the
  request field of every entry.
- ``best_valid``, ``best_req``, ``best_mb``, ``best_pos``, ``best_token``, ``best_h``
  (combinational): the waiting entry with the highest (H, -request, -position), i.e. the model's
  selection order (``sim.manager.shared_pool.selection_key``): an argmax tree of
  ``entries - 1`` comparators (``ArgmaxNode``) over the key {waiting, H, ~request, ~position},
  which carries the winner's token and micro-batch along.
- Aging (``aging_passes`` = K, None = off: no aging logic is built and the key is as above):
  each entry keeps its count of passes passed over (``K.bit_length()`` bits, saturating at K)
  and a ``served`` flag, and prepends ``aged`` (count = K) to its key below the waiting bit:
  {waiting, aged, H, ~request, ~position}, the model's ``aged_selection_key``. A ``SELECT``
  broadcasts the selected token's request to every entry (the ``req`` bus carries ``best_req``
  in that cycle) and the entries of that request set ``served``; ``pass_end`` (one cycle after
  the pass's last ``SELECT``, no other command in it) resets the count of each waiting entry
  that was served and adds one to the others', and clears every ``served``. The tree is not
  changed: the aged bit is formed in the entry.
- ``count`` (every valid entry), ``fly_count``; ``q_req`` -> ``q_wait``, ``q_fly``
  (combinational per-request counts).

Cycle cost: insert 1 cycle, one selected token per cycle (a verification of n tokens takes n
cycles, the first token is visible combinationally), invalidate/release of a whole request
1 cycle. The prefix property of the selection follows from the key, as in the model.

Structure: every entry and every tree node is its own submodule, so that the exported Verilog
keeps them as modules and synthesis can map them one at a time (``hw/flow/synth.py``, method
``osu018-hier``) instead of optimizing one flat 200k-gate netlist.

``fault``: one of ``ArgmaxNode.FAULTS`` or ``SharedPool.FAULTS``, for mutation testing
(hw/common/fault.py); None in the shipped design.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import enum, wiring
from amaranth.lib.wiring import In, Out

from hw.common.fault import checked_fault, fault_for
from hw.common.priority_encoder import first_one_hot
from hw.common.read_mux import read
from sim.manager.formats import AGE, CUM_PROB, MICROBATCH_ID, POSITION, REQUEST_ID, TOKEN_ID

KEY_BITS = 1 + CUM_PROB.bits + REQUEST_ID.bits + POSITION.bits     # without aging (one more with)
PAYLOAD_BITS = TOKEN_ID.bits + MICROBATCH_ID.bits


class PoolOp(enum.Enum, shape=2):
    NOP = 0
    INSERT = 1
    SELECT = 2
    CLEAR = 3


def _entry_fields() -> dict:
    return {"req": In(REQUEST_ID.bits), "mb": In(MICROBATCH_ID.bits), "pos": In(POSITION.bits),
            "token": In(TOKEN_ID.bits), "h": In(CUM_PROB.bits)}


class CamEntry(wiring.Component):
    """One Shared Pool entry. ``write`` stores the fields (waiting), ``select`` moves it in
    flight, ``clear`` removes it if it belongs to ``req`` and its state is one ``clear_fly`` /
    ``clear_wait`` names; at most one of the three per cycle. ``key`` = {waiting, H, ~request,
    ~position} (the selector's order), ``payload`` = {micro-batch, token}, ``free`` = not valid.
    With ``aging_passes``: ``selecting`` (a SELECT of a token of request ``req`` this cycle) and
    ``pass_end`` age the entry, and ``key`` = {waiting, aged, H, ~request, ~position}."""

    def __init__(self, aging_passes: int | None = None):
        self.aging_passes = aging_passes
        ports = {"write": In(1), "select": In(1), "clear": In(1), "clear_fly": In(1),
                 "clear_wait": In(1), **_entry_fields(),
                 "free": Out(1), "key": Out(key_bits(aging_passes)), "payload": Out(PAYLOAD_BITS)}
        if aging_passes is not None:
            ports.update(selecting=In(1), pass_end=In(1))
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        valid, fly = Signal(), Signal()
        req, mb, pos = Signal(REQUEST_ID.bits), Signal(MICROBATCH_ID.bits), Signal(POSITION.bits)
        token, h = Signal(TOKEN_ID.bits), Signal(CUM_PROB.bits)
        k = self.aging_passes
        if k is None:
            key = Cat(~pos, ~req, h, valid & ~fly)
        else:
            age, served = Signal(range(k + 1)), Signal()
            key = Cat(~pos, ~req, h, age == k, valid & ~fly)
        m.d.comb += [self.key.eq(key), self.payload.eq(Cat(token, mb)), self.free.eq(~valid)]
        if k is not None:
            with m.If(self.selecting & valid & (req == self.req)):
                m.d.sync += served.eq(1)
            with m.If(self.pass_end):
                m.d.sync += served.eq(0)
                with m.If(valid & ~fly):
                    m.d.sync += age.eq(Mux(served, 0, Mux(age == k, k, age + 1)))
            with m.If(self.write):
                m.d.sync += [age.eq(0), served.eq(0)]
        gone = Signal()
        m.d.comb += gone.eq(self.clear & valid & (req == self.req) &
                            Mux(fly, self.clear_fly, self.clear_wait))
        with m.If(self.write):
            m.d.sync += [valid.eq(1), fly.eq(0), req.eq(self.req), mb.eq(self.mb), pos.eq(self.pos),
                         token.eq(self.token), h.eq(self.h)]
        with m.If(self.select):
            m.d.sync += fly.eq(1)
        with m.If(gone):
            m.d.sync += [valid.eq(0), fly.eq(0)]
        return m


def key_bits(aging_passes: int | None) -> int:
    """Width of an entry's selection key: {waiting, [aged,] H, ~request, ~position}."""
    return KEY_BITS + (aging_passes is not None)


class ArgmaxNode(wiring.Component):
    """One comparator of the selector tree: the larger key of ``a`` and ``b`` (``a`` on a tie,
    the lower index), its payload, and its index within this node's subtree: the winner's bit
    above the child's index (children of ``index_bits`` bits; 0 at the leaves)."""

    FAULTS = {
        "tie_break_request_reversed": "shared pool: on equal H the higher request id wins",
        "tie_break_position_reversed": "shared pool: on equal H within a request the later position wins",
        "argmax_prefers_b": "shared pool: an argmax node picks its b input on equal keys (a >= for a >)",
    }
    # The key bits a reversed tie-break compares inverted (see CamEntry: {waiting, H, ~request, ~position}).
    _REVERSED_FIELD = {"tie_break_request_reversed": ((1 << REQUEST_ID.bits) - 1) << POSITION.bits,
                       "tie_break_position_reversed": (1 << POSITION.bits) - 1}

    def __init__(self, key_bits: int, payload_bits: int, index_bits: int, *, fault: str | None = None):
        self.index_bits = index_bits
        self.fault = checked_fault(fault, ArgmaxNode)
        ports = {"a_key": In(key_bits), "a_payload": In(payload_bits),
                 "b_key": In(key_bits), "b_payload": In(payload_bits),
                 "key": Out(key_bits), "payload": Out(payload_bits), "index": Out(index_bits + 1)}
        if index_bits:
            ports.update(a_index=In(index_bits), b_index=In(index_bits))
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        take_b = Signal()
        m.d.comb += [take_b.eq(self.b_key > self.a_key),
                     self.key.eq(Mux(take_b, self.b_key, self.a_key)),
                     self.payload.eq(Mux(take_b, self.b_payload, self.a_payload))]
        if self.index_bits:
            m.d.comb += self.index.eq(Cat(Mux(take_b, self.b_index, self.a_index), take_b))
        else:
            m.d.comb += self.index.eq(take_b)
        if self.fault == "argmax_prefers_b":
            m.d.comb += take_b.eq(self.b_key >= self.a_key)
        elif self.fault in self._REVERSED_FIELD:
            flip = self._REVERSED_FIELD[self.fault]
            m.d.comb += take_b.eq((self.b_key ^ flip) > (self.a_key ^ flip))
        return m


def argmax_tree(m, leaves: list, name: str, fault: str | None = None):
    """(key, payload, index) of the largest of ``leaves`` [(key, payload)], lowest index on a
    tie, built from ``ArgmaxNode`` submodules ``{name}{level}_{j}`` (each given ``fault``).
    Node j of level L covers leaves [j 2^L, (j+1) 2^L), so indices are relative and the leaves
    need no constants; an odd node out moves up a level unchanged (its index gains a leading 0)."""
    nodes = [(key, payload, None) for key, payload in leaves]
    level = 0
    while len(nodes) > 1:
        nxt = []
        for j in range(0, len(nodes) - 1, 2):
            (ka, pa, ia), (kb, pb, ib) = nodes[j], nodes[j + 1]
            node = ArgmaxNode(len(ka), len(pa), level, fault=fault)
            m.submodules[f"{name}{level}_{j // 2}"] = node
            m.d.comb += [node.a_key.eq(ka), node.a_payload.eq(pa), node.b_key.eq(kb), node.b_payload.eq(pb)]
            if level:
                m.d.comb += node.a_index.eq(ia)
                if ib is not None:
                    m.d.comb += node.b_index.eq(ib)
            nxt.append((node.key, node.payload, node.index))
        if len(nodes) % 2:
            nxt.append(nodes[-1])
        nodes, level = nxt, level + 1
    return nodes[0]


class SharedPool(wiring.Component):
    FAULTS = {"fly_count_not_cleared": "shared pool: CLEAR leaves the in-flight total fly_count unchanged"}

    def __init__(self, entries: int, requests: int, aging_passes: int | None = None, *,
                 fault: str | None = None):
        if entries < 2 or requests < 1:
            raise ValueError("SharedPool: entries >= 2 and requests >= 1 expected")
        if aging_passes is not None and not 1 <= aging_passes <= AGE.max_raw:
            raise ValueError(f"SharedPool: aging_passes in [1, {AGE.max_raw}] or None expected")
        self.entries, self.requests, self.aging_passes = entries, requests, aging_passes
        self.fault = checked_fault(fault, SharedPool, ArgmaxNode)
        per_req = range(POSITION.max_raw + 1)
        aging = {} if aging_passes is None else {"pass_end": In(1)}
        super().__init__({
            **aging,
            "op": In(PoolOp),
            "req": In(REQUEST_ID.bits), "mb": In(MICROBATCH_ID.bits), "pos": In(POSITION.bits),
            "token": In(TOKEN_ID.bits), "h": In(CUM_PROB.bits),
            "clear_fly": In(1), "clear_wait": In(1),
            "best_valid": Out(1), "best_req": Out(REQUEST_ID.bits), "best_mb": Out(MICROBATCH_ID.bits),
            "best_pos": Out(POSITION.bits), "best_token": Out(TOKEN_ID.bits), "best_h": Out(CUM_PROB.bits),
            "count": Out(range(entries + 1)), "fly_count": Out(range(entries + 1)),
            "q_req": In(REQUEST_ID.bits), "q_wait": Out(per_req), "q_fly": Out(per_req),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.entries
        cam = [CamEntry(self.aging_passes) for _ in range(n)]
        per_req = range(POSITION.max_raw + 1)
        wait_n = [Signal(per_req, name=f"r{r}_wait") for r in range(self.requests)]
        fly_n = [Signal(per_req, name=f"r{r}_fly") for r in range(self.requests)]

        best_key, best_payload, best_index = argmax_tree(m, [(e.key, e.payload) for e in cam], "sel",
                                                         fault_for(self.fault, ArgmaxNode))
        best_idx = Signal(range(n))
        m.d.comb += [
            best_idx.eq(best_index),
            self.best_valid.eq(best_key[-1]),
            self.best_h.eq(best_key[POSITION.bits + REQUEST_ID.bits:POSITION.bits + REQUEST_ID.bits + CUM_PROB.bits]),
            self.best_req.eq(~best_key[POSITION.bits:POSITION.bits + REQUEST_ID.bits]),
            self.best_pos.eq(~best_key[:POSITION.bits]),
            self.best_token.eq(best_payload[:TOKEN_ID.bits]),
            self.best_mb.eq(best_payload[TOKEN_ID.bits:]),
        ]

        free = Signal(n)
        m.d.comb += free.eq(Cat(e.free for e in cam))
        free_one_hot = first_one_hot(m, free, "free")
        inserting, selecting = Signal(), Signal()
        m.d.comb += [inserting.eq(self.op == PoolOp.INSERT),
                     selecting.eq((self.op == PoolOp.SELECT) & self.best_valid)]
        entry_req = self.req
        if self.aging_passes is not None:   # a SELECT tells every entry which request it served
            entry_req = Signal(REQUEST_ID.bits)
            m.d.comb += entry_req.eq(Mux(selecting, self.best_req, self.req))
        for i, e in enumerate(cam):
            m.submodules[f"e{i}"] = e
            if self.aging_passes is not None:
                m.d.comb += [e.selecting.eq(selecting), e.pass_end.eq(self.pass_end)]
            m.d.comb += [e.write.eq(inserting & free_one_hot[i]), e.select.eq(selecting & (best_idx == i)),
                         e.clear.eq(self.op == PoolOp.CLEAR), e.clear_fly.eq(self.clear_fly),
                         e.clear_wait.eq(self.clear_wait), e.req.eq(entry_req), e.mb.eq(self.mb),
                         e.pos.eq(self.pos), e.token.eq(self.token), e.h.eq(self.h)]

        count = Signal(range(n + 1))
        fly_count = Signal(range(n + 1))
        m.d.comb += [self.count.eq(count), self.fly_count.eq(fly_count)]
        m.d.comb += [self.q_wait.eq(read(wait_n, self.q_req)), self.q_fly.eq(read(fly_n, self.q_req))]
        r_wait = Signal(per_req)
        r_fly = Signal(per_req)
        m.d.comb += [r_wait.eq(read(wait_n, self.req)), r_fly.eq(read(fly_n, self.req))]

        with m.Switch(self.op):
            with m.Case(PoolOp.INSERT):
                m.d.sync += count.eq(count + 1)
                for r in range(self.requests):
                    with m.If(self.req == r):
                        m.d.sync += wait_n[r].eq(wait_n[r] + 1)
            with m.Case(PoolOp.SELECT):
                with m.If(self.best_valid):
                    m.d.sync += fly_count.eq(fly_count + 1)
                    for r in range(self.requests):
                        with m.If(self.best_req == r):
                            m.d.sync += [wait_n[r].eq(wait_n[r] - 1), fly_n[r].eq(fly_n[r] + 1)]
            with m.Case(PoolOp.CLEAR):
                dropped_fly = Signal(per_req)
                dropped_wait = Signal(per_req)
                m.d.comb += [dropped_fly.eq(Mux(self.clear_fly, r_fly, 0)),
                             dropped_wait.eq(Mux(self.clear_wait, r_wait, 0))]
                m.d.sync += [count.eq(count - dropped_fly - dropped_wait),
                             fly_count.eq(fly_count - dropped_fly)]
                if self.fault == "fly_count_not_cleared":
                    m.d.sync += fly_count.eq(fly_count)
                for r in range(self.requests):
                    with m.If(self.req == r):
                        with m.If(self.clear_fly):
                            m.d.sync += fly_n[r].eq(0)
                        with m.If(self.clear_wait):
                            m.d.sync += wait_n[r].eq(0)
        return m
