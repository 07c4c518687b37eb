"""Thin, cached adapter between the engine and the cost models (``sim/cost/``).

The engine asks for the price of one step of one model: a DLM prediction step of a micro-batch
on its device, or a TLM pass over all devices, for given requests (each with its own context
length and query count) and a mapping of the model's FC and attention to GPU or PIM. The
adapter prices through ``System.step_pricer`` (``System.price_step`` without its cache and
its request check: the engine's requests are int pairs by construction; a DLM step of one
query per request, ``price_draft``, through ``System.draft_pricer``) and turns the
``StepCost`` into what the engine needs: the ``Work`` (duration and device busy times),
dynamic energy, operation counts. Identical questions are answered from a cache; keys
are exact, never bucketed. A planned draft round's steps (``price_round``) are priced
together through ``System.round_pricer``, without the cache.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Callable, NamedTuple

from sim.cost.system import StepForm, load_system
from sim.engine.devices import Work
from sim.model import load_model


class Priced(NamedTuple):
    """A step as the engine books it. A named tuple, not a frozen dataclass: one is built for
    every step a run prices, and a tuple is built several times faster."""

    work: Work
    energy_fj: int            # dynamic energy in femtojoules (static is charged once per run,
                              # for its duration); integers, so a run's sum is order-free
    attention_ps: int
    fc_ps: int
    comm_ps: int
    flops: int
    pim_flops: int


@lru_cache(maxsize=None)
def _priced_on(devices: int) -> StepForm:
    """The engine's form of a step over ``devices`` devices (``System.step_pricer``'s ``form``:
    built once per step the pricer memoizes, then given each step's operation counts). One
    form per device count: the system's pricers are kept per form, so every adapter of a
    process shares them and their memos."""
    # Priced's and Work's fields in order, positionally: built for every new step.
    def priced(time_ps: int, attention_ps: int, fc_ps: int, comm_ps: int, _other_ps: int,
               gpu_busy_ps: int, pim_busy_ps: int, energy: tuple[float, ...], energy_pj: float,
               flops: int, pim_flops: int, *_) -> Priced:
        """The ``Priced`` of the ``StepCost`` of these fields (``StepForm.of``)."""
        return _new_priced(Priced, (
            Work(time_ps, gpu_busy_ps, pim_busy_ps, devices),
            round((energy_pj - energy[-1]) * 1000),     # static is last
            attention_ps, fc_ps, comm_ps, flops, pim_flops))

    def with_ops(step: Priced, flops: int, pim_flops: int) -> Priced:
        # The same Work (immutable) for every step of one memo entry.
        return _new_priced(Priced, (*step[:5], flops, pim_flops))
    return StepForm(priced, with_ops)


_new_priced = tuple.__new__     # a named tuple from its fields in order, without keyword handling


class CostAdapter:
    def __init__(self, hardware: str, tlm: str, dlm: str | None) -> None:
        """``tlm``/``dlm``: model names (configs/models/); ``hardware``: a configs/hardware/
        system."""
        self.system = load_system(hardware)
        self.tlm = load_model(tlm)
        self.dlm = load_model(dlm) if dlm else None
        self.n_devices = int(self.system.devices)
        self._cache: dict[tuple, Priced] = {}
        # (fc, attention) -> (cache of price_draft by contexts, System.draft_pricer)
        self._drafts: dict[tuple[str, str], tuple[dict, Callable]] = {}
        # (entry, role, fc, attention, devices) -> System.step_pricer, draft_pricer or round_pricer
        self._pricers: dict[tuple, Callable] = {}
        self.calls = 0

    def price(self, role: str, requests: tuple[tuple[int, int], ...], fc: str, attention: str,
              devices: int) -> Priced:
        """``role`` is ``tlm`` or ``dlm``; ``requests`` ((context_len, queries), ...)."""
        key = (role, requests, fc, attention, devices)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        self.calls += 1
        kind = ("step", role, fc, attention, devices)
        pricer = self._pricers.get(kind) or self._pricer(kind)
        priced = self._cache[key] = pricer(requests)
        return priced

    def price_draft(self, contexts: tuple[int, ...], fc: str, attention: str) -> Priced:
        """``price("dlm", tuple((c, 1) for c in contexts), fc, attention, 1)``: a DLM
        prediction step of one micro-batch on its device, one query per request, keyed by the
        contexts alone (a tuple of ints hashes several times faster than one of pairs: CPython
        does not keep a tuple's hash, and a SADDLE run asks ~3 x 10^5 of these)."""
        found = self._drafts.get((fc, attention))
        if found is None:
            found = self._drafts[fc, attention] = (
                {}, self._pricers.get(("draft", "dlm", fc, attention, 1))
                or self._pricer(("draft", "dlm", fc, attention, 1)))
        cache, pricer = found
        hit = cache.get(contexts)
        if hit is None:
            self.calls += 1
            hit = cache[contexts] = pricer(contexts)
        return hit

    def price_round(self, role: str, contexts: list[int], caps: list[int], fc: str,
                    attention: str, devices: int) -> list[Priced]:
        """The prediction steps of a planned draft round (``System.round_pricer``): step s
        holds the requests i with ``caps[i] > s``, in order, each at context
        ``contexts[i] + s`` with one query. Not cached: a round's steps are nearly all new
        (3 % of a PIM-SD run's draft steps had been asked before)."""
        kind = ("round", role, fc, attention, devices)
        steps = (self._pricers.get(kind) or self._pricer(kind))(contexts, caps)
        self.calls += len(steps)
        return steps

    def _pricer(self, kind: tuple[str, str, str, str, int]) -> Callable:
        entry, role, fc, attention, devices = kind
        make = {"step": self.system.step_pricer, "draft": self.system.draft_pricer,
                "round": self.system.round_pricer}[entry]
        pricer = self._pricers[kind] = make(
            self.tlm if role == "tlm" else self.dlm, mapping={"fc": fc, "attention": attention},
            devices=devices, form=_priced_on(devices))
        return pricer

    def static_energy_fj(self, total_ps: int) -> int:
        """Static energy of every GPU and stack of the system over ``total_ps``, in fJ:
        charged once per run, so overlapping steps do not count it twice."""
        n = self.n_devices
        return round(self.system.energy.static(total_ps, n, n * self.system.stacks_per_device) * 1000)

    def tlm_fc_compute_bound(self, tokens: int) -> bool:
        """Whether a TLM pass of ``tokens`` tokens over all devices has a compute-bound FC GEMM."""
        return self.system.fc_compute_bound(self.tlm, tokens, self.n_devices)

    def has_pim(self) -> bool:
        return self.system.pim is not None
