"""A reference for the GPU attention placements' prices: the three attention phases of a
request, or of many (array-valued ``sim.model.Attention``), timed as ``sim.cost.gpu.GPU``'s
kernels directly."""
import numpy as np

from sim.cost.gpu import GPU


def attention_ps(gpu: GPU, ops) -> int:
    """One fused (flash-decoding) kernel moving K, V, Q and the output, of
    ``tiles_per_kv_head`` tiles per KV head; or, ``unfused_attention``, each phase its own
    kernel of ``unfused_blocks`` thread blocks, reading and writing its operands and
    intermediates."""
    ops = list(ops)
    (scores,) = [op for op in ops if op.name == "scores"]
    query_rows = scores.queries * scores.group
    if gpu.unfused_attention:
        blocks = int(np.sum(gpu.unfused_blocks(scores.kv_heads, query_rows)))
        return sum(gpu.kernel_ps(int(np.sum(op.flops)), int(np.sum(op.bytes_total)), blocks)
                   for op in ops) if blocks else 0
    tiles = int(np.sum(scores.kv_heads * gpu.tiles_per_kv_head(scores.context, query_rows)))
    return gpu.fused_attention_ps(sum(int(np.sum(op.flops)) for op in ops),
                                  sum(int(np.sum(op.streamed_bytes)) for op in ops), tiles)
