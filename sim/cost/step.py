"""A step's price: the dense part (FC, elementwise operators, all-reduces), which depends on
the step's token count only, plus attention priced by its placement (``sim.cost.attention``).
A model split over ``devices`` devices is tensor-parallel (the step takes one device's time);
within a layer the operators run one after another, so the step time is the sum of FC,
attention, other (norms, activations, residuals, on the GPU) and communication. Partitioning
(FC on the GPUs or on PIM, attention's heads over the devices): sim/cost/README.md, "Systems and
partitioning".
"""
from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING, TypeVar

from sim.cost.attention import Placement, Sums, placement
from sim.cost.energy import COMPONENTS
from sim.cost.gpu import Kernel
from sim.cost.links import Link
from sim.cost.value import Value
from sim.model import FC, Elementwise, ModelSpec

if TYPE_CHECKING:
    from sim.cost.system import System

GPU_DRAM, GPU_ONCHIP, GPU_MAC, PIM_BANK, PIM_MAC, LINK, STATIC = range(len(COMPONENTS))
V = TypeVar("V")
ELEMENTWISE_KIND = {"attn_norm": "norm", "ffn_norm": "norm", "final_norm": "norm",
                    "activation": "activation"}


class PriceCache:
    """Every memo of pricing, in named tables: whoever prices owns one (a ``CostAdapter``, and
    so every run of a process that shares it). A table filled through ``remember`` (keyed by
    a step) reaching ``limit`` entries is emptied (a forgotten price only costs
    recomputation); keys are exact, never bucketed. The limit bounds a process's memory: a
    fig12 worker's tables once held 1.3 GB, and on a virtual machine each fresh page costs a
    host fault (a fifth of the grid's CPU time went there; CHANGELOG.md, 2026-12-05)."""

    def __init__(self, limit: int = 1 << 14) -> None:
        self.limit = limit
        self._tables: dict[tuple, dict] = {}

    def table(self, *name: Hashable) -> dict:
        found = self._tables.get(name)
        if found is None:
            found = self._tables[name] = {}
        return found

    def remember(self, table: dict, key: Hashable, value: V) -> V:
        if len(table) >= self.limit:
            table.clear()
        table[key] = value
        return value


class Work(Value):
    """One step's demand on the devices: how long it takes alone (``time_ps``) and how long it
    keeps each GPU and each PIM device it spans busy; ``shares``: those as fractions of
    ``time_ps`` (not a field)."""

    __slots__ = ("time_ps", "gpu_ps", "pim_ps", "devices", "shares")
    _fields = ("time_ps", "gpu_ps", "pim_ps", "devices")

    def __init__(self, time_ps: int, gpu_ps: int, pim_ps: int, devices: int = 1) -> None:
        self.time_ps, self.gpu_ps, self.pim_ps, self.devices = time_ps, gpu_ps, pim_ps, devices
        if time_ps < 0 or gpu_ps < 0 or pim_ps < 0:
            raise ValueError(f"negative work {self}")
        if gpu_ps > time_ps or pim_ps > time_ps:
            raise ValueError(f"a device is busy longer than the step lasts: {self}")
        self.shares: tuple[float, float] = (gpu_ps / time_ps, pim_ps / time_ps) if time_ps else (0.0, 0.0)


class StepCost(Value):
    """One step's times, energies and operation counts (``System.price_step``'s answer). Times
    are integer picoseconds of wall time; the ``*_busy_ps`` are per device (all devices of the
    step are busy in parallel). Energy covers all devices: per component in ``COMPONENTS``
    order (static last), and ``energy_pj`` their sum. ``allreduce_ps``: the all-reduces between
    devices (NVLink), part of ``comm_ps``."""

    __slots__ = ("time_ps", "attention_ps", "fc_ps", "comm_ps", "other_ps", "allreduce_ps", "gpu_busy_ps",
                 "pim_busy_ps", "energy", "energy_pj", "flops", "pim_flops", "devices", "mapping")
    _fields = ("time_ps", "attention_ps", "fc_ps", "comm_ps", "other_ps", "allreduce_ps", "gpu_busy_ps",
               "pim_busy_ps", "energy", "energy_pj", "flops", "pim_flops", "devices", "mapping")

    def __init__(self, time_ps: int, attention_ps: int, fc_ps: int, comm_ps: int, other_ps: int,
                 allreduce_ps: int, gpu_busy_ps: int, pim_busy_ps: int, energy: tuple[float, ...],
                 energy_pj: float, flops: int, pim_flops: int, devices: int,
                 mapping: tuple[tuple[str, str], ...]) -> None:
        self.time_ps, self.attention_ps, self.fc_ps, self.comm_ps = time_ps, attention_ps, fc_ps, comm_ps
        self.other_ps, self.allreduce_ps, self.gpu_busy_ps, self.pim_busy_ps = other_ps, allreduce_ps, gpu_busy_ps, pim_busy_ps
        self.energy, self.energy_pj = energy, energy_pj
        self.flops, self.pim_flops, self.devices, self.mapping = flops, pim_flops, devices, mapping

    @staticmethod
    def of(price: StepPrice) -> StepCost:
        """The step's cost with its own operation counts."""
        c = price.cost
        return StepCost(c.time_ps, c.attention_ps, c.fc_ps, c.comm_ps, c.other_ps, c.allreduce_ps, c.gpu_busy_ps,
                        c.pim_busy_ps, c.energy, c.energy_pj, price.flops, price.pim_flops, c.devices, c.mapping)

    @property
    def energy_by_component_pj(self) -> Mapping[str, float]:
        return MappingProxyType(dict(zip(COMPONENTS, self.energy)))

    @property
    def pim_flop_share(self) -> float:
        """Share of the step's operations (FLOPs) executed on PIM."""
        return self.pim_flops / self.flops

    def as_dict(self) -> dict:
        """JSON form: times in ns."""
        ns = lambda ps: ps / 1000
        return {"time_ns": ns(self.time_ps),
                "breakdown": {"attention_ns": ns(self.attention_ps), "fc_ns": ns(self.fc_ps),
                              "comm_ns": ns(self.comm_ps), "other_ns": ns(self.other_ps)},
                "allreduce_ns": ns(self.allreduce_ps),     # part of comm_ns
                "gpu_busy_ns": ns(self.gpu_busy_ps), "pim_busy_ns": ns(self.pim_busy_ps),
                "energy_pj": self.energy_pj,
                "energy_by_component_pj": dict(self.energy_by_component_pj),
                "flops": self.flops, "pim_flop_share": self.pim_flop_share,
                "devices": self.devices, "mapping": dict(self.mapping)}


class StepPrice(Value):
    """``StepModel.price``'s answer for one step, as a run books it. ``cost``, ``work`` and
    ``energy_fj`` (the dynamic energy, static excluded, in integer femtojoules) are shared by
    every step of one memo key; ``cost``'s operation counts are 0: the step's own are
    ``flops`` and ``pim_flops`` (all devices)."""

    __slots__ = ("cost", "work", "energy_fj", "flops", "pim_flops")
    _fields = ("cost", "work", "energy_fj", "flops", "pim_flops")

    def __init__(self, cost: StepCost, work: Work, energy_fj: int, flops: int, pim_flops: int) -> None:
        self.cost, self.work, self.energy_fj, self.flops, self.pim_flops = cost, work, energy_fj, flops, pim_flops


class DensePrice(Value):
    """The part of a step that depends on its token count only, on one device; energies in pJ per
    component in ``COMPONENTS`` order; ``comm_ps``: FC's GPU <-> PIM transfers and all-reduces."""

    _fields = ("fc_ps", "other_ps", "comm_ps", "allreduce_ps", "gpu_ps", "pim_ps", "fc_energy",
               "other_energy", "allreduce_energy", "flops", "pim_flops")
    __slots__ = _fields

    def __init__(self, fc_ps: int, other_ps: int, comm_ps: int, allreduce_ps: int, gpu_ps: int, pim_ps: int,
                 fc_energy: tuple[float, ...], other_energy: tuple[float, ...],
                 allreduce_energy: tuple[float, ...], flops: int, pim_flops: int) -> None:
        self.fc_ps, self.other_ps, self.comm_ps, self.allreduce_ps = fc_ps, other_ps, comm_ps, allreduce_ps
        self.gpu_ps, self.pim_ps, self.fc_energy, self.other_energy = gpu_ps, pim_ps, fc_energy, other_energy
        self.allreduce_energy, self.flops, self.pim_flops = allreduce_energy, flops, pim_flops


class DenseModel:
    """FC (on the GPUs or on PIM), elementwise operators and all-reduces of one model share."""

    def __init__(self, system: System, shard: ModelSpec, fc_place: str, devices: int,
                 power: bool, cache: PriceCache) -> None:
        self.system, self.shard, self.fc_place = system, shard, fc_place
        self.devices, self.power = devices, power
        self.kernels: dict[FC, Kernel] = cache.table("gpu fc kernel", system.gpu)

    def price(self, tokens: int) -> DensePrice:
        fc, other = self.shard.dense_ops(tokens)
        energy = [0.0] * len(COMPONENTS)
        on_gpu = self.fc_place == "gpu"
        fc_ps, comm_ps = self._fc_gpu(fc, energy) if on_gpu else self._fc_pim(fc, energy)
        other_ps, other_energy = self._other(other)
        allreduce_ps, allreduce_energy = self._allreduce(tokens)
        fc_flops = sum(op.flops * op.repeat for op in fc)
        return DensePrice(fc_ps=fc_ps, other_ps=other_ps, comm_ps=comm_ps + allreduce_ps,
                          allreduce_ps=allreduce_ps,
                          gpu_ps=(fc_ps if on_gpu else 0) + other_ps,
                          pim_ps=0 if on_gpu else fc_ps, fc_energy=tuple(energy),
                          other_energy=other_energy, allreduce_energy=allreduce_energy,
                          flops=fc_flops + sum(op.flops * op.repeat for op in other),
                          pim_flops=0 if on_gpu else fc_flops)

    def _fc_gpu(self, fc: tuple[FC, ...], energy: list[float]) -> tuple[int, int]:
        """(time, communication time) of the FC operators on the GPU; energy added in."""
        system, ps = self.system, 0
        for op in fc:
            kernel = self.kernels.get(op)
            if kernel is None:
                kernel = self.kernels[op] = system.gpu.fc_kernel(op)
            ps += kernel.ps * op.repeat
            parts = system.energy.gpu_traffic_pj(op.flops, kernel.dram, kernel.l2, kernel.l1,
                                                 kernel.registers)
            for i, pj in enumerate(parts, GPU_DRAM):
                energy[i] += pj * op.repeat
        return ps, 0

    def _fc_pim(self, fc: tuple[FC, ...], energy: list[float]) -> tuple[int, int]:
        """The same on PIM: inputs go down to the stacks and results back, every operator."""
        system, ps, comm = self.system, 0, 0
        pim, stacks, link = system.pim, system.stacks_per_device, system.gpu_pim_link
        assert pim is not None and link is not None
        for op in fc:
            work = pim.gemv(op.tokens, op.k, op.n, op.bpe, stacks, self.power)
            ps += work.cycles * pim.tck_ps * op.repeat
            parts = system.energy.pim_pj(work.column_reads, pim.column_bytes, pim.lanes)
            for i, pj in enumerate(parts, PIM_BANK):
                energy[i] += pj * op.repeat
            down, up = op.tokens * op.k * op.bpe * stacks, work.result_bytes
            comm += (link.transfer_ps(down) + link.transfer_ps(up)) * op.repeat
            energy[LINK] += (down + up) * link.energy_pj_per_byte * op.repeat
        return ps, comm

    def _other(self, ops: tuple[Elementwise, ...]) -> tuple[int, tuple[float, ...]]:
        """Norms, activations, residual adds and rotary embedding on the GPU. With fitted
        kernels (``elementwise_fit``) as they run: each norm also reads the residual stream
        (the residual add fused into it), rotary embedding runs inside the attention kernel."""
        gpu = self.system.gpu
        if gpu.elementwise_fit:
            ops = tuple(replace(op, inputs=op.inputs + 1)
                        if ELEMENTWISE_KIND.get(op.name) == "norm" else op
                        for op in ops if op.name not in ("attn_residual", "ffn_residual", "rope"))
        ps = sum(gpu.elementwise_ps(op.flops, op.bytes_total, ELEMENTWISE_KIND.get(op.name, ""))
                 * op.repeat for op in ops)
        flops = sum(op.flops * op.repeat for op in ops)
        nbytes = sum(op.bytes_total * op.repeat for op in ops)
        return ps, (*self.system.energy.gpu_traffic_pj(flops, nbytes), 0.0, 0.0, 0.0, 0.0)

    def _allreduce(self, tokens: int) -> tuple[int, tuple[float, ...]]:
        """Two all-reduces per layer of the hidden state over the device link."""
        energy = [0.0] * len(COMPONENTS)
        link, devices = self.system.device_link, self.devices
        if devices == 1 or link is None:
            return 0, tuple(energy)
        nbytes = tokens * self.shard.hidden * self.shard.bpe
        count = 2 * self.shard.layers
        energy[LINK] += Link.allreduce_bytes_sent(nbytes, devices) * link.energy_pj_per_byte * count
        return link.allreduce_ps(nbytes, devices) * count, tuple(energy)


class StepModel:
    """Prices one kind of step (a model share on ``devices`` devices, its FC and attention
    placed, under one power constraint) from its requests' contexts and query token counts.

    Prices are memoized in the ``PriceCache``: the dense part per token count, the rest of the
    step (but its operation counts) per ``Placement.key``; a run prices ~10^5 steps of a few
    kinds, and consecutive steps mostly share a key."""

    def __init__(self, system: System, spec: ModelSpec, mapping: tuple[tuple[str, str], ...],
                 devices: int, power: bool, cache: PriceCache) -> None:
        (_, fc_place), (_, attention_place) = mapping
        self.shard = spec.shard(devices)
        self.devices, self.mapping, self.cache = devices, mapping, cache
        self.dense = DenseModel(system, self.shard, fc_place, devices, power, cache)
        self.attention: Placement = placement(system, self.shard, attention_place, power,
                                              cache.table)
        self.attention_flops = self.attention.flops.times(self.shard.layers * devices)
        self.static_w = system.energy.static_w(devices, devices * system.stacks_per_device)
        self.dense_memo: dict[int, DensePrice] = cache.table("dense", system, self.shard, fc_place,
                                                             devices, power)
        self.memo: dict[Hashable, StepPrice] = cache.table("step", system, spec, mapping, devices,
                                                          power)

    def price(self, contexts: Sequence[int], queries: Sequence[int], steps: int = 1
              ) -> list[StepPrice]:
        """Steps 0 .. ``steps`` - 1 of the requests ``zip(contexts, queries)``, each request at
        context ``contexts[i] + s`` in step s (a planned draft round's steps; one step:
        ``steps=1``). Ints, 1 <= query <= context, not checked here:
        ``sim.model.check_requests`` checks requests from outside."""
        sums = Sums.of(contexts, queries)
        memo, attention = self.memo, self.attention
        on_pim = attention.on_pim
        # Steps of one key differ in their operation counts: the memoized head has the dense
        # part's; attention's grow by the same count every step.
        more = self.attention_flops.at(sums)
        growth = self.attention_flops.growth(sums) if steps > 1 else 0
        out = []
        key: Hashable = None
        head: StepPrice | None = None
        for s, step_key in enumerate(attention.keys(contexts, queries, sums, steps)):
            if head is None or step_key is not key:
                key, head = step_key, memo.get(step_key)
                if head is None:
                    head = self.cache.remember(memo, key, self._head(key, sums.shifted(s)))
            out.append(StepPrice(head.cost, head.work, head.energy_fj, head.flops + more,
                                 head.pim_flops + more if on_pim else head.pim_flops))
            more += growth
        return out

    def _head(self, key: Hashable, sums: Sums) -> StepPrice:
        """The step of ``key`` with the dense part's operation counts only."""
        tokens, devices, on_pim = sums.queries, self.devices, self.attention.on_pim
        d = self.dense_memo.get(tokens)
        if d is None:
            d = self.cache.remember(self.dense_memo, tokens, self.dense.price(tokens))
        att = self.attention.price(key, sums)
        time_ps = att.ps + d.fc_ps + d.comm_ps + att.comm_ps + d.other_ps
        first = self.attention.energy_from
        attention_energy = (0.0,) * first + att.energy + (0.0,) * (STATIC - first - 3)
        # Added in the order fc, attention, other, all-reduce, component by component.
        energy = (*[((f + a) + o + r) * devices for f, a, o, r in zip(
            d.fc_energy, attention_energy, d.other_energy, d.allreduce_energy)],
            time_ps * self.static_w)
        cost = StepCost(time_ps=time_ps, attention_ps=att.ps, fc_ps=d.fc_ps,
                        comm_ps=d.comm_ps + att.comm_ps, other_ps=d.other_ps,
                        allreduce_ps=d.allreduce_ps,
                        gpu_busy_ps=d.gpu_ps + (0 if on_pim else att.ps),
                        pim_busy_ps=d.pim_ps + (att.ps if on_pim else 0), energy=energy,
                        energy_pj=sum(energy), flops=0, pim_flops=0, devices=devices,
                        mapping=self.mapping)
        return StepPrice(cost, Work(time_ps, cost.gpu_busy_ps, cost.pim_busy_ps, devices),
                         energy_fj=round((cost.energy_pj - energy[STATIC]) * 1000),
                         flops=d.flops * devices, pim_flops=d.pim_flops * devices)
