"""Memory capacity of a run: what each GPU and each PIM stack of one device holds as the system
places the models, at the batch's maximum context, against ``memory_gb`` (the GPU's file) and
``capacity_gb`` (the stack's file).

Placement (sim/cost/README.md, "Memory capacity"):

- TLM weights: tensor-parallel over the devices, on the GPUs (TLM FC runs there on every system).
- TLM KV cache: every live request at the maximum sequence length, split by KV heads over the
  devices, where TLM attention runs: on the GPU, or on the device's stacks, one instance per
  request x KV head placed round-robin over the channels (``PimAttention``), so the first stack
  holds the most. The Scheduler's TLM attention on the GPU reads it from the stacks.
- DLM (speculative systems): a copy of its weights on every device, on the GPU when DLM FC runs
  there, spread over the device's stacks when on PIM, on both when the Scheduler moves it; the
  KV cache of the device's micro-batch (ceil(batch / devices) requests) where DLM attention runs.
- Activations, on the GPU: the largest TLM pass's residual stream and its widest FC's input and
  output, and one layer's attention scores when attention runs there as unfused kernels. A DLM
  step's are smaller than the TLM pass's.
"""
from __future__ import annotations

from dataclasses import dataclass

from common.errors import ConfigError
from sim.cost.system import System
from sim.model import ModelPair, ModelSpec
from sim.systems.spec import SystemSpec

GIB = 2**30


@dataclass(frozen=True)
class Piece:
    what: str
    device: str         # "gpu" or "stack"
    bytes: int


@dataclass(frozen=True)
class Shape:
    """What sizes a run's memory: its batch, longest context and largest TLM pass (tokens)."""

    batch: int
    max_seq: int
    pass_tokens: int


def _kv_instances_on_first_stack(instances: int, channels_per_stack: int, stacks: int) -> int:
    """Instances on the most loaded stack when instance i sits on channel i mod channels."""
    channels = channels_per_stack * stacks
    return instances // channels * channels_per_stack + min(instances % channels,
                                                            channels_per_stack)


def _kv(model: ModelSpec, requests: int, max_seq: int, place: str, system: System,
        label: str) -> Piece:
    """``requests`` requests' KV caches of ``model`` (one device's share) at ``max_seq``."""
    where = f"{label} KV cache ({requests} requests x {max_seq} tokens"
    if place == "gpu" or system.pim is None:
        return Piece(f"{where})", "gpu", requests * max_seq * model.kv_bytes_per_token)
    per_instance = max_seq * 2 * model.layers * model.head_dim * model.bpe
    n = _kv_instances_on_first_stack(requests * model.kv_heads, system.pim.channels,
                                     system.stacks_per_device)
    return Piece(f"{where}, {n} of {requests * model.kv_heads} request x KV-head instances)",
                 "stack", n * per_instance)


def pieces(system: System, pair: ModelPair, spec: SystemSpec, mapping: dict[str, str],
           shape: Shape) -> list[Piece]:
    """What one device's GPU and its most loaded stack hold (``mapping``: operator -> gpu|pim,
    the run's initial one)."""
    n = system.devices
    tlm = pair.tlm.shard(n)
    out = [Piece(f"TLM weights ({pair.tlm.name}, 1/{n})", "gpu", tlm.stored_bytes),
           _kv(tlm, shape.batch, shape.max_seq, mapping["tlm_attention"], system, "TLM")]
    if spec.speculative:
        dlm, stacks = pair.dlm, max(1, system.stacks_per_device)
        fc = ("gpu", "pim") if spec.mapping == "dynamic" else (mapping["dlm_fc"],)
        if "gpu" in fc or system.pim is None:
            out.append(Piece(f"DLM weights ({dlm.name}, a copy per device)", "gpu", dlm.stored_bytes))
        if "pim" in fc and system.pim is not None:
            out.append(Piece(f"DLM weights ({dlm.name}, 1/{stacks} of a copy per device)", "stack",
                             -(-dlm.stored_bytes // stacks)))
        out.append(_kv(dlm, -(-shape.batch // n), shape.max_seq, mapping["dlm_attention"], system,
                       "DLM"))
    widest = max(k + nn for _, k, nn, _ in tlm.fc_shapes())
    act = shape.pass_tokens * (tlm.hidden + widest) * tlm.bpe
    if mapping["tlm_attention"] == "gpu" and system.gpu.unfused_attention:
        act += shape.pass_tokens * tlm.heads * shape.max_seq * tlm.bpe
    out.append(Piece(f"activations (a TLM pass of {shape.pass_tokens} tokens)", "gpu", act))
    return out


def overflow(system: System, pair: ModelPair, spec: SystemSpec, mapping: dict[str, str],
             shape: Shape) -> str | None:
    """None when everything fits, else what does not: needed against available, which device,
    which pieces."""
    parts = pieces(system, pair, spec, mapping, shape)
    capacity = {"gpu": (system.gpu.memory_bytes, f"GPU ({system.gpu.name}, memory_gb)"),
                "stack": (system.pim.capacity_bytes if system.pim else 0,
                          f"PIM stack ({system.pim.name if system.pim else '-'}, capacity_gb)")}
    over = []
    for device, (available, name) in capacity.items():
        mine = [p for p in parts if p.device == device]
        need = sum(p.bytes for p in mine)
        if need > available:
            listed = ", ".join(f"{p.what} {p.bytes / GIB:.2f}" for p in mine)
            over.append(f"each {name} of {system.name} needs {need / GIB:.2f} GiB, has "
                        f"{available / GIB:.2f} GiB: {listed}")
    return "; ".join(over) or None


def largest_batch(system: System, pair: ModelPair, spec: SystemSpec, mapping: dict[str, str],
                  shape: Shape) -> int:
    """The largest batch below ``shape.batch`` that fits (0 if none), the pass growing with it."""
    per_request = shape.pass_tokens / shape.batch
    fits = lambda b: overflow(system, pair, spec, mapping,
                              Shape(b, shape.max_seq, max(1, round(per_request * b)))) is None
    low, high = 0, shape.batch      # fits(low) or low == 0; not fits(high)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return low


def check_memory(system: System, pair: ModelPair, spec: SystemSpec, mapping: dict[str, str],
                 shape: Shape, where: str, mode: str = "error", name: str = "") -> str | None:
    """A ``ConfigError`` naming ``where`` and the run (``name``, default the system's) when it
    does not fit (``mode`` ``error``), or the message (``warn``: the run is simulated as if the
    memory were larger); None when it fits."""
    found = overflow(system, pair, spec, mapping, shape)
    if found is None:
        return None
    best = largest_batch(system, pair, spec, mapping, shape)
    message = (f"{where}: {name or spec.name} on {pair.name} at batch {shape.batch} and sequence length "
               f"{shape.max_seq} does not fit in memory: {found}; "
               + (f"the largest batch that fits is {best}" if best else "no batch fits"))
    if mode == "error":
        raise ConfigError(message + " (memory_check: warn simulates it anyway, with a warning)")
    return message
