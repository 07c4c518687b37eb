"""A100 roofline: time = max(compute, memory) with sustained-efficiency factors, and the
compute side stretched by wave quantization: a kernel of ``tiles`` thread-block tiles runs in
ceil(tiles / SMs) waves, and a partly filled last wave still takes a whole wave's time.

Two calibrations (``configs/hardware/a100.yaml``; sim/cost/README.md, "Calibrations"):
``physical`` (fixed GEMM tiles with split-K, one fused attention kernel, bandwidth-bound norms
and activations) and ``attacc``, the GPU model of AttAcc's simulator (GEMM tiles searched per
shape, SM utilisation limiting bandwidth too, unfused attention, fitted elementwise kernels).
"""
from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass, field
from functools import partial

from common.config import config_path, get
from common.errors import ConfigError
from sim.config import BASE, Configs, calibrated, loader
from sim.model import FC, choice


@dataclass(frozen=True)
class GPU:
    name: str
    peak_flops: float        # FLOP/s
    bandwidth: float         # bytes/s
    sms: int
    compute_efficiency: float
    memory_efficiency: float
    tile_m: int
    tile_n: int
    tile_k: int
    max_split_k: int
    launch_ps: int
    memory_bytes: int = 80 * 2**30       # HBM capacity (memory_gb)
    memory_wave: bool = False            # SM utilisation also limits achieved bandwidth
    tile_candidates: tuple[int, ...] = ()    # non-empty: GEMM tiles searched per shape
    l1_bytes: int = 0                    # per SM, bounds a searched tile
    l1_tile_k: int = 32
    l2_bytes: int = 0                    # bounds the L2 blocking of a searched GEMM
    l2_k_slices: int = 64
    register_tile: int = 16              # on-chip traffic of the tiled energy model
    unfused_attention: bool = False
    # kind -> (fixed ps, ps per byte at this GPU's bandwidth); empty: roofline kernels
    elementwise_fit: tuple[tuple[str, int, float], ...] = ()
    sustained_flops: float = field(init=False, repr=False, compare=False)
    sustained_bandwidth: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sustained_flops", self.peak_flops * self.compute_efficiency)
        object.__setattr__(self, "sustained_bandwidth", self.bandwidth * self.memory_efficiency)

    def wave_factor(self, tiles: int) -> float:
        """Slowdown of the compute side from the partly empty last wave (1.0 when full)."""
        return math.ceil(tiles / self.sms) * self.sms / tiles

    def kernel_terms(self, flops: int, nbytes: int, tiles: int) -> tuple[float, float]:
        """(compute, memory) seconds of a kernel, each stretched by wave quantization where the
        calibration says so; the kernel takes the larger."""
        sms = self.sms
        wave = math.ceil(tiles / sms) * sms / tiles      # wave_factor, inlined (hot)
        return (flops / self.sustained_flops * wave,
                nbytes / self.sustained_bandwidth * (wave if self.memory_wave else 1))

    def kernel_ps(self, flops: int, nbytes: int, tiles: int) -> int:
        return self._terms_ps(self.kernel_terms(flops, nbytes, tiles))

    def _terms_ps(self, terms: tuple[float, float]) -> int:
        return self.launch_ps + math.ceil(max(terms) * 1e12)

    def gemm_tiles(self, m: int, n: int, k: int) -> int:
        """Output tiles, times the split-K factor a GEMM library picks to fill the SMs when
        the output alone has too few tiles (each split keeps at least ``tile_k`` of k)."""
        tiles = -(-m // self.tile_m) * -(-n // self.tile_n)
        split = max(1, min(self.max_split_k, self.sms // tiles, k // self.tile_k))
        return tiles * split

    def fc_kernel(self, op: FC) -> Kernel:
        """Time and traffic of one FC operator as one GEMM kernel."""
        m, n, k, b = op.tokens, op.n, op.k, op.bpe
        if not self.tile_candidates:
            terms = self.kernel_terms(op.flops, op.bytes_total, self.gemm_tiles(m, n, k))
            return Kernel(self._terms_ps(terms), op.bytes_total, op.bytes_total, op.bytes_total, 0,
                          terms[0] > terms[1])
        tm, tn, blocks = self.searched_tile(m, n, k, b)
        dram = self.l2_blocked_bytes(m, n, k, b, tm, tn)
        terms = self.kernel_terms(op.flops, dram, blocks)
        r = self.register_tile
        return Kernel(self._terms_ps(terms), dram, _tile_bytes(m, n, k, b, tm, tn),
                      _tile_bytes(m, n, k, b, r, r), 3 * m * n * k, terms[0] > terms[1])

    def searched_tile(self, m: int, n: int, k: int, bpe: int) -> tuple[int, int, int]:
        """``(tile_m, tile_n, thread blocks)`` of a GEMM: among the candidate tiles that fit in
        L1 (A and B slices of ``l1_tile_k`` plus the output tile), the one with the least L2
        traffic divided by the square of its SM utilisation (first found on a tie)."""
        best = None
        # Each candidate clipped to the matrix once, in order: a repeat never wins a tie.
        tns = list(dict.fromkeys(min(c, n) for c in self.tile_candidates))
        sms, l1_k, l1_bytes = self.sms, self.l1_tile_k * bpe, self.l1_bytes
        for tm in dict.fromkeys(min(c, m) for c in self.tile_candidates):
            rows = -(-m // tm)
            for tn in tns:
                if (tm + tn) * l1_k + tm * tn * bpe > l1_bytes:
                    continue
                blocks = rows * -(-n // tn)
                # _tile_bytes and wave_factor inlined (hot): the same operations in order
                wave = math.ceil(blocks / sms) * sms / blocks
                cost = (-(-n // tn) * m * k + rows * n * k + m * n) * bpe * wave ** 2
                if best is None or cost < best[0]:
                    best = (cost, tm, tn, blocks)
        if best is None:
            raise ConfigError(f"{self.name}: no candidate GEMM tile fits in l1_bytes={self.l1_bytes}")
        return best[1:]

    def l2_blocked_bytes(self, m: int, n: int, k: int, bpe: int, tm: int, tn: int) -> int:
        """DRAM traffic of a GEMM blocked for L2 in multiples of its L1 tile: the blocking with
        the least traffic among those whose A and B slices (k / ``l2_k_slices`` deep) and output
        block fit in L2 (the L1 tile itself always qualifies)."""
        kk = k / self.l2_k_slices
        widths = [tn * i for i in range(1, n // tn + 1)] + [n]      # ascending
        best = _tile_bytes(m, n, k, bpe, tm, tn)
        def spills(bm: int, bn: int) -> bool:
            return (bm + bn) * kk * bpe + bm * bn * bpe > self.l2_bytes
        # Wider blocks never take less room nor move more bytes: for each height the widest
        # that fits is the best, found by bisection (``fit`` widths fit).
        for bm in [tm * i for i in range(1, m // tm + 1)] + [m]:
            fit = bisect_left(widths, True, key=partial(spills, bm))
            if fit:
                best = min(best, _tile_bytes(m, n, k, bpe, bm, widths[fit - 1]))
        return best

    def unfused_blocks(self, kv_heads: int, query_rows):
        """Thread blocks of an unfused attention kernel over one request's query rows (query
        tokens x query heads per KV head; or an array, per request): one per KV head and block
        of tile_m rows."""
        return kv_heads * -(-query_rows // self.tile_m)

    def tiles_per_kv_head(self, context, query_rows):
        """Tiles of one request's KV head: blocks of query rows x blocks of keys (integers or
        arrays)."""
        return -(-query_rows // self.tile_m) * -(-context // self.tile_n)

    def fused_attention_ps(self, flops: int, nbytes: int, tiles: int) -> int:
        return self.kernel_ps(flops, nbytes, tiles) if tiles else 0

    def elementwise_ps(self, flops: int, nbytes: int, kind: str = "") -> int:
        """Memory-bound streaming kernels: enough blocks to fill every SM; with a fit, its
        latency plus bytes at the fitted rate (``kind``: norm, activation)."""
        for name, fixed_ps, ps_per_byte in self.elementwise_fit:
            if name == kind:
                return self.launch_ps + fixed_ps + math.ceil(nbytes * ps_per_byte)
        return self.kernel_ps(flops, nbytes, self.sms)


@dataclass(frozen=True)
class Kernel:
    """One kernel's time and the bytes it moves through DRAM, L2 and L1, and its register
    accesses (operands of its multiply-adds; 0 where the energy model does not count them)."""

    ps: int
    dram: int
    l2: int
    l1: int
    registers: int
    compute_bound: bool = False    # its compute time exceeds its memory time (roofline side)


def _tile_bytes(m: int, n: int, k: int, bpe: int, tm: int, tn: int) -> int:
    """Traffic of an m x k by k x n product computed in tm x tn output tiles: A re-read once
    per column of tiles, B once per row of tiles, C written once."""
    return (-(-n // tn) * m * k + -(-m // tm) * n * k + m * n) * bpe


ELEMENTWISE_KINDS = ("norm", "activation")


@loader
def load_gpu(name: str = "a100", calibration: str = "physical", *,
             configs: Configs = BASE) -> GPU:
    """The GPU ``configs/hardware/<name>.yaml`` under ``calibration``."""
    path = config_path("hardware", name)
    data = calibrated(configs.yaml(path), calibration, source=path)
    g = lambda k, kind=float, **kw: get(data, k, kind, source=path, positive=True, **kw)
    for key in ("compute_efficiency", "memory_efficiency"):
        if g(key) > 1:
            raise ConfigError(f"{path}: {key}: expected a fraction in (0, 1], found {data[key]!r}")
    bandwidth = g("memory_bandwidth_gbps") * 1e9
    candidates: tuple[int, ...] = ()
    if choice(data, "tiling", ("fixed", "search"), path, default="fixed") == "search":
        candidates = tuple(get(data, "tile_candidates", list, source=path))
        if not candidates or not all(type(c) is int and c > 0 for c in candidates):
            raise ConfigError(f"{path}: tile_candidates: expected a list of positive integers, "
                              f"found {candidates!r}")
    attention = choice(data, "attention_kernel", ("fused", "unfused"), path, default="fused")
    fit = []
    for kind, entry in get(data, "elementwise_fit", dict, source=path, default={}).items():
        if kind not in ELEMENTWISE_KINDS:
            raise ConfigError(f"{path}: elementwise_fit.{kind}: expected one of {ELEMENTWISE_KINDS}")
        fixed, slope, reference = [
            get(entry, k, float, source=path, prefix=f"elementwise_fit.{kind}", positive=True)
            for k in ("fixed_ns", "ns_per_byte", "reference_bandwidth_gbps")]
        # The slope was measured at the reference bandwidth; bytes scale with bandwidth.
        fit.append((kind, round(fixed * 1000), slope * reference * 1e9 / bandwidth * 1000))
    counts = {k: g(k, int) for k in ("sms", "tile_m", "tile_n", "tile_k", "max_split_k")}
    counts |= {k: g(k, int, default=v)
               for k, v in (("l1_tile_k", 32), ("l2_k_slices", 64), ("register_tile", 16))}
    size = lambda k: get(data, k, float, source=path, default=0)
    return GPU(name=name, peak_flops=g("peak_flops_tflops") * 1e12, bandwidth=bandwidth,
               compute_efficiency=g("compute_efficiency"), memory_efficiency=g("memory_efficiency"),
               launch_ps=round(get(data, "kernel_launch_ns", float, source=path) * 1000),
               memory_bytes=int(g("memory_gb") * 2**30),
               memory_wave=get(data, "memory_wave_quantization", bool, source=path, default=False),
               tile_candidates=candidates, l1_bytes=round(size("l1_kb_per_sm") * 1024),
               l2_bytes=round(size("l2_mb") * 2**20), unfused_attention=attention == "unfused",
               elementwise_fit=tuple(fit), **counts)
