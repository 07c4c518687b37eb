"""A100 roofline against hand computation, wave quantization, physical bounds."""
import math
import random

from sim.cost.gpu import load_gpu
from sim.model import FC, load_model
from tests.sim.cost.gpu_attention import attention_ps

A100 = load_gpu("a100")
PEAK, BW = 312e12, 2039e9                      # configs/hardware/a100.yaml
CE, ME = 0.8, 0.85


def test_config_values():
    assert (A100.peak_flops, A100.bandwidth, A100.sms) == (PEAK, BW, 108)


def test_gemv_is_memory_bound_by_hand():
    op = FC("x", 1, tokens=1, k=8192, n=8192, bpe=2)
    nbytes = (8192 * 8192 + 8192 + 8192) * 2          # 134_250_496
    assert op.bytes_total == 134_250_496
    # memory: 134_250_496 B / (2039 GB/s x 0.85) = 77.460 us
    assert A100.fc_kernel(op).ps == math.ceil(nbytes / (BW * ME) * 1e12) == 77_460_403


def test_large_gemm_is_compute_bound_with_wave_quantization_by_hand():
    op = FC("x", 1, tokens=4096, k=8192, n=8192, bpe=2)
    # tiles: 4096/64 x 8192/128 = 64 x 64 = 4096 -> ceil(4096/108) = 38 waves of 108
    factor = 38 * 108 / 4096
    compute = 2 * 4096 * 8192 * 8192 / (PEAK * CE) * factor
    assert A100.fc_kernel(op).ps == math.ceil(compute * 1e12)
    assert A100.fc_kernel(op).ps > op.flops / (PEAK * CE) * 1e12


def test_split_k_fills_the_sms_for_decoding_gemms():
    # 64 tokens x n = 3456: 1 x 27 output tiles; split-K 4 (108 // 27) -> 108 tiles, one full wave
    assert A100.gemm_tiles(64, 3456, 9216) == 108
    assert A100.wave_factor(108) == 1.0
    # a 1 x 1 output tile cannot be split below tile_k: k = 300 -> one split, 108x quantization
    assert A100.gemm_tiles(1, 1, 300) == 1 and A100.wave_factor(1) == 108


def test_attention_kernel_by_hand():
    ops = load_model("opt-66b").shard(8).attention_ops(1024, 1)
    # one request: 9 heads x 1024 x 128 for K and for V, plus Q and O (9 x 128 each), FP16
    nbytes = (2 * 9 * 1024 * 128 + 2 * 9 * 128) * 2
    assert attention_ps(A100, ops) == math.ceil(nbytes / (BW * ME) * 1e12)


def test_no_operator_beats_peak_compute_or_bandwidth():
    rng = random.Random(7)
    for _ in range(300):
        op = FC("x", 1, rng.randint(1, 4096), rng.randint(16, 20000), rng.randint(16, 60000), 2)
        ps = A100.fc_kernel(op).ps
        assert ps >= op.flops / PEAK * 1e12
        assert ps >= op.bytes_total / BW * 1e12
    for L, q in [(1, 1), (128, 9), (2048, 16), (4000, 1)]:
        for model in ("llama-3.1-70b", "opt-175b"):
            ops = load_model(model).attention_ops(L, q)
            ps = attention_ps(A100, ops)
            assert ps >= sum(o.flops for o in ops) / PEAK * 1e12
            assert ps >= sum(o.streamed_bytes for o in ops) / BW * 1e12


def test_compute_bound_flag_by_hand():
    import dataclasses
    assert not A100.fc_kernel(FC("x", 1, tokens=1, k=8192, n=8192, bpe=2)).compute_bound
    assert A100.fc_kernel(FC("x", 1, tokens=4096, k=8192, n=8192, bpe=2)).compute_bound
    # A toy GPU, 16 FLOP per byte, whose tiling of an m x 64 x 64 GEMM fills every wave: compute
    # 2 * m * 64 * 64 / 16 = 512 m byte-times against memory 2 * (64 * 64 + 2 * 64 m) = 8192 + 256 m;
    # equal at m = 32 (not compute-bound: the kernel is no slower than streaming), above from 33.
    toy = dataclasses.replace(A100, peak_flops=16e10, bandwidth=1e10, compute_efficiency=1.0,
                              memory_efficiency=1.0, sms=4, tile_m=16, tile_n=16, tile_k=16,
                              max_split_k=1, launch_ps=0)
    assert toy.kernel_terms(2 * 32 * 64 * 64, 2 * (64 * 64 + 2 * 64 * 32), 8) == (16384e-10, 16384e-10)
    flags = {m: toy.fc_kernel(FC("x", 1, tokens=m, k=64, n=64, bpe=2)).compute_bound for m in (31, 32, 33)}
    assert flags == {31: False, 32: False, 33: True}


def _l2_blocked_bytes_every_block(gpu, m, n, k, bpe, tm, tn):
    """The reference: every blocking in multiples of the L1 tile tried (the search before the
    bisection over widths)."""
    kk = k / gpu.l2_k_slices
    best = None
    for bm in [tm * i for i in range(1, m // tm + 1)] + [m]:
        for bn in [tn * i for i in range(1, n // tn + 1)] + [n]:
            if (bm + bn) * kk * bpe + bm * bn * bpe > gpu.l2_bytes and (bm, bn) != (tm, tn):
                continue
            traffic = (-(-n // bn) * m * k + -(-m // bm) * n * k + m * n) * bpe
            best = traffic if best is None else min(best, traffic)
    return best


def _searched_tile_every_candidate(gpu, m, n, k, bpe):
    """The reference: every pair of candidates tried, repeats included."""
    best = None
    for cm in gpu.tile_candidates:
        for cn in gpu.tile_candidates:
            tm, tn = min(cm, m), min(cn, n)
            if (tm + tn) * gpu.l1_tile_k * bpe + tm * tn * bpe > gpu.l1_bytes:
                continue
            blocks = -(-m // tm) * -(-n // tn)
            cost = (-(-n // tn) * m * k + -(-m // tm) * n * k + m * n) * bpe * gpu.wave_factor(blocks) ** 2
            if best is None or cost < best[0]:
                best = (cost, tm, tn, blocks)
    return best[1:]


def test_tile_search_and_l2_blocking_equal_trying_every_candidate():
    """Shapes of the paper's models' FC layers on 1 and 8 devices at decoding and verification
    token counts, and random ones, under the attacc calibration (the one that blocks for L2)."""
    gpu = load_gpu("a100", "attacc")
    rng = random.Random(4)
    shapes = [(m, n, k) for m in (1, 16, 129, 1152, 4100) for n, k in
              ((27648, 9216), (9216, 36864), (1152, 1024), (50272, 2048), (3456, 1152))]
    shapes += [(rng.randint(1, 5000), rng.randint(1, 60000), rng.randint(1, 40000)) for _ in range(40)]
    for m, n, k in shapes:
        tm, tn, blocks = gpu.searched_tile(m, n, k, 2)
        assert (tm, tn, blocks) == _searched_tile_every_candidate(gpu, m, n, k, 2), (m, n, k)
        assert gpu.l2_blocked_bytes(m, n, k, 2, tm, tn) == \
            _l2_blocked_bytes_every_block(gpu, m, n, k, 2, tm, tn), (m, n, k)
