"""The engine's view of the cost models (``sim/cost/``): the price of a DLM prediction step of
a micro-batch on its device, or of a TLM pass over all devices, for requests (each with its
context and query count) and a mapping of the model's FC and attention to GPU or PIM, from one
``StepModel`` per kind of step. Every memo is in one ``PriceCache``, shared by the runs of a
process that share the adapter.
"""
from __future__ import annotations

from sim.cost.step import PriceCache, StepModel, StepPrice
from sim.cost.system import PLACES, System, load_hardware
from sim.model import ModelSpec, load_model


class CostAdapter:
    def __init__(self, system: System, tlm: ModelSpec, dlm: ModelSpec | None) -> None:
        self.system, self.tlm, self.dlm, self.n_devices = system, tlm, dlm, int(system.devices)
        self.cache = PriceCache()
        self._models: dict[tuple[str, str, str, int], StepModel] = self.cache.table("engine model")
        # Draft steps: a table per mapping keyed by the contexts alone (asked every DLM step).
        self._drafts: dict[tuple[str, str], dict[tuple[int, ...], StepPrice]] = {
            (fc, at): self.cache.table("engine draft", fc, at) for fc in PLACES for at in PLACES}

    @classmethod
    def named(cls, hardware: str, tlm: str, dlm: str | None) -> CostAdapter:
        """``hardware``: a configs/hardware/ system; ``tlm``/``dlm``: configs/models/ names."""
        return cls(load_hardware(hardware), load_model(tlm), load_model(dlm) if dlm else None)

    def price(self, role: str, requests: tuple[tuple[int, int], ...], fc: str, attention: str,
              devices: int) -> StepPrice:
        """``role`` is ``tlm`` or ``dlm``; ``requests`` ((context_len, queries), ...). Not kept
        as asked: over 99 % of fig12's TLM passes are new (the model's memo by key remains)."""
        contexts, queries = zip(*requests)
        return self._model(role, fc, attention, devices).price(contexts, queries)[0]

    def price_draft(self, contexts: tuple[int, ...], fc: str, attention: str) -> StepPrice:
        """A DLM prediction step of one micro-batch on its device, one query per request."""
        table = self._drafts[(fc, attention)]
        hit = table.get(contexts)
        if hit is None:
            hit = self.cache.remember(table, contexts, self._model("dlm", fc, attention, 1).price(
                contexts, (1,) * len(contexts))[0])
        return hit

    def price_round(self, role: str, contexts: list[int], caps: list[int], fc: str,
                    attention: str, devices: int) -> list[StepPrice]:
        """The prediction steps of a planned draft round: step s holds the requests i with
        ``caps[i] > s``, in order, each at context ``contexts[i] + s`` with one query. Not
        cached as whole steps: a round's steps are nearly all new."""
        model = self._model(role, fc, attention, devices)
        steps: list[StepPrice] = []
        start = 0
        for stop in sorted(set(caps)):      # the drafting requests change where a cap ends
            if stop > start:
                drafting = [c + start for c, cap in zip(contexts, caps) if cap > start]
                steps += model.price(drafting, (1,) * len(drafting), stop - start)
            start = stop
        return steps

    def _model(self, role: str, fc: str, attention: str, devices: int) -> StepModel:
        kind = (role, fc, attention, devices)
        model = self._models.get(kind)
        if model is None:
            spec = self.tlm if role == "tlm" else self.dlm
            assert spec is not None, "no DLM to price"
            model = self._models[kind] = self.system.step_model(
                spec, mapping={"fc": fc, "attention": attention}, devices=devices,
                cache=self.cache)
        return model

    def static_energy_fj(self, total_ps: int) -> int:
        """Static energy of every GPU and stack of the system over ``total_ps``, in fJ:
        charged once per run, so overlapping steps do not count it twice."""
        n = self.n_devices
        return round(self.system.energy.static(total_ps, n, n * self.system.stacks_per_device) * 1000)

    def tlm_fc_compute_bound(self, tokens: int) -> bool:
        """Whether a TLM pass of ``tokens`` tokens over all devices has a compute-bound FC GEMM."""
        return self.system.fc_compute_bound(self.tlm, tokens, self.n_devices)
