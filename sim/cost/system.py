"""Whole-step pricing on a system of devices (DESIGN.md section 3).

A device is one A100 and the PIM stacks attached to it (none on the DGX A100). A model split
over ``devices`` devices is tensor-parallel: every device runs the same share (``ModelSpec.shard``)
at the same time, so the step takes one device's time. Within a layer the operators run one
after another (no overlap of GPU, PIM and link work): the step time is the sum of FC, attention,
other (norms, activations, residuals, on the GPU) and communication.

Partitioning (documented in sim/cost/README.md):
- TLM FC: weights column-/row-split over the devices' GPUs, two all-reduces per layer (after the
  output projection and after the last FFN matrix) over the device link.
- Attention: heads split over devices; on PIM, one instance = one request x one KV head, never
  split, placed round-robin over all channels of the device's stacks (request-major order, so
  a request's heads land on neighbouring channels); instances on one channel run back to back.
- FC on PIM (the DLM's, chosen by the Scheduler): weights spread over all banks of the device's
  stacks; inputs go GPU -> stacks and results (or partial sums) stacks -> GPU over the GPU-PIM
  link for every FC operator, because norms and activations stay on the GPU.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType
from functools import lru_cache, partial
from operator import mul
from typing import Callable, Mapping, NamedTuple, Sequence

from sim.config import BASE, CALIBRATIONS, Configs, config_path, get, loader
from sim.cost.energy import COMPONENTS, EnergyModel, load_energy
from sim.cost.gpu import GPU, load_gpu
from sim.cost.links import Link, load_link
from sim.cost.pim import PimStack, check_power, clear_memos, load_pim
from sim.errors import ConfigError, SaddleError
from sim.model import Elementwise, ModelSpec, check_requests, load_model

PLACES = ("gpu", "pim")
ATTENTION_PHASES = ("scores", "softmax", "context")
# (system has PIM, fc, attention) -> the checked mapping: all that validation depends on.
_VALID_MAPPINGS: dict[tuple[bool, str, str], tuple[tuple[str, str], ...]] = {}
# Energies of a step's parts are tuples in COMPONENTS order; the attention parts spell it out.
assert COMPONENTS == ("gpu_dram", "gpu_onchip", "gpu_mac", "pim_bank", "pim_mac", "link", "static")

class StepCost(NamedTuple):
    """Cost of one step. Times are integer picoseconds of wall time; the ``*_busy_ps`` are per
    device (all devices of the step are busy in parallel). Energy covers all devices: per
    component in ``COMPONENTS`` order (static last), and ``energy_pj`` their sum. A named
    tuple: the engine prices ~10^5 steps per run, and a tuple is built several times faster
    than a frozen dataclass."""

    time_ps: int
    attention_ps: int
    fc_ps: int
    comm_ps: int
    other_ps: int
    gpu_busy_ps: int
    pim_busy_ps: int
    energy: tuple[float, ...]
    energy_pj: float
    flops: int
    pim_flops: int
    devices: int
    mapping: tuple[tuple[str, str], ...]

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
                "gpu_busy_ns": ns(self.gpu_busy_ps), "pim_busy_ns": ns(self.pim_busy_ps),
                "energy_pj": self.energy_pj, "energy_by_component_pj": dict(self.energy_by_component_pj),
                "flops": self.flops, "pim_flop_share": self.pim_flop_share,
                "devices": self.devices, "mapping": dict(self.mapping)}


class StepForm(NamedTuple):
    """How a step pricer hands out a step (``System.step_pricer``'s ``form``). ``of(*fields)``:
    the caller's form of the ``StepCost`` of these fields, in order (``StepCost`` itself
    builds it; a caller that wants another form is spared building the ``StepCost``), built
    once per step (or step attention) the pricer memoizes; ``with_ops(priced, flops,
    pim_flops)``: that form for a step that differs from ``priced`` only in its operation
    counts. PIM attention is memoized per context unit, so
    steps that share a memo entry have the same times and energies but their own attention
    FLOPs: they get the memoized form with their counts, not a new ``StepCost`` each."""

    of: Callable[..., object]
    with_ops: Callable[[object, int, int], object]


STEP_COST = StepForm(StepCost,
                     lambda cost, flops, pim_flops: cost._replace(flops=flops, pim_flops=pim_flops))


class _KindPricer(NamedTuple):
    """One kind of step's three entry points, over the same memos."""

    step: Callable[[tuple[tuple[int, int], ...]], object]
    draft_step: Callable[[Sequence[int]], object]
    draft_round: Callable[[Sequence[int], Sequence[int]], list]


# (system, model share's spec, mapping, devices, power, form) -> that kind's pricer and its
# memos
_KIND_PRICERS: dict[tuple, _KindPricer] = {}
_MEMO_LIMIT = 1 << 16      # entries of one kind's step memo before it is emptied

@dataclass(frozen=True)
class _Dense:
    """The part of a step that depends on its token count only (FC, elementwise operators,
    all-reduces); energies per component in ``COMPONENTS`` order, per device."""

    fc_ps: int
    other_ps: int
    comm_ps: int
    gpu_ps: int
    pim_ps: int
    fc_energy: tuple[float, ...]
    other_energy: tuple[float, ...]
    allreduce_energy: tuple[float, ...]
    # each component but static, all devices, when attention's energy in it is 0.0: the sum
    # ((fc + 0.0) + other + all-reduce) x devices that ``System._make_pricer``'s ``head`` makes
    without_attention: tuple[float, ...]
    flops: int
    pim_flops: int
    attention_flops: tuple[int, int, int, int]   # per layer, see _bilinear_coefficients
    attention_bytes: tuple[int, int, int, int]   # fused-kernel traffic, per layer
    # unfused kernels: (flops, bytes) coefficients of scores, softmax and context, per layer
    attention_phases: tuple[tuple[tuple[int, int, int, int], tuple[int, int, int, int]], ...]
    attention_transfer: tuple[int, float] | None   # (ps, link pJ) of attention on PIM

class _Acc:
    """Accumulates per-device time and energy while a step is priced."""

    def __init__(self):
        self.t = dict.fromkeys(("attention", "fc", "comm", "other", "gpu", "pim"), 0)
        self.e = dict.fromkeys(COMPONENTS, 0.0)
        self.pim_flops = 0

    def add_energy(self, parts: Mapping[str, float], times: int = 1):
        for k, v in parts.items():
            self.e[k] += v * times

@dataclass(frozen=True)
class System:
    name: str
    devices: int
    gpu: GPU
    pim: PimStack | None
    stacks_per_device: int
    memory_bytes: int
    device_link: Link | None
    gpu_pim_link: Link | None
    energy: EnergyModel
    default_mapping: tuple[tuple[str, str], ...]
    calibration: str = "physical"

    def __hash__(self) -> int:
        # Every price cache is keyed by the system: hash its name, not every parameter.
        return hash((self.name, self.calibration))

    # --- public API -----------------------------------------------------------------------

    def price_step(self, model: ModelSpec | str, requests: Sequence[tuple[int, int]], *,
                   mapping: Mapping[str, str] | None = None, devices: int | None = None,
                   power_constrained: bool = False) -> StepCost:
        """One step of ``model`` over ``requests`` = ``[(context_len, query_tokens), ...]``, the
        model split over ``devices`` devices (default: all of the system's)."""
        spec, args = self._step_kind(model, mapping, devices, power_constrained)
        # The cache is asked first: only validated requests ever enter it, so a hit needs no
        # check; a miss validates inside _price_cached; unhashable input is checked (and rejected or
        # normalized) here.
        reqs = tuple(requests)
        try:
            return self._price_cached(spec, reqs, *args)
        except TypeError:
            return self._price_cached(spec, check_requests(reqs), *args)

    def step_pricer(self, model: ModelSpec | str, *, mapping: Mapping[str, str] | None = None,
                    devices: int | None = None, power_constrained: bool = False,
                    form: StepForm = STEP_COST
                    ) -> Callable[[tuple[tuple[int, int], ...]], object]:
        """``price_step`` for one kind of step (model, mapping, devices), checked once, without
        the whole-step cache: for a caller that prices many steps of one kind and keeps its own
        cache (the engine's adapter). ``pricer(requests)`` takes a tuple of ``(context_len,
        query_tokens)`` int pairs with 1 <= query_tokens <= context_len, as ``check_requests``
        returns them, and does not check it (the engine builds its requests so, and a check
        would cost a third of a step's price); it returns the step's ``StepCost``, or the
        caller's own ``form`` of it (``StepForm``)."""
        spec, args = self._step_kind(model, mapping, devices, power_constrained)
        return self._kind_pricer(spec, *args, form).step

    def draft_pricer(self, model: ModelSpec | str, *, mapping: Mapping[str, str] | None = None,
                     devices: int | None = None, power_constrained: bool = False,
                     form: StepForm = STEP_COST) -> Callable[[Sequence[int]], object]:
        """A prediction step (one query per request) of the kind of step ``step_pricer``
        prices, over its memos: ``pricer(contexts)`` is ``step_pricer(...)(tuple((c, 1) for c
        in contexts))`` for int contexts >= 1. Every DLM step of the engine has this form, and
        its contexts as plain ints spare building and hashing a pair per request (a SADDLE run
        prices ~3 x 10^5 such steps)."""
        spec, args = self._step_kind(model, mapping, devices, power_constrained)
        return self._kind_pricer(spec, *args, form).draft_step

    def round_pricer(self, model: ModelSpec | str, *, mapping: Mapping[str, str] | None = None,
                     devices: int | None = None, power_constrained: bool = False,
                     form: StepForm = STEP_COST
                     ) -> Callable[[Sequence[int], Sequence[int]], list]:
        """The prediction steps of a planned draft round, for the kind of step ``step_pricer``
        prices (and over its memos): ``pricer(contexts, caps)`` is the list of step s = 0 ..
        max(caps) - 1, step s being ``step_pricer(...)(requests)`` of the requests i with
        ``caps[i] > s``, in order, each ``(contexts[i] + s, 1)``: request i drafts one token
        per step from context ``contexts[i]`` (int >= 1) for ``caps[i]`` steps. A round's
        steps differ only by one more context each and fewer requests at the end, so their
        keys and sums are carried from step to step rather than rebuilt from requests."""
        spec, args = self._step_kind(model, mapping, devices, power_constrained)
        return self._kind_pricer(spec, *args, form).draft_round

    def _step_kind(self, model: ModelSpec | str, mapping: Mapping[str, str] | None,
                   devices: int | None, power_constrained: bool
                   ) -> tuple[ModelSpec, tuple[tuple[tuple[str, str], ...], int, bool]]:
        """The checked model and (mapping, devices, power) arguments of ``_price``."""
        spec = load_model(model) if isinstance(model, str) else model
        devices = self.devices if devices is None else devices
        if isinstance(devices, bool) or not isinstance(devices, int) or not 1 <= devices <= self.devices:
            raise SaddleError(f"{self.name}: devices must be 1..{self.devices}, found {devices!r}")
        return spec, (self._mapping(mapping), devices, check_power(power_constrained))

    def price_draft(self, dlm: ModelSpec | str, requests: Sequence[tuple[int, int]], *,
                    fc: str = "gpu", power_constrained: bool = False) -> StepCost:
        """One DLM prediction step on one device (its micro-batch); DLM attention on PIM when
        the system has PIM, FC where the Scheduler put it."""
        attention = "pim" if self.pim else "gpu"
        return self.price_step(dlm, requests, mapping={"fc": fc, "attention": attention},
                               devices=1, power_constrained=power_constrained)

    def price_verify(self, tlm: ModelSpec | str, requests: Sequence[tuple[int, int]], *,
                     attention: str | None = None, power_constrained: bool = False) -> StepCost:
        """One TLM pass over all devices; TLM FC on the GPUs, attention where the Scheduler put
        it (default: the system's static mapping)."""
        attention = attention or dict(self.default_mapping)["attention"]
        return self.price_step(tlm, requests, mapping={"fc": "gpu", "attention": attention},
                               power_constrained=power_constrained)

    def fc_compute_bound(self, model: ModelSpec | str, tokens: int, devices: int | None = None) -> bool:
        """Whether some FC GEMM of one step of ``tokens`` tokens on the GPUs is compute-bound
        (its compute time, wave quantization included, above its memory time): past that token
        count a pass no longer costs one streaming of the weights."""
        spec, (_, devices, _) = self._step_kind(model, None, devices, False)
        fc, _ = spec.shard(devices).dense_ops(tokens)
        return any(self.gpu.fc_kernel(op).compute_bound for op in fc)

    def check_fits(self, model: ModelSpec | str, requests: Sequence[tuple[int, int]]) -> None:
        """Weights plus every request's KV cache must fit in the system's memory."""
        spec = load_model(model) if isinstance(model, str) else model
        need = spec.weight_bytes + sum(L for L, _ in check_requests(requests)) * spec.kv_bytes_per_token
        if need > self.memory_bytes:
            raise SaddleError(f"{spec.name} with this batch needs {need / 2**30:.1f} GiB; "
                              f"{self.name} has {self.memory_bytes / 2**30:.0f} GiB")

    # --- pricing --------------------------------------------------------------------------

    def _mapping(self, mapping: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
        if mapping is None:
            return self.default_mapping
        if type(mapping) is dict and len(mapping) == 2:
            # The engine's form, asked thousands of times: a validated pair comes from a cache.
            fc, attention = mapping.get("fc"), mapping.get("attention")
            if type(fc) is str and type(attention) is str:
                known = _VALID_MAPPINGS.get((self.pim is not None, fc, attention))
                if known is not None:
                    return known
        if not isinstance(mapping, Mapping) or set(mapping) != {"fc", "attention"}:
            raise SaddleError(f"mapping must have exactly the keys 'fc' and 'attention', found {mapping!r}")
        for kind, place in mapping.items():
            if place not in PLACES:
                raise SaddleError(f"mapping[{kind!r}]: expected 'gpu' or 'pim', found {place!r}")
            if place == "pim" and self.pim is None:
                raise SaddleError(f"{self.name} has no PIM; mapping[{kind!r}] must be 'gpu'")
        checked = (("fc", mapping["fc"]), ("attention", mapping["attention"]))
        _VALID_MAPPINGS[(self.pim is not None, mapping["fc"], mapping["attention"])] = checked
        return checked

    @lru_cache(maxsize=4096)
    def _price_cached(self, spec: ModelSpec, reqs: tuple[tuple[int, int], ...],
                      mapping: tuple[tuple[str, str], ...], devices: int, power: bool) -> StepCost:
        return self._kind_pricer(spec, mapping, devices, power, STEP_COST).step(check_requests(reqs))

    def _kind_pricer(self, spec: ModelSpec, mapping: tuple[tuple[str, str], ...], devices: int,
                     power: bool, form: StepForm) -> _KindPricer:
        key = (self, spec, mapping, devices, power, form)
        pricer = _KIND_PRICERS.get(key)
        if pricer is None:
            pricer = _KIND_PRICERS[key] = self._make_pricer(spec, mapping, devices, power, form)
        return pricer

    def _make_pricer(self, spec: ModelSpec, mapping: tuple[tuple[str, str], ...], devices: int,
                     power: bool, form: StepForm) -> _KindPricer:
        """The pricer of one kind of step, for checked requests. A closure over the kind's
        constants and memos: a run prices ~10^5 steps of a few kinds, most of them new (a
        micro-batch's contexts grow by one per step), so a new step must cost little more than
        one pass over its requests. What the step's price depends on is memoized at the
        coarsest key that determines it exactly: everything but attention's own work per token
        count (``_dense``); with unfused GPU attention the whole step per (request count,
        sum L, sum q, sum L q, thread blocks), or per (request count, sum L) when every request
        has one query; with PIM attention all but the FLOP counts per
        (the requests' contexts in ``PimStack.context_unit``s, their query tokens; the units
        alone when every request has one query). Three entry points over these memos: one step
        (``step_pricer``), one step of one query per request (``draft_pricer``) and a planned
        draft round's steps (``round_pricer``)."""
        (_, fc_place), (_, att_place) = mapping
        shard = spec.shard(devices)
        layers = shard.layers
        on_pim = att_place == "pim"
        static_w = self.energy.static_w(devices, devices * self.stacks_per_device)
        dense_of: dict[int, _Dense] = {}
        memo: dict[tuple, tuple] = {}

        def dense(tokens: int) -> _Dense:
            found = dense_of.get(tokens)
            if found is None:
                found = dense_of[tokens] = self._dense(shard, tokens, fc_place, devices, power)
            return found

        def remember(into: dict, key: tuple, value: tuple) -> tuple:
            if len(into) >= _MEMO_LIMIT:    # bounded: a cleared memo only costs recomputation
                into.clear()
            into[key] = value
            return value

        # Attention's energy is 0.0 but in three consecutive components (PIM bank, PIM MAC and
        # link on PIM; GPU DRAM, on chip and MAC on the GPU): only those are summed per step.
        lo = COMPONENTS.index("pim_bank") if on_pim else COMPONENTS.index("gpu_dram")
        mid, hi = lo + 1, lo + 2

        def head(d: _Dense, attention: tuple[int, int, tuple[float, ...]]) -> tuple:
            """The step's fields before its FLOP counts. Energy is added component by component
            in the order fc, attention, other, all-reduce: the same float sums, in the same
            order, as pricing operator by operator (``_Dense.without_attention`` has them for
            an attention energy of 0.0); then static, and the total in COMPONENTS order
            (static last)."""
            att_ps, att_comm, att_energy = attention
            time_ps = att_ps + d.fc_ps + d.comm_ps + att_comm + d.other_ps
            f, o, r, zero = d.fc_energy, d.other_energy, d.allreduce_energy, d.without_attention
            energy = (*zero[:lo], ((f[lo] + att_energy[lo]) + o[lo] + r[lo]) * devices,
                      ((f[mid] + att_energy[mid]) + o[mid] + r[mid]) * devices,
                      ((f[hi] + att_energy[hi]) + o[hi] + r[hi]) * devices,
                      *zero[hi + 1:], time_ps * static_w)
            return (time_ps, att_ps, d.fc_ps, d.comm_ps + att_comm, d.other_ps,
                    d.gpu_ps + (0 if on_pim else att_ps), d.pim_ps + (att_ps if on_pim else 0),
                    energy, sum(energy))

        of, with_ops = form

        def ops(d: _Dense, sums: tuple[int, int, int, int]) -> tuple[int, int]:
            """The step's (FLOPs, FLOPs on PIM), all devices."""
            att_flops = _bilinear(d.attention_flops, sums) * layers
            return ((d.flops + att_flops) * devices,
                    (d.pim_flops + (att_flops if on_pim else 0)) * devices)

        def whole(step_head: tuple, d: _Dense, sums: tuple[int, int, int, int]) -> object:
            return of(*step_head, *ops(d, sums), devices, mapping)

        def round_spans(contexts: Sequence[int], caps: Sequence[int]
                        ) -> list[tuple[range, list[int], int]]:
            """A planned round's steps as spans over which the drafting requests do not change
            (they change only where some cap ends): (steps, their contexts at step 0, sum of
            those contexts). A loop per span, not a generator step per step."""
            ends = sorted(set(caps))
            spans = []
            for start, stop in zip([0] + ends, ends):
                if stop > start:
                    cs = [c for c, cap in zip(contexts, caps) if cap > start]
                    spans.append((range(start, stop), cs, sum(cs)))
            return spans

        if on_pim:
            pim, unit, group = self.pim, self.pim.context_unit, shard.group
            instances, uniform, placed = self._pim_attention(shard, power)

            # Steps of one query per request (draft steps) are memoized apart, on their context
            # units alone (``memo1``: no query tuple to build and hash), each entry with the
            # operation counts of its request count as affine in the contexts' sum (``ops1``).
            memo1: dict[tuple, tuple] = {}
            affine: dict[int, tuple[int, int, int, int]] = {}

            def ops1(n: int) -> tuple[int, int, int, int]:
                """``ops`` of n requests of one query each, as (FLOPs at contexts' sum 0, per
                unit of the sum, FLOPs on PIM at sum 0, per unit): ``ops`` is affine in the sum
                (integer sums of ``_bilinear``), so a memo hit costs two products, not a call."""
                found = affine.get(n)
                if found is None:
                    d = dense(n)
                    flops, pim_flops = ops(d, (n, 0, n, 0))
                    more, pim_more = ops(d, (n, 1, n, 1))
                    found = affine[n] = (flops, more - flops, pim_flops, pim_more - pim_flops)
                return found

            def fresh1(units: tuple[int, ...], cycles: list[int], reads: int, sum_l: int,
                       d: _Dense) -> tuple:
                """The ``memo1`` entry of the one-query step of these units (instances
                ``cycles``, ``reads``; contexts' sum ``sum_l``; ``d = dense(len(units))``), the
                step first."""
                n = len(units)
                counts = flops, more, pim_flops, pim_more = ops1(n)
                step = of(*head(d, placed(units, [group] * n, cycles, reads, d)),
                          flops + more * sum_l, pim_flops + pim_more * sum_l, devices, mapping)
                return remember(memo1, units, (step, *counts))

            def fresh(key: tuple, sums: tuple[int, int, int, int]) -> object:
                d = dense(sums[2])
                units, queries = key
                rows = [q * group for q in queries]
                attention = placed(units, rows, *instances(units, rows), d)
                return remember(memo, key, (whole(head(d, attention), d, sums), d))[0]

            def draft_step(contexts: Sequence[int]) -> object:
                sum_l = sum(contexts)
                units = tuple([-(-c // unit) for c in contexts])
                found = memo1.get(units)
                if found is None:
                    return fresh1(units, *uniform(units, group), sum_l, dense(len(units)))[0]
                step, flops, more, pim_flops, pim_more = found
                return with_ops(step, flops + more * sum_l, pim_flops + pim_more * sum_l)

            def price(reqs: tuple[tuple[int, int], ...]) -> object:
                contexts, queries = zip(*reqs)      # a step has at least one request
                sums = _column_sums(contexts, queries)
                n, _, tokens, _ = sums
                # Every q >= 1, so tokens == n means one query each (a draft step).
                if tokens == n:
                    return draft_step(contexts)
                key = (tuple([-(-L // unit) for L in contexts]), queries)
                found = memo.get(key)
                if found is None:
                    return fresh(key, sums)
                return with_ops(found[0], *ops(found[1], sums))

            instance = pim.unit_instance(shard.head_dim, shard.bpe, power)

            def draft_round(contexts: Sequence[int], caps: Sequence[int]) -> list:
                """Each request's instance is looked up when the round starts (or its drafting
                requests change) and again only when its context enters a new context unit: at
                context c + s in step s, when c + s - 1 is a multiple of the unit. A step where
                none does is the previous step's attention; otherwise the instances' channel
                placement is priced from the carried cycles and reads."""
                steps = []
                append = steps.append
                for span, cs, base in round_spans(contexts, caps):
                    n, start = len(cs), span.start
                    d = dense(n)
                    units = [-(-(c + start) // unit) for c in cs]
                    cycles, reads = uniform(units, group)
                    entering: dict[int, list[int]] = {}   # step mod unit -> requests
                    for i, c in enumerate(cs):
                        entering.setdefault((1 - c) % unit, []).append(i)
                    found = None
                    for s in span:
                        sum_l = base + n * s
                        if s > start:
                            for i in entering.get(s % unit, ()):
                                reads -= instance(units[i], group)[1]
                                units[i] += 1
                                cycles[i], r = instance(units[i], group)
                                reads += r
                                found = None
                        if found is None:
                            key = tuple(units)
                            found = memo1.get(key)
                            if found is None:
                                found = fresh1(key, cycles, reads, sum_l, d)
                                step, flops, more, pim_flops, pim_more = found
                                append(step)
                                continue
                            step, flops, more, pim_flops, pim_more = found
                        append(with_ops(step, flops + more * sum_l, pim_flops + pim_more * sum_l))
                return steps
        elif self.gpu.unfused_attention:
            blocks_of = self.gpu.unfused_blocks
            kv_heads, group = shard.kv_heads, shard.group
            one_query_blocks = blocks_of(kv_heads, group)

            class PerQuery(dict):
                """Thread blocks of a request by its query tokens, filled on first use: a TLM
                pass asks one per request."""

                def __missing__(self, queries: int) -> int:
                    blocks = self[queries] = blocks_of(kv_heads, queries * group)
                    return blocks
            blocks_per = PerQuery()

            def whole_step(key: tuple, sums: tuple[int, int, int, int]) -> object:
                """The step of the memo key ``key``: unfused attention sees the requests only
                through these sums and its thread-block count, so steps that agree on them
                cost the same, and a run's DLM steps often do."""
                found = memo.get(key)
                if found is None:
                    d = dense(sums[2])
                    attention = self._attention_gpu_unfused(shard, key[4], d, sums)
                    found = remember(memo, key, whole(head(d, attention), d, sums))
                return found

            # Steps of n requests of one query each: the sums and blocks follow from n and the
            # contexts' sum, so they are memoized per n on that sum alone (an int key).
            by_count: dict[int, dict[int, object]] = {}

            def one_query_steps(n: int) -> dict[int, object]:
                table = by_count.get(n)
                if table is None:
                    table = by_count[n] = {}
                return table

            def one_query_step(n: int, sum_l: int, table: dict[int, object]) -> object:
                """The step of n one-query requests whose contexts sum to ``sum_l``, into
                ``table`` (``one_query_steps(n)``)."""
                sums = (n, sum_l, n, sum_l)
                d = dense(n)
                attention = self._attention_gpu_unfused(shard, n * one_query_blocks, d, sums)
                return remember(table, sum_l, whole(head(d, attention), d, sums))

            def one_query_priced(n: int, sum_l: int) -> object:
                table = one_query_steps(n)
                found = table.get(sum_l)
                return one_query_step(n, sum_l, table) if found is None else found

            def price(reqs: tuple[tuple[int, int], ...]) -> object:
                n, sum_l, tokens, sum_lq = sums = _sums(reqs)
                # Every q >= 1, so tokens == n means one query each (a draft step).
                if tokens == n:
                    return one_query_priced(n, sum_l)
                blocks = sum([blocks_per[q] for _, q in reqs])
                return whole_step((n, sum_l, tokens, sum_lq, blocks), sums)

            def draft_step(contexts: Sequence[int]) -> object:
                return one_query_priced(len(contexts), sum(contexts))

            def draft_round(contexts: Sequence[int], caps: Sequence[int]) -> list:
                steps = []
                append = steps.append
                for span, cs, base in round_spans(contexts, caps):
                    n = len(cs)
                    table = one_query_steps(n)
                    for s in span:
                        sum_l = base + n * s
                        found = table.get(sum_l)
                        append(one_query_step(n, sum_l, table) if found is None else found)
                return steps
        else:
            def price(reqs: tuple[tuple[int, int], ...]) -> object:
                sums = _sums(reqs)
                d = dense(sums[2])
                return whole(head(d, self._attention_gpu(shard, reqs, d, sums)), d, sums)

            def draft_step(contexts: Sequence[int]) -> object:
                # Fused kernels count tiles per request: the pairs are needed anyway.
                return price(tuple([(c, 1) for c in contexts]))

            def draft_round(contexts: Sequence[int], caps: Sequence[int]) -> list:
                # Fused kernels count tiles per request: nothing to carry between steps.
                return [price(tuple([(c + s, 1) for c in cs]))
                        for span, cs, _ in round_spans(contexts, caps) for s in span]
        return _KindPricer(price, draft_step, draft_round)

    @lru_cache(maxsize=16384)
    def _dense(self, shard: ModelSpec, tokens: int, fc_place: str, devices: int,
               power: bool) -> "_Dense":
        """What a step costs besides attention's own work: it depends on the step's token count
        only (attention's FLOPs per query x key and GPU <-> PIM traffic included)."""
        fc, other = shard.dense_ops(tokens)
        acc = _Acc()
        if fc_place == "gpu":
            self._fc_gpu(shard, tokens, acc)
        else:
            self._fc_pim(shard, tokens, power, acc)
        fc_energy = tuple(acc.e[k] for k in COMPONENTS)
        other_ps, other_parts = self._other_cost(shard, tokens)
        ar = _Acc()
        self._allreduce(shard, tokens, devices, ar)
        other_energy = tuple(other_parts.get(k, 0.0) for k in COMPONENTS)
        allreduce_energy = tuple(ar.e[k] for k in COMPONENTS)
        return _Dense(fc_ps=acc.t["fc"], other_ps=other_ps, comm_ps=acc.t["comm"] + ar.t["comm"],
                      gpu_ps=acc.t["gpu"] + other_ps, pim_ps=acc.t["pim"],
                      fc_energy=fc_energy,
                      other_energy=other_energy, allreduce_energy=allreduce_energy,
                      without_attention=tuple([((f + 0.0) + o + r) * devices for f, o, r in zip(
                          fc_energy, other_energy, allreduce_energy)][:-1]),
                      flops=sum(op.flops * op.repeat for op in fc + other), pim_flops=acc.pim_flops,
                      **_attention_coefficients(shard, self.gpu.unfused_attention),
                      attention_transfer=self._attention_transfer(shard, tokens) if self.pim else None)

    def _fc_gpu(self, shard: ModelSpec, tokens: int, acc: _Acc) -> None:
        fc, _ = shard.dense_ops(tokens)
        for op in fc:
            kernel = self.gpu.fc_kernel(op)
            ps = kernel.ps * op.repeat
            acc.t["fc"] += ps
            acc.t["gpu"] += ps
            acc.add_energy(self.energy.gpu(op.flops, kernel.dram, kernel), op.repeat)

    def _fc_pim(self, shard: ModelSpec, tokens: int, power: bool, acc: _Acc) -> None:
        fc, _ = shard.dense_ops(tokens)
        for op in fc:
            work = self.pim.gemv(op.tokens, op.k, op.n, op.bpe, self.stacks_per_device, power)
            ps = work.cycles * self.pim.tck_ps * op.repeat
            acc.t["fc"] += ps
            acc.t["pim"] += ps
            acc.pim_flops += op.flops * op.repeat
            acc.add_energy(self.energy.pim(work.column_reads, self.pim.column_bytes, self.pim.lanes), op.repeat)
            to_pim = op.tokens * op.k * op.bpe * self.stacks_per_device
            self._gpu_pim_transfer(to_pim, work.result_bytes, op.repeat, acc)

    def _attention_gpu(self, shard: ModelSpec, reqs: tuple[tuple[int, int], ...], dense: "_Dense",
                       sums: tuple[int, int, int, int]) -> tuple[int, int, tuple[float, ...]]:
        """(time, communication time, energy per component) of every layer's attention, priced
        as ``GPU.attention_ps`` prices the step's ``attention_batch`` (fused kernels; unfused:
        ``_attention_gpu_unfused``)."""
        gpu, g, layers = self.gpu, shard.group, shard.layers
        flops = _bilinear(dense.attention_flops, sums)
        nbytes = _bilinear(dense.attention_bytes, sums)
        tiles = shard.kv_heads * sum(gpu.tiles_per_kv_head(L, q * g) for L, q in reqs)
        ps = gpu.fused_attention_ps(flops, nbytes, tiles)
        parts = self.energy.gpu(flops, nbytes)
        return ps * layers, 0, (parts["gpu_dram"] * layers, parts["gpu_onchip"] * layers,
                                parts["gpu_mac"] * layers, 0.0, 0.0, 0.0, 0.0)

    def _attention_gpu_unfused(self, shard: ModelSpec, blocks: int, dense: "_Dense",
                               sums: tuple[int, int, int, int]) -> tuple[int, int, tuple[float, ...]]:
        """Scores, softmax and context as three kernels, each of ``blocks`` thread blocks (one per
        request x KV head and block of ``tile_m`` query rows); the score and context products read their
        operands once (their tiles cover a whole head) and make three register accesses per
        multiply-add."""
        kernel_ps, traffic_pj = self.gpu.kernel_ps, self.energy.gpu_traffic_pj
        ps = 0
        dram = onchip = mac = 0.0
        for phase, (fc, bc) in zip(ATTENTION_PHASES, dense.attention_phases):
            flops, nbytes = _bilinear(fc, sums), _bilinear(bc, sums)
            ps += kernel_ps(flops, nbytes, blocks)
            regs = 3 * flops // 2 if phase != "softmax" else 0
            phase_dram, phase_onchip, phase_mac = traffic_pj(flops, nbytes, nbytes, nbytes, regs)
            dram += phase_dram
            onchip += phase_onchip
            mac += phase_mac
        layers = shard.layers
        return ps * layers, 0, (dram * layers, onchip * layers, mac * layers, 0.0, 0.0, 0.0, 0.0)

    def _pim_attention(self, shard: ModelSpec, power: bool
                       ) -> tuple[Callable, Callable, Callable]:
        """``(instances, uniform, placed)``: attention on PIM of one model share under one
        power constraint, its constants bound once (a run prices ~10^5 new steps of a few
        kinds). ``instances(units, rows)``: each request's instance cycles (one KV head) and
        their PE column reads in all (``PimStack.unit_instances``), for contexts of ``units`` x
        ``PimStack.context_unit`` keys (all they depend on) and ``rows`` query rows;
        ``uniform(units, rows)`` the same when every request has ``rows`` query rows (an int;
        ``PimStack.uniform_instances``). ``placed(units, rows, cycles, reads, dense)``:
        (time, communication time, energy per component) of every layer's attention, the
        instances (request x KV head) placed round-robin on the device's channels; ``units``
        and ``rows`` still set the refresh tails and the pair extra."""
        pim, kvh, layers, heads = self.pim, shard.kv_heads, shard.layers, shard.heads
        channels, unit, tck = pim.channels * self.stacks_per_device, pim.context_unit, pim.tck_ps
        unit_tail = pim.unit_tails(shard.head_dim, shard.bpe, power)
        slowest, pim_pj = pim.placed, self.energy.pim_pj
        column_bytes, lanes = pim.column_bytes, pim.lanes
        overlap = self.gpu_pim_link.overlap_attention
        extras: dict[int, int] = {}     # pair_extra per longest context unit (all it depends on)

        def placed(units: Sequence[int], rows: Sequence[int], cycles: list[int], reads: int,
                   dense: "_Dense") -> tuple[int, int, tuple[float, ...]]:
            reads *= kvh
            longest = max(units)
            extra = extras.get(longest)
            if extra is None:
                extra = extras[longest] = pim.pair_extra((longest * unit,))
            # Instances request-major: request r's KV heads are jobs r * kvh ... r * kvh + kvh - 1.
            tail = None if unit_tail is None else partial(unit_tail, units, rows)
            att_ps = slowest(cycles, channels, kvh, extra, tail)[0] * tck * layers
            bank_pj, mac_pj = pim_pj(reads, column_bytes, lanes)
            comm_ps, link_pj = dense.attention_transfer
            if overlap:
                # Heads pipelined: the transfers of one head overlap the attention of the
                # others, so 1/heads of them shows when attention is the longer of the two, and
                # what attention cannot hide otherwise.
                comm_ps = (-(-comm_ps // heads) if att_ps > comm_ps
                           else comm_ps - att_ps + -(-att_ps // heads))
            return (att_ps, comm_ps,
                    (0.0, 0.0, 0.0, bank_pj * layers, mac_pj * layers, link_pj, 0.0))
        return (pim.unit_instances(shard.head_dim, shard.bpe, power),
                pim.uniform_instances(shard.head_dim, shard.bpe, power), placed)

    def _attention_transfer(self, shard: ModelSpec, tokens: int) -> tuple[int, float]:
        """GPU <-> PIM traffic of attention on PIM, every layer: Q and the new K, V entries
        down, the outputs up."""
        q_bytes = tokens * shard.heads * shard.head_dim * shard.bpe
        new_kv = tokens * shard.kv_heads * shard.head_dim * shard.bpe * 2
        acc = _Acc()
        self._gpu_pim_transfer(q_bytes + new_kv, q_bytes, shard.layers, acc)
        return acc.t["comm"], acc.e["link"]

    def _gpu_pim_transfer(self, down: int, up: int, times: int, acc: _Acc) -> None:
        link = self.gpu_pim_link
        acc.t["comm"] += (link.transfer_ps(down) + link.transfer_ps(up)) * times
        acc.e["link"] += (down + up) * link.energy_pj_per_byte * times

    @lru_cache(maxsize=4096)
    def _other_cost(self, shard: ModelSpec, tokens: int) -> tuple[int, dict[str, float]]:
        _, other = shard.dense_ops(tokens)
        if self.gpu.elementwise_fit:
            other = _fused_elementwise(other)
        ps = sum(self.gpu.elementwise_ps(op.flops, op.bytes_total, _ELEMENTWISE_KIND.get(op.name, ""))
                 * op.repeat for op in other)
        flops = sum(op.flops * op.repeat for op in other)
        nbytes = sum(op.bytes_total * op.repeat for op in other)
        return ps, self.energy.gpu(flops, nbytes)

    def _allreduce(self, shard: ModelSpec, tokens: int, devices: int, acc: _Acc) -> None:
        if devices == 1:
            return
        nbytes = tokens * shard.hidden * shard.bpe
        count = 2 * shard.layers
        acc.t["comm"] += self.device_link.allreduce_ps(nbytes, devices) * count
        sent = Link.allreduce_bytes_sent(nbytes, devices)
        acc.e["link"] += sent * self.device_link.energy_pj_per_byte * count

_ELEMENTWISE_KIND = {"attn_norm": "norm", "ffn_norm": "norm", "final_norm": "norm",
                     "activation": "activation"}


def _fused_elementwise(ops: tuple[Elementwise, ...]) -> tuple[Elementwise, ...]:
    """Norms, activations, residual adds and rotary embedding as the kernels that run: each
    norm also reads the residual stream (the residual add fused into it); rotary embedding
    runs inside the attention kernel."""
    return tuple(replace(op, inputs=op.inputs + 1) if _ELEMENTWISE_KIND.get(op.name) == "norm" else op
                 for op in ops if op.name not in ("attn_residual", "ffn_residual", "rope"))


@lru_cache(maxsize=256)
def _attention_coefficients(shard: ModelSpec, unfused: bool) -> dict[str, tuple]:
    """``_Dense``'s attention coefficients: they depend on the model share only, not on the
    step's token count."""
    return dict(
        attention_flops=_bilinear_coefficients(shard, lambda op: op.flops),
        attention_bytes=_bilinear_coefficients(shard, lambda op: op.streamed_bytes),
        attention_phases=tuple(
            (_bilinear_coefficients(shard, lambda op, p=p: op.flops if op.name == p else 0),
             _bilinear_coefficients(shard, lambda op, p=p: op.bytes_total if op.name == p else 0))
            for p in ATTENTION_PHASES) if unfused else ())


def _bilinear_coefficients(shard: ModelSpec, count) -> tuple[int, int, int, int]:
    """``(a, b, c, e)`` with ``count`` summed over a request's attention phases (one layer) =
    a + b L + c q + e L q for context L and q query tokens. Every attention count of
    ``sim.model.Attention`` is of that form (each is a multiple of heads x queries x head dim,
    KV heads x context x head dim, or heads x queries x context), so four requests determine it
    exactly, and a step's total is one dot product with (requests, sum L, sum q, sum L q)."""
    f = lambda L, q: sum(count(op) for op in shard.attention_ops(L, q))
    e = f(2, 2) - f(2, 1) - f(1, 2) + f(1, 1)
    b = f(2, 1) - f(1, 1) - e
    c = f(1, 2) - f(1, 1) - e
    return f(1, 1) - b - c - e, b, c, e

def _sums(reqs: tuple[tuple[int, int], ...]) -> tuple[int, int, int, int]:
    """``(n, sum L, sum q, sum L q)`` of a step's requests: its token count and all its
    attention counts depend on (``_bilinear``)."""
    return _column_sums(*zip(*reqs)) if reqs else (0, 0, 0, 0)


def _column_sums(contexts: tuple[int, ...], queries: tuple[int, ...]
                 ) -> tuple[int, int, int, int]:
    """``_sums`` of the requests ``zip(contexts, queries)``: summed in C by the builtins (half
    the time of a Python loop over a pass's 128 requests; no numpy call, whose overhead a
    micro-batch's few requests would not repay)."""
    return len(contexts), sum(contexts), sum(queries), sum(map(mul, contexts, queries))


def _bilinear(coefficients: tuple[int, int, int, int], sums: tuple[int, int, int, int]) -> int:
    a, b, c, e = coefficients
    n, sum_l, sum_q, sum_lq = sums
    return a * n + b * sum_l + c * sum_q + e * sum_lq

@loader
def load_system(name: str, calibration: str | None = None, *, configs: Configs = BASE) -> System:
    """The system ``configs/hardware/<name>.yaml`` (a file with ``kind: system``), its
    components under ``calibration`` (default: the file's ``calibration``)."""
    path = config_path("hardware", name)
    data = configs.yaml(path)
    if data.get("kind") != "system":
        raise ConfigError(f"{path}: kind: expected 'system' (this is a component preset, not a "
                          f"system), found {data.get('kind')!r}")
    if calibration is None:
        calibration = get(data, "calibration", str, source=path)
    if calibration not in CALIBRATIONS:
        raise ConfigError(f"{path}: calibration: expected one of {', '.join(CALIBRATIONS)}, "
                          f"found {calibration!r}")
    devices = get(data, "devices", int, source=path, positive=True)
    pim_name = get(data, "pim", (str, type(None)), source=path)
    stacks = get(data, "stacks_per_device", int, source=path)
    if (pim_name is None) != (stacks == 0) or stacks < 0:
        raise ConfigError(f"{path}: stacks_per_device must be 0 exactly when pim is null, found "
                          f"pim={pim_name!r}, stacks_per_device={stacks}")
    links = get(data, "links", str, source=path)
    gpu_pim_name = get(data, "gpu_pim_link", (str, type(None)), source=path)
    if (pim_name is None) != (gpu_pim_name is None):
        raise ConfigError(f"{path}: gpu_pim_link must be set exactly when pim is set")
    dm = get(data, "default_mapping", dict, source=path)
    mapping = {k: get(dm, k, str, source=path, prefix="default_mapping") for k in ("fc", "attention")}
    system = System(
        name=name, devices=devices, gpu=load_gpu(get(data, "gpu", str, source=path), calibration, configs=configs),
        pim=load_pim(pim_name, calibration, configs=configs) if pim_name else None, stacks_per_device=stacks,
        memory_bytes=int(get(data, "memory_gb", float, source=path, positive=True) * 2**30),
        device_link=load_link(get(data, "device_link", str, source=path), links, calibration,
                              configs=configs),
        gpu_pim_link=(load_link(gpu_pim_name, links, calibration, configs=configs)
                      if gpu_pim_name else None),
        energy=load_energy("energy", calibration, configs=configs), default_mapping=(), calibration=calibration)
    try:
        default = system._mapping(mapping)
    except SaddleError as exc:
        raise ConfigError(f"{path}: default_mapping: {exc}") from None
    return replace(system, default_mapping=default)

def clear_caches() -> None:
    """Forget every cached price and operator (for cold-start measurements)."""
    for fn in (ModelSpec.attention_ops, ModelSpec.dense_ops, ModelSpec.shard, GPU.fc_kernel,
               PimStack.gemv, Link.allreduce_ps, System._price_cached, System._dense,
               System._other_cost, _attention_coefficients):
        fn.cache_clear()
    _KIND_PRICERS.clear()
    clear_memos()
