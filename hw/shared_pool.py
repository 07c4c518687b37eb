"""Shared Pool: a CAM of draft tokens with the greedy selector of one verification.

Each of ``entries`` entries holds valid, in-flight, request, micro-batch, position, token id and
H (widths from ``sim.manager.formats``). Per request the pool also keeps how many of its tokens
wait (``wait_n``) and how many are in flight (``fly_n``), so occupancy and the Scheduler's
counts never need a population count over the CAM.

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
  ``entries - 1`` comparators over the key {waiting, H, ~request, ~position}.
- ``count`` (every valid entry), ``fly_count``; ``q_req`` -> ``q_wait``, ``q_fly``
  (combinational per-request counts).

Cycle cost: insert 1 cycle, one selected token per cycle (a verification of n tokens takes n
cycles, the first token is visible combinationally), invalidate/release of a whole request
1 cycle. The prefix property of the selection follows from the key, as in the model.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import enum, wiring
from amaranth.lib.wiring import In, Out

from hw.muxes import read
from hw.priority import first_one_hot
from sim.manager.formats import CUM_PROB, MICROBATCH_ID, POSITION, REQUEST_ID, TOKEN_ID


class PoolOp(enum.Enum, shape=2):
    NOP = 0
    INSERT = 1
    SELECT = 2
    CLEAR = 3


class SharedPool(wiring.Component):
    def __init__(self, entries: int, requests: int):
        if entries < 2 or requests < 1:
            raise ValueError("SharedPool: entries >= 2 and requests >= 1 expected")
        self.entries, self.requests = entries, requests
        per_req = range(POSITION.max_raw + 1)
        super().__init__({
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
        valid = Signal(n)
        fly = Signal(n)
        reqs = [Signal(REQUEST_ID.bits, name=f"e{i}_req") for i in range(n)]
        mbs = [Signal(MICROBATCH_ID.bits, name=f"e{i}_mb") for i in range(n)]
        poss = [Signal(POSITION.bits, name=f"e{i}_pos") for i in range(n)]
        tokens = [Signal(TOKEN_ID.bits, name=f"e{i}_token") for i in range(n)]
        hs = [Signal(CUM_PROB.bits, name=f"e{i}_h") for i in range(n)]
        per_req = range(POSITION.max_raw + 1)
        wait_n = [Signal(per_req, name=f"r{r}_wait") for r in range(self.requests)]
        fly_n = [Signal(per_req, name=f"r{r}_fly") for r in range(self.requests)]

        # Greedy selector: argmax tree over {waiting, H, ~request, ~position}.
        key_bits = 1 + CUM_PROB.bits + REQUEST_ID.bits + POSITION.bits
        nodes = []
        for i in range(n):
            key = Signal(key_bits, name=f"e{i}_key")
            m.d.comb += key.eq(Cat(~poss[i], ~reqs[i], hs[i], valid[i] & ~fly[i]))
            nodes.append((key, Const(i, range(n))))
        level = 0
        while len(nodes) > 1:
            nxt = []
            for j in range(0, len(nodes) - 1, 2):
                (ka, ia), (kb, ib) = nodes[j], nodes[j + 1]
                k = Signal(key_bits, name=f"sel{level}_{j // 2}_key")
                i = Signal(range(n), name=f"sel{level}_{j // 2}_idx")
                take_b = Signal(name=f"sel{level}_{j // 2}_b")
                m.d.comb += [take_b.eq(kb > ka), k.eq(Mux(take_b, kb, ka)), i.eq(Mux(take_b, ib, ia))]
                nxt.append((k, i))
            if len(nodes) % 2:
                nxt.append(nodes[-1])
            nodes, level = nxt, level + 1
        best_key, best_idx = nodes[0]
        m.d.comb += [
            self.best_valid.eq(best_key[-1]),
            self.best_h.eq(best_key[POSITION.bits + REQUEST_ID.bits:-1]),
            self.best_req.eq(~best_key[POSITION.bits:POSITION.bits + REQUEST_ID.bits]),
            self.best_pos.eq(~best_key[:POSITION.bits]),
            self.best_token.eq(read(tokens, best_idx)),
            self.best_mb.eq(read(mbs, best_idx)),
        ]

        best_one_hot = Signal(n)
        m.d.comb += best_one_hot.eq(Cat(best_idx == i for i in range(n)))
        free_one_hot = first_one_hot(m, ~valid, "free")
        match = Signal(n)
        m.d.comb += match.eq(Cat(reqs[i] == self.req for i in range(n)))

        count = Signal(range(n + 1))
        fly_count = Signal(range(n + 1))
        m.d.comb += [self.count.eq(count), self.fly_count.eq(fly_count)]
        m.d.comb += [self.q_wait.eq(read(wait_n, self.q_req)), self.q_fly.eq(read(fly_n, self.q_req))]
        r_wait = Signal(per_req)
        r_fly = Signal(per_req)
        m.d.comb += [r_wait.eq(read(wait_n, self.req)), r_fly.eq(read(fly_n, self.req))]

        with m.Switch(self.op):
            with m.Case(PoolOp.INSERT):
                m.d.sync += [valid.eq(valid | free_one_hot), fly.eq(fly & ~free_one_hot),
                             count.eq(count + 1)]
                for i in range(n):
                    with m.If(free_one_hot[i]):
                        m.d.sync += [reqs[i].eq(self.req), mbs[i].eq(self.mb), poss[i].eq(self.pos),
                                     tokens[i].eq(self.token), hs[i].eq(self.h)]
                for r in range(self.requests):
                    with m.If(self.req == r):
                        m.d.sync += wait_n[r].eq(wait_n[r] + 1)
            with m.Case(PoolOp.SELECT):
                with m.If(self.best_valid):
                    m.d.sync += [fly.eq(fly | best_one_hot), fly_count.eq(fly_count + 1)]
                    for r in range(self.requests):
                        with m.If(self.best_req == r):
                            m.d.sync += [wait_n[r].eq(wait_n[r] - 1), fly_n[r].eq(fly_n[r] + 1)]
            with m.Case(PoolOp.CLEAR):
                gone = Signal(n)
                m.d.comb += gone.eq(valid & match & ((fly & self.clear_fly.replicate(n)) |
                                                     (~fly & self.clear_wait.replicate(n))))
                dropped_fly = Signal(per_req)
                dropped_wait = Signal(per_req)
                m.d.comb += [dropped_fly.eq(Mux(self.clear_fly, r_fly, 0)),
                             dropped_wait.eq(Mux(self.clear_wait, r_wait, 0))]
                m.d.sync += [valid.eq(valid & ~gone), fly.eq(fly & ~gone),
                             count.eq(count - dropped_fly - dropped_wait),
                             fly_count.eq(fly_count - dropped_fly)]
                for r in range(self.requests):
                    with m.If(self.req == r):
                        with m.If(self.clear_fly):
                            m.d.sync += fly_n[r].eq(0)
                        with m.If(self.clear_wait):
                            m.d.sync += wait_n[r].eq(0)
        return m
