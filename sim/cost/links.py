"""Interconnect: ring all-reduce for tensor parallelism, GPU <-> PIM transfers inside a device,
device <-> device transfers, and the partial sums a split GEMV sends back to the GPU."""
from __future__ import annotations

import math
from dataclasses import dataclass

from common.config import config_path, get
from common.errors import ConfigError
from sim.config import BASE, Configs, calibrated, loader


@dataclass(frozen=True)
class Link:
    name: str
    bandwidth: float          # bytes/s per direction
    efficiency: float
    latency_ps: int           # per ring step (nvlink) or per transfer (gpu_pim)
    energy_pj_per_byte: float
    steps_per_peer: int = 2   # all-reduce steps per other device: 2 = ring (reduce-scatter
                              # then all-gather), 1 = AttAcc's fit of measured A100 all-reduces
    overlap_attention: bool = False   # GPU <-> PIM transfers pipelined with attention's heads

    def transfer_ps(self, nbytes: int) -> int:
        """One point-to-point transfer of ``nbytes`` (0 bytes costs nothing)."""
        if nbytes <= 0:
            return 0
        return self.latency_ps + math.ceil(nbytes / (self.bandwidth * self.efficiency) * 1e12)

    def allreduce_ps(self, nbytes: int, devices: int) -> int:
        """All-reduce of an ``nbytes`` buffer over ``devices``: ``steps_per_peer`` x (p-1) steps
        (a ring: reduce-scatter then all-gather), each sending nbytes/p to the next device."""
        if devices <= 1 or nbytes <= 0:
            return 0
        return self.steps_per_peer * (devices - 1) * self.transfer_ps(-(-nbytes // devices))

    @staticmethod
    def allreduce_bytes_sent(nbytes: int, devices: int) -> int:
        """Bytes each device sends in a ring all-reduce."""
        return 0 if devices <= 1 else 2 * (devices - 1) * -(-nbytes // devices)


@loader
def load_link(name: str, file: str = "links", calibration: str = "physical", *,
              configs: Configs = BASE) -> Link:
    """The link ``name`` of ``configs/hardware/<file>.yaml`` under ``calibration``."""
    path = config_path("hardware", file)
    data = calibrated(configs.yaml(path), calibration, source=path)
    entry = get(data, name, dict, source=path)
    g = lambda k: get(entry, k, float, source=path, prefix=name, positive=True)
    latency_key = "step_latency_ns" if "step_latency_ns" in entry else "latency_ns"
    if g("efficiency") > 1:
        raise ConfigError(f"{path}: {name}.efficiency: expected a fraction in (0, 1], found {entry['efficiency']!r}")
    steps = get(entry, "allreduce_steps_per_peer", int, source=path, prefix=name, default=2)
    if steps not in (1, 2):
        raise ConfigError(f"{path}: {name}.allreduce_steps_per_peer: expected 1 or 2, found {steps!r}")
    latency = get(entry, latency_key, float, source=path, prefix=name)
    if latency < 0:
        raise ConfigError(f"{path}: {name}.{latency_key}: expected >= 0, found {latency!r}")
    return Link(name=name, bandwidth=g("bandwidth_gbps") * 1e9, efficiency=g("efficiency"),
                latency_ps=round(latency * 1000), energy_pj_per_byte=g("energy_pj_per_byte"),
                steps_per_peer=steps,
                overlap_attention=get(entry, "overlap_attention", bool, source=path, prefix=name,
                                      default=False))
