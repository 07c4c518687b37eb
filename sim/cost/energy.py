"""Energy per operator from per-byte and per-MAC figures, with static power as a separate
term. Energies in pJ."""
from __future__ import annotations

from dataclasses import dataclass

from common.config import config_path, get
from sim.config import BASE, Configs, calibrated, loader
from sim.model import choice

COMPONENTS = ("gpu_dram", "gpu_onchip", "gpu_mac", "pim_bank", "pim_mac", "link", "static")


@dataclass(frozen=True)
class EnergyModel:
    gpu_dram_pj_per_byte: float
    l2_pj_per_byte: float
    l1_pj_per_byte: float
    pim_bank_read_pj_per_byte: float
    mac_pj: float
    gpu_static_w: float
    pim_stack_static_w: float
    register_pj: float = 0.0
    tiled_onchip: bool = False

    def gpu_traffic_pj(self, flops: int, nbytes: int, l2: int | None = None, l1: int = 0,
                       registers: int = 0) -> tuple[float, float, float]:
        """(DRAM, on chip, MAC) energies of a GPU kernel: FLOPs/2 MACs and its DRAM bytes; on
        chip, every DRAM byte passes L2 and L1 once, or (``tiled_onchip``) the kernel's own L2
        and L1 traffic and register accesses (``l2`` None: not known)."""
        if l2 is not None and self.tiled_onchip:
            onchip = l2 * self.l2_pj_per_byte + l1 * self.l1_pj_per_byte + registers * self.register_pj
        else:
            onchip = nbytes * (self.l2_pj_per_byte + self.l1_pj_per_byte)
        return nbytes * self.gpu_dram_pj_per_byte, onchip, flops / 2 * self.mac_pj

    def pim_pj(self, column_reads: int, column_bytes: int, lanes: int) -> tuple[float, float]:
        """(bank, MAC) energies of bank PEs: every MAC command reads one column in each bank
        and does ``lanes`` MACs."""
        return (column_reads * column_bytes * self.pim_bank_read_pj_per_byte,
                column_reads * lanes * self.mac_pj)

    def static(self, time_ps: int, gpus: int, stacks: int) -> float:
        """W x ps = 1 pJ per W ps."""
        return time_ps * self.static_w(gpus, stacks)

    def static_w(self, gpus: int, stacks: int) -> float:
        """Static power of ``gpus`` GPUs and ``stacks`` PIM stacks."""
        return gpus * self.gpu_static_w + stacks * self.pim_stack_static_w


@loader
def load_energy(name: str = "energy", calibration: str = "physical", *,
                configs: Configs = BASE) -> EnergyModel:
    path = config_path("hardware", name)
    data = calibrated(configs.yaml(path), calibration, source=path)
    dyn = get(data, "dynamic", dict, source=path)
    st = get(data, "static", dict, source=path)
    d = lambda k: get(dyn, k, float, source=path, prefix="dynamic", positive=True)
    s = lambda k: get(st, k, float, source=path, prefix="static", positive=True)
    onchip = choice(data, "gpu_onchip", ("streamed", "tiled"), path, default="streamed")
    return EnergyModel(d("gpu_dram_pj_per_byte"), d("l2_pj_per_byte"), d("l1_pj_per_byte"),
                       d("pim_bank_read_pj_per_byte"), d("fp16_mac_pj"), s("gpu_w"), s("pim_stack_w"),
                       register_pj=d("register_pj_per_access"), tiled_onchip=onchip == "tiled")
