"""Attention placements: one class per place attention can run, each pricing every layer's
attention of one step on one device, from the requests' contexts, query token counts and their
``Sums``. ``keys``: what each of ``steps`` consecutive steps (every context one longer per step)
depends on, exactly (``StepModel`` memoizes on it; steps it cannot tell apart get the same key
object); ``price``: the ``AttentionCost`` of a step of one key. A new placement is a ``Placement``
subclass with these two methods, ``on_pim``, ``energy_from`` and ``flops``, and a line in ``placement()``.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from functools import partial
from operator import add
from typing import TYPE_CHECKING

from sim.cost.energy import COMPONENTS
from sim.cost.pim import ChannelPlacement, PimStack
from sim.cost.value import Value

if TYPE_CHECKING:
    from sim.cost.system import System
    from sim.model import Attention, ModelSpec

PHASES = ("scores", "softmax", "context")


class Sums:
    """What a step's token count and every attention count depend on: the number of requests,
    and the sums of their contexts L, query tokens q and products L q (per step: a plain class)."""

    __slots__ = ("n", "contexts", "queries", "products")

    def __init__(self, n: int, contexts: int, queries: int, products: int) -> None:
        self.n, self.contexts, self.queries, self.products = n, contexts, queries, products

    @staticmethod
    def of(contexts: Sequence[int], queries: Sequence[int]) -> Sums:
        # Typed loops: compiled, ``sum`` is a builtin looked up and called.
        sum_l = sum_q = sum_lq = 0
        for c, q in zip(contexts, queries):
            sum_l += c
            sum_q += q
            sum_lq += c * q
        return Sums(len(contexts), sum_l, sum_q, sum_lq)

    def shifted(self, s: int) -> Sums:
        """The sums once every context has grown by ``s``."""
        return Sums(self.n, self.contexts + self.n * s, self.queries, self.products + self.queries * s) if s else self


class Bilinear(Value):
    """A count summed over a step's requests, a + b L + c q + e L q per request (one layer)."""

    __slots__ = ("a", "b", "c", "e")
    _fields = ("a", "b", "c", "e")

    def __init__(self, a: int, b: int, c: int, e: int) -> None:
        self.a, self.b, self.c, self.e = a, b, c, e

    @classmethod
    def fit(cls, shard: ModelSpec, count: Callable[[Attention], int]) -> Bilinear:
        """``count`` summed over one request's attention phases. Every count of
        ``sim.model.Attention`` is a multiple of heads x queries x head dim, KV heads x context x
        head dim or heads x queries x context, so four requests determine it exactly."""
        f = partial(_summed, shard, count)
        e = f(2, 2) - f(2, 1) - f(1, 2) + f(1, 1)
        b = f(2, 1) - f(1, 1) - e
        c = f(1, 2) - f(1, 1) - e
        return cls(f(1, 1) - b - c - e, b, c, e)

    def times(self, k: int) -> Bilinear:
        """This count times ``k`` (every layer, every device)."""
        return Bilinear(self.a * k, self.b * k, self.c * k, self.e * k)

    def growth(self, s: Sums) -> int:
        """How much the count grows once every context has grown by one."""
        return self.b * s.n + self.e * s.queries

    def at(self, s: Sums) -> int:
        return self.a * s.n + self.b * s.contexts + self.c * s.queries + self.e * s.products


def _summed(shard: ModelSpec, count: Callable[[Attention], int], L: int, q: int) -> int:
    return sum(count(op) for op in shard.attention_ops(L, q))


def _in_phase(phase: str, count: str) -> Callable[[Attention], int]:
    """An operator's ``count`` if it is ``phase``, else 0."""
    return lambda op: getattr(op, count) if op.name == phase else 0


class AttentionCost(Value):
    """Every layer's attention of a step on one device: its time, the GPU <-> PIM transfers it
    adds (``comm_ps``), its energy in pJ in ``COMPONENTS[energy_from : energy_from + 3]``."""

    __slots__ = ("ps", "comm_ps", "energy")
    _fields = ("ps", "comm_ps", "energy")

    def __init__(self, ps: int, comm_ps: int, energy: tuple[float, float, float]) -> None:
        self.ps, self.comm_ps, self.energy = ps, comm_ps, energy


class Placement:
    """What a placement has and does (module doc); a base class: compiled, called natively."""

    on_pim: bool        # its time counts as PIM busy time (else GPU)
    energy_from: int    # its energy's first component in COMPONENTS (three consecutive)
    flops: Bilinear     # attention FLOPs of one layer

    def keys(self, contexts: Sequence[int], queries: Sequence[int], sums: Sums,
             steps: int) -> Sequence[Hashable]:
        raise NotImplementedError

    def price(self, key, sums: Sums) -> AttentionCost:
        raise NotImplementedError


class _GpuAttention(Placement):
    on_pim = False
    energy_from = COMPONENTS.index("gpu_dram")

    def __init__(self, system: System, shard: ModelSpec) -> None:
        self.gpu, self.energy, self.shard = system.gpu, system.energy, shard
        self.flops = Bilinear.fit(shard, lambda op: op.flops)


class FusedGpuAttention(_GpuAttention):
    """One flash-decoding kernel per layer: one tile per (request, KV head, block of query
    rows, block of keys); DRAM traffic is K, V, Q and the output (``GPU.attention_ps``)."""

    def __init__(self, system: System, shard: ModelSpec) -> None:
        super().__init__(system, shard)
        self.bytes = Bilinear.fit(shard, lambda op: op.streamed_bytes)

    def keys(self, contexts: Sequence[int], queries: Sequence[int], sums: Sums,
             steps: int) -> Sequence[Hashable]:
        tiles_of, g, kv_heads = self.gpu.tiles_per_kv_head, self.shard.group, self.shard.kv_heads
        n, sum_l, sum_q, sum_lq = sums.n, sums.contexts, sums.queries, sums.products
        return [(n, sum_l + n * s, sum_q, sum_lq + sum_q * s,       # sums.shifted(s), tiles
                 kv_heads * sum([tiles_of(L + s, q * g) for L, q in zip(contexts, queries)]))
                for s in range(steps)]

    def price(self, key: tuple[int, ...], sums: Sums) -> AttentionCost:
        tiles = key[-1]
        flops, nbytes, layers = self.flops.at(sums), self.bytes.at(sums), self.shard.layers
        ps = self.gpu.fused_attention_ps(flops, nbytes, tiles)
        dram, onchip, mac = self.energy.gpu_traffic_pj(flops, nbytes)
        return AttentionCost(ps * layers, 0, (dram * layers, onchip * layers, mac * layers))


class UnfusedGpuAttention(_GpuAttention):
    """Scores, softmax and context as three kernels per layer, each of one thread block per
    (request, KV head, block of ``tile_m`` query rows); the products read their operands once
    and make three register accesses per multiply-add."""

    def __init__(self, system: System, shard: ModelSpec) -> None:
        super().__init__(system, shard)
        self.phases = [(p, Bilinear.fit(shard, _in_phase(p, "flops")),
                        Bilinear.fit(shard, _in_phase(p, "bytes_total"))) for p in PHASES]
        self.blocks: dict[int, int] = {}    # thread blocks of a request by its query tokens

    def keys(self, contexts: Sequence[int], queries: Sequence[int], sums: Sums,
             steps: int) -> Sequence[Hashable]:
        """The kernels see the requests only through their sums and thread blocks."""
        per_request = self.blocks
        if 1 not in per_request or sums.queries != sums.n:       # not all one query each
            for q in set(queries) - per_request.keys():
                per_request[q] = self.gpu.unfused_blocks(self.shard.kv_heads, q * self.shard.group)
        blocks = (sums.n * per_request[1] if sums.queries == sums.n
                  else sum([per_request[q] for q in queries]))
        n, sum_l, sum_q, sum_lq = sums.n, sums.contexts, sums.queries, sums.products
        return [(n, sum_l + n * s, sum_q, sum_lq + sum_q * s, blocks)    # sums.shifted(s), blocks
                for s in range(steps)]

    def price(self, key: tuple[int, ...], sums: Sums) -> AttentionCost:
        blocks = key[-1]
        ps, energy = 0, (0.0, 0.0, 0.0)
        for phase, flops_of, bytes_of in self.phases:
            flops, nbytes = flops_of.at(sums), bytes_of.at(sums)
            ps += self.gpu.kernel_ps(flops, nbytes, blocks)
            registers = 3 * flops // 2 if phase != "softmax" else 0
            energy = tuple(map(add, energy, self.energy.gpu_traffic_pj(flops, nbytes, nbytes,
                                                                      nbytes, registers)))
        layers = self.shard.layers
        dram, onchip, mac = energy
        return AttentionCost(ps * layers, 0, (dram * layers, onchip * layers, mac * layers))


class PimAttention(Placement):
    """One instance per request x KV head on the device's PIM channels, never split, placed
    round-robin in request-major order (a request's heads on neighbouring channels); instances
    on one channel run back to back. Q and the new K, V entries go down the GPU-PIM link and
    the outputs come back, every layer."""

    on_pim = True
    energy_from = COMPONENTS.index("pim_bank")

    def __init__(self, system: System, shard: ModelSpec, power: bool,
                 tables: Callable[..., dict]) -> None:
        assert system.pim is not None and system.gpu_pim_link is not None
        self.pim: PimStack = system.pim
        self.link, self.energy, self.shard, self.power = system.gpu_pim_link, system.energy, shard, power
        self.channels = self.pim.channels * system.stacks_per_device
        self.unit = self.pim.context_unit
        self.group = shard.group        # a property of the (interpreted) spec: read once
        self.flops = Bilinear.fit(shard, lambda op: op.flops)
        # Shared by every kind of step on this stack and head shape.
        shape = (self.pim, shard.head_dim, shard.bpe, power)
        # query rows -> context units -> (cycles, PE column reads) of one instance
        self.instances: dict[int, dict[int, tuple[int, int]]] = tables("pim instance", *shape)
        self.tails: dict[tuple[int, int, bool], int] = tables("pim tail", *shape)
        self.placements: dict[tuple[int, int, int], ChannelPlacement] = tables("pim placement", self.pim)
        self.extras: dict[int, int] = tables("pim pair extra", self.pim)
        self.transfers: dict[int, tuple[int, float]] = {}     # by the step's tokens

    def keys(self, contexts: Sequence[int], queries: Sequence[int], sums: Sums,
             steps: int) -> Sequence[Hashable]:
        """An instance depends on its context only through its count of ``context_unit``s, so
        a step's key changes only where some request's context enters a new unit."""
        unit, queries = self.unit, tuple(queries)
        units = [-(-c // unit) for c in contexts]
        keys = [(tuple(units), queries)]
        if steps == 1:
            return keys
        entering: dict[int, list[int]] = {}     # step mod unit -> requests entering a unit
        for i, c in enumerate(contexts):
            entering.setdefault((1 - c) % unit, []).append(i)   # c + s - 1 = 0 mod unit
        for s in range(1, steps):
            moved = entering.get(s % unit)
            if moved:
                for i in moved:
                    units[i] += 1
                keys.append((tuple(units), queries))
            else:
                keys.append(keys[-1])
        return keys

    def price(self, key: tuple[tuple[int, ...], tuple[int, ...]], sums: Sums) -> AttentionCost:
        units, queries = key
        shard, pim = self.shard, self.pim
        group = self.group
        rows = [q * group for q in queries]
        cycles, reads = [], 0
        table_rows, table = 0, {}
        for u, r in zip(units, rows):
            if r != table_rows:         # mostly once a step: its requests' rows are equal
                table_rows, table = r, self.instances.setdefault(r, {})
            found = table.get(u)
            if found is None:
                found = table[u] = self._instance(u, r)
            cycles.append(found[0])
            reads += found[1]
        longest = max(units)
        extra = self.extras.get(longest)
        if extra is None:
            extra = self.extras[longest] = pim.pair_extra(longest * self.unit)
        shape = (len(cycles), self.channels, shard.kv_heads)    # a request's KV heads in a row
        placement = self.placements.get(shape)
        if placement is None:
            placement = self.placements[shape] = ChannelPlacement(*shape)
        tail = partial(self._tail, units, rows) if pim.refresh == "until_last_activate" else None
        att_ps = placement.placed(cycles, extra, pim.with_refresh, tail)[0] * pim.tck_ps * shard.layers
        bank_pj, mac_pj = self.energy.pim_pj(reads * shard.kv_heads, pim.column_bytes, pim.lanes)
        transfer = self.transfers.get(sums.queries)
        if transfer is None:
            transfer = self.transfers[sums.queries] = self.transfer(sums.queries)
        comm_ps, link_pj = transfer
        if self.link.overlap_attention:
            # Heads pipelined: one head's transfers overlap the others' attention, so 1/heads of
            # them shows when attention is the longer, and otherwise what attention cannot hide.
            heads = shard.heads
            comm_ps = (-(-comm_ps // heads) if att_ps > comm_ps
                       else comm_ps - att_ps + -(-att_ps // heads))
        layers = shard.layers
        return AttentionCost(att_ps, comm_ps, (bank_pj * layers, mac_pj * layers, link_pj))

    def transfer(self, tokens: int) -> tuple[int, float]:
        """(ps, link pJ) of every layer's Q and new K, V down to the stacks and outputs up."""
        s = self.shard
        q_bytes = tokens * s.heads * s.head_dim * s.bpe
        down = q_bytes + tokens * s.kv_heads * s.head_dim * s.bpe * 2
        ps = (self.link.transfer_ps(down) + self.link.transfer_ps(q_bytes)) * s.layers
        return ps, (down + q_bytes) * self.link.energy_pj_per_byte * s.layers

    def _instance(self, units: int, rows: int) -> tuple[int, int]:
        """(cycles, PE column reads) of one instance, priced at its unit's longest context."""
        work = self.pim.attention_instance(units * self.unit, self.shard.head_dim, rows,
                                           self.shard.bpe, self.power)
        return work.cycles, work.column_reads

    def _tail(self, units: Sequence[int], rows: Sequence[int], job: int, paired: bool) -> int:
        key = (units[job], rows[job], paired)
        found = self.tails.get(key)
        if found is None:       # only AttAcc's schedule has tails (``refresh`` needs them)
            found = self.tails[key] = self.pim.attacc_tail(
                units[job] * self.unit, self.shard.head_dim, rows[job], self.shard.bpe,
                self.power, paired)
        return found


def placement(system: System, shard: ModelSpec, place: str, power: bool,
              tables: Callable[..., dict]) -> Placement:
    """The attention placement of ``place`` ("gpu" or "pim") on ``system``."""
    if place == "pim":
        return PimAttention(system, shard, power, tables)
    if system.gpu.unfused_attention:
        return UnfusedGpuAttention(system, shard)
    return FusedGpuAttention(system, shard)
