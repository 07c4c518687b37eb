"""The GPU and PIM rooflines of one device, with a pair's DLM and TLM operators placed on them.

Each operator group (all FC operators of a step, or all attention of a step) is one point per
device: x = FLOPs per byte of its memory traffic, y = FLOP/s the cost model says the device
attains on it. The side of the crossover is whichever device prices it faster.
"""
from __future__ import annotations

from pathlib import Path

from common.errors import SaddleError
from sim.cost.system import load_hardware
from sim.model import load_pair

# (requests still drafting, draft length) of the two operating points.
OPERATING_POINTS = ((4, 1), (12, 8))


def _point(label: str, flops: int, nbytes: int, gpu_ps: int, pim_ps: int) -> dict:
    return {"label": label, "flops": flops, "bytes": nbytes, "intensity": flops / nbytes,
            "gpu_ns": gpu_ps / 1000, "pim_ns": pim_ps / 1000,
            "gpu_flops_per_s": flops / gpu_ps * 1e12, "pim_flops_per_s": flops / pim_ps * 1e12,
            "faster": "gpu" if gpu_ps < pim_ps else "pim"}


def roofline_points(pair_name: str, *, system: str = "saddle", context: int | None = None) -> list[dict]:
    """Points (per device) for the DLM and TLM FC and attention at each operating point."""
    pair = load_pair(pair_name)
    sysm = load_hardware(system)
    if sysm.pim is None:
        raise SaddleError(f"{system} has no PIM; pick a system with PIM stacks")
    context = context or pair.max_sequence_length // 2
    points = []
    for drafting, d in OPERATING_POINTS:
        for role, model, q, devices in (("DLM", pair.dlm, 1, 1), ("TLM", pair.tlm, d + 1, sysm.devices)):
            reqs = [(context, q)] * drafting
            ops = model.shard(devices).step_operators(reqs)
            gpu, pim = (sysm.price_step(model, reqs, mapping={"fc": place, "attention": place},
                                        devices=devices) for place in ("gpu", "pim"))
            points.append(_point(f"{role} FC (B={drafting}, d={d})",
                                 sum(op.flops * op.repeat for op in ops.fc),
                                 sum(op.bytes_total * op.repeat for op in ops.fc),
                                 gpu.fc_ps, pim.fc_ps))
            points.append(_point(f"{role} attention (B={drafting}, d={d})",
                                 sum(op.flops * op.repeat for op in ops.attention),
                                 sum(op.streamed_bytes * op.repeat for op in ops.attention),
                                 gpu.attention_ps, pim.attention_ps))
    return points


def plot_roofline(pair_name: str, out: str | Path, *, system: str = "saddle",
                  context: int | None = None) -> list[dict]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    points = roofline_points(pair_name, system=system, context=context)
    sysm = load_hardware(system)
    gpu, pim, stacks = sysm.gpu, sysm.pim, sysm.stacks_per_device
    assert pim is not None      # roofline_points checked it
    x = np.logspace(-1, 3, 200)
    fig, ax = plt.subplots(figsize=(11, 5.5))
    ax.loglog(x, np.minimum(gpu.sustained_flops, x * gpu.sustained_bandwidth), "C0-",
              label=f"GPU ({gpu.name}, sustained)")
    for power, style in ((False, "-"), (True, "--")):
        ax.loglog(x, np.minimum(pim.peak_flops(power) * stacks,
                                x * (pim.peak_bandwidth(power) * stacks)), "C3" + style,
                  label=f"PIM ({stacks} x {pim.name}{', power-constrained' if power else ''})")
    for i, p in enumerate(points):
        colour = f"C{(i + 4) % 10}"
        ax.plot(p["intensity"], p["gpu_flops_per_s"], "o", color=colour,
                label=f"{i + 1}: {p['label']} -> {p['faster'].upper()}")
        ax.plot(p["intensity"], p["pim_flops_per_s"], "s", color=colour, mfc="none")
        for y in (p["gpu_flops_per_s"], p["pim_flops_per_s"]):
            ax.annotate(str(i + 1), (p["intensity"], y), textcoords="offset points",
                        xytext=(4, -3), fontsize=7, color=colour)
    ax.set_xlabel("arithmetic intensity (FLOP / byte of memory traffic)")
    ax.set_ylabel("attained FLOP/s (one device)")
    ax.set_title(f"{pair_name} on {system}: o = GPU, \u25a1 = PIM")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.grid(True, which="both", alpha=0.3)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return points
