"""A system of devices and the public pricing API: ``System.price_step`` and its DLM and TLM
forms. A device is one A100 and the PIM stacks attached to it (none on the DGX A100); how a
step is priced is in ``sim.cost.step`` (dense part) and ``sim.cost.attention`` (placements).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from common.config import config_path, get
from common.errors import ConfigError, SaddleError
from sim.config import BASE, CALIBRATIONS, Configs, loader
from sim.cost.energy import EnergyModel, load_energy
from sim.cost.gpu import GPU, load_gpu
from sim.cost.links import Link, load_link
from sim.cost.pim import PimStack, check_power, load_pim
from sim.cost.step import PriceCache, StepCost, StepModel
from sim.model import ModelSpec, check_requests, choice, load_model

__all__ = ["StepCost", "System", "clear_caches", "load_hardware"]

PLACES = ("gpu", "pim")      # where an operator (FC, attention) can run


@dataclass(frozen=True)
class System:
    name: str
    devices: int
    gpu: GPU
    pim: PimStack | None
    stacks_per_device: int
    device_link: Link | None
    gpu_pim_link: Link | None
    energy: EnergyModel
    default_mapping: tuple[tuple[str, str], ...]
    calibration: str = "physical"

    @property
    def memory_bytes(self) -> int:
        """Every GPU's memory and every PIM stack's capacity, all devices."""
        stack = self.pim.capacity_bytes if self.pim else 0
        return self.devices * (self.gpu.memory_bytes + self.stacks_per_device * stack)

    def __hash__(self) -> int:
        # Price caches are keyed by the system: hash its name, not every parameter.
        return hash((self.name, self.calibration))

    def price_step(self, model: ModelSpec | str, requests: Sequence[tuple[int, int]], *,
                   mapping: Mapping[str, str] | None = None, devices: int | None = None,
                   power_constrained: bool = False, cache: PriceCache | None = None) -> StepCost:
        """One step of ``model`` over ``requests`` = ``[(context_len, query_tokens), ...]``, the
        model split over ``devices`` devices (default: all of the system's). ``cache``: memos
        to share with other calls (default: none kept)."""
        contexts, queries = zip(*check_requests(requests))
        step = self.step_model(model, mapping=mapping, devices=devices,
                               power_constrained=power_constrained, cache=cache)
        return StepCost.of(step.price(contexts, queries)[0])

    def step_model(self, model: ModelSpec | str, *, mapping: Mapping[str, str] | None = None,
                   devices: int | None = None, power_constrained: bool = False,
                   cache: PriceCache | None = None) -> StepModel:
        """The pricer of one kind of step, checked once, its memos in ``cache`` (which keeps
        it too)."""
        spec = load_model(model) if isinstance(model, str) else model
        devices = self.devices if devices is None else devices
        if isinstance(devices, bool) or not isinstance(devices, int) or not 1 <= devices <= self.devices:
            raise SaddleError(f"{self.name}: devices must be 1..{self.devices}, found {devices!r}")
        cache = cache or PriceCache()
        kind = (self, spec, self._mapping(mapping), devices, check_power(power_constrained))
        models: dict[tuple, StepModel] = cache.table("step model")
        found = models.get(kind)
        if found is None:
            found = models[kind] = StepModel(*kind, cache)
        return found

    def price_draft(self, dlm: ModelSpec | str, requests: Sequence[tuple[int, int]], *,
                    fc: str = "gpu", power_constrained: bool = False,
                    cache: PriceCache | None = None) -> StepCost:
        """One DLM prediction step on one device (its micro-batch); DLM attention on PIM when
        the system has PIM, FC where the Scheduler put it."""
        attention = "pim" if self.pim else "gpu"
        return self.price_step(dlm, requests, mapping={"fc": fc, "attention": attention},
                               devices=1, power_constrained=power_constrained, cache=cache)

    def price_verify(self, tlm: ModelSpec | str, requests: Sequence[tuple[int, int]], *,
                     attention: str | None = None, power_constrained: bool = False,
                     cache: PriceCache | None = None) -> StepCost:
        """One TLM pass over all devices; TLM FC on the GPUs, attention where the Scheduler put
        it (default: the system's static mapping)."""
        attention = attention or dict(self.default_mapping)["attention"]
        return self.price_step(tlm, requests, mapping={"fc": "gpu", "attention": attention},
                               power_constrained=power_constrained, cache=cache)

    def fc_compute_bound(self, model: ModelSpec | str, tokens: int, devices: int | None = None) -> bool:
        """Whether some FC GEMM of one step of ``tokens`` tokens on the GPUs is compute-bound
        (its compute time, wave quantization included, above its memory time): past that token
        count a pass no longer costs one streaming of the weights."""
        spec = load_model(model) if isinstance(model, str) else model
        fc, _ = spec.shard(self.devices if devices is None else devices).dense_ops(tokens)
        return any(self.gpu.fc_kernel(op).compute_bound for op in fc)

    def check_fits(self, model: ModelSpec | str, requests: Sequence[tuple[int, int]]) -> None:
        """Weights plus every request's KV cache must fit in the system's memory."""
        spec = load_model(model) if isinstance(model, str) else model
        need = spec.weight_bytes + sum(L for L, _ in check_requests(requests)) * spec.kv_bytes_per_token
        if need > self.memory_bytes:
            raise SaddleError(f"{spec.name} with this batch needs {need / 2**30:.1f} GiB; "
                              f"{self.name} has {self.memory_bytes / 2**30:.0f} GiB")

    def _mapping(self, mapping: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
        if mapping is None:
            return self.default_mapping
        if not isinstance(mapping, Mapping) or set(mapping) != {"fc", "attention"}:
            raise SaddleError(f"mapping must have exactly the keys 'fc' and 'attention', found {mapping!r}")
        for kind, place in mapping.items():
            if place not in PLACES:
                raise SaddleError(f"mapping[{kind!r}]: expected 'gpu' or 'pim', found {place!r}")
            if place == "pim" and self.pim is None:
                raise SaddleError(f"{self.name} has no PIM; mapping[{kind!r}] must be 'gpu'")
        return (("fc", mapping["fc"]), ("attention", mapping["attention"]))


@loader
def load_hardware(name: str, calibration: str | None = None, *, configs: Configs = BASE) -> System:
    """The system ``configs/hardware/<name>.yaml`` (a file with ``kind: system``), its
    components under ``calibration`` (default: the file's ``calibration``)."""
    path = config_path("hardware", name)
    data = configs.yaml(path)
    if data.get("kind") != "system":
        raise ConfigError(f"{path}: kind: expected 'system' (this is a component preset, not a "
                          f"system), found {data.get('kind')!r}")
    # A calibration given here is checked by the component loaders.
    calibration = calibration or choice(data, "calibration", CALIBRATIONS, path)
    g = lambda k, kind=str, **kw: get(data, k, kind, source=path, **kw)
    pim_name, stacks = g("pim", (str, type(None))), g("stacks_per_device", int)
    if (pim_name is None) != (stacks == 0) or stacks < 0:
        raise ConfigError(f"{path}: stacks_per_device must be 0 exactly when pim is null, found "
                          f"pim={pim_name!r}, stacks_per_device={stacks}")
    gpu_pim_name = g("gpu_pim_link", (str, type(None)))
    if (pim_name is None) != (gpu_pim_name is None):
        raise ConfigError(f"{path}: gpu_pim_link must be set exactly when pim is set")
    dm = g("default_mapping", dict)
    mapping = {k: get(dm, k, str, source=path, prefix="default_mapping") for k in ("fc", "attention")}

    def link(key: str, name: str) -> Link:
        links = config_path("hardware", g("links"), source=path, where="links")
        if name not in configs.yaml(links) or name == "calibrations":
            raise ConfigError(f"{path}: {key}: {name!r} is not a link of {links}")
        return load_link(name, g("links"), calibration, configs=configs)
    system = System(
        name=name, devices=g("devices", int, positive=True),
        gpu=load_gpu(g("gpu"), calibration, configs=configs),
        pim=load_pim(pim_name, calibration, configs=configs) if pim_name else None,
        stacks_per_device=stacks,
        device_link=link("device_link", g("device_link")),
        gpu_pim_link=link("gpu_pim_link", gpu_pim_name) if gpu_pim_name else None,
        energy=load_energy("energy", calibration, configs=configs), default_mapping=(),
        calibration=calibration)
    try:
        default = system._mapping(mapping)
    except SaddleError as exc:
        raise ConfigError(f"{path}: default_mapping: {exc}") from None
    return replace(system, default_mapping=default)


def clear_caches() -> None:
    """Forget the model's cached operators (for cold-start measurements; prices are memoized
    only in ``PriceCache`` objects)."""
    for fn in (ModelSpec.attention_ops, ModelSpec.dense_ops, ModelSpec.shard):
        fn.cache_clear()
