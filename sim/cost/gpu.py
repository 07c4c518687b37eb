"""A100 roofline: time = max(compute, memory) with sustained-efficiency factors, and the
compute side stretched by wave quantization: a kernel of ``tiles`` thread-block tiles runs in
ceil(tiles / SMs) waves, and a partly filled last wave still takes a whole wave's time."""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable

import numpy as np

from sim.config import config_path, get, load_yaml
from sim.errors import ConfigError
from sim.model import FC, Attention


@dataclass(frozen=True)
class GPU:
    name: str
    peak_flops: float        # FLOP/s
    bandwidth: float         # bytes/s
    memory_bytes: int
    sms: int
    compute_efficiency: float
    memory_efficiency: float
    tile_m: int
    tile_n: int
    tile_k: int
    max_split_k: int
    launch_ps: int

    @property
    def sustained_flops(self) -> float:
        return self.peak_flops * self.compute_efficiency

    @property
    def sustained_bandwidth(self) -> float:
        return self.bandwidth * self.memory_efficiency

    def wave_factor(self, tiles: int) -> float:
        """Slowdown of the compute side from the partly empty last wave (1.0 when full)."""
        return math.ceil(tiles / self.sms) * self.sms / tiles

    def kernel_ps(self, flops: int, nbytes: int, tiles: int) -> int:
        compute = flops / self.sustained_flops * self.wave_factor(tiles)
        memory = nbytes / self.sustained_bandwidth
        return self.launch_ps + math.ceil(max(compute, memory) * 1e12)

    def gemm_tiles(self, m: int, n: int, k: int) -> int:
        """Output tiles, times the split-K factor a GEMM library picks to fill the SMs when
        the output alone has too few tiles (each split keeps at least ``tile_k`` of k)."""
        tiles = -(-m // self.tile_m) * -(-n // self.tile_n)
        split = max(1, min(self.max_split_k, self.sms // tiles, k // self.tile_k))
        return tiles * split

    @lru_cache(maxsize=65536)
    def fc_ps(self, op: FC) -> int:
        """One FC operator as one GEMM kernel (output tiles over tokens x n)."""
        return self.kernel_ps(op.flops, op.bytes_total, self.gemm_tiles(op.tokens, op.n, op.k))

    def attention_ps(self, ops: Iterable[Attention]) -> int:
        """All the given attention phases (scalar or array-valued, see ``Attention``) as one
        fused (flash-decoding) kernel: DRAM traffic is K, V, Q and the output; one tile per
        (request, KV head, block of query rows, block of keys), query rows being query tokens x
        query heads sharing the KV head."""
        flops = nbytes = tiles = 0
        for op in ops:
            flops += int(np.sum(op.flops))
            nbytes += int(np.sum(op.streamed_bytes))
            if op.name == "scores":
                tiles += self.attention_tiles(op.context, op.queries, op.kv_heads, op.group)
        return self.fused_attention_ps(flops, nbytes, tiles)

    def attention_tiles(self, contexts, queries, kv_heads: int, group: int) -> int:
        """Tiles of the fused attention kernel over requests with these contexts and query
        tokens (integers or equal-length integer arrays)."""
        return int(np.sum(kv_heads * self.tiles_per_kv_head(contexts, queries * group)))

    def tiles_per_kv_head(self, context, query_rows):
        """Tiles of one request's KV head: blocks of query rows x blocks of keys (integers or
        arrays)."""
        return -(-query_rows // self.tile_m) * -(-context // self.tile_n)

    def fused_attention_ps(self, flops: int, nbytes: int, tiles: int) -> int:
        return self.kernel_ps(flops, nbytes, tiles) if tiles else 0

    def elementwise_ps(self, flops: int, nbytes: int) -> int:
        """Memory-bound streaming kernels: enough blocks to fill every SM."""
        return self.kernel_ps(flops, nbytes, self.sms)


@lru_cache(maxsize=None)
def load_gpu(name: str = "a100") -> GPU:
    path = config_path("hardware", name)
    data = load_yaml(path)
    g = lambda k, kind=float: get(data, k, kind, source=path, positive=True)
    for key in ("compute_efficiency", "memory_efficiency"):
        if g(key) > 1:
            raise ConfigError(f"{path}: {key}: expected a fraction in (0, 1], found {data[key]!r}")
    return GPU(name=name, peak_flops=g("peak_flops_tflops") * 1e12,
               bandwidth=g("memory_bandwidth_gbps") * 1e9,
               memory_bytes=int(g("memory_gb") * 2**30), sms=g("sms", int),
               compute_efficiency=g("compute_efficiency"), memory_efficiency=g("memory_efficiency"),
               tile_m=g("tile_m", int), tile_n=g("tile_n", int),
               tile_k=g("tile_k", int), max_split_k=g("max_split_k", int),
               launch_ps=round(get(data, "kernel_launch_ns", float, source=path) * 1000))
