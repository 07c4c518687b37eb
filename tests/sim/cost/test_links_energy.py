"""Links and energy against hand computation."""
import math

import pytest

from sim.cost.energy import load_energy
from sim.cost.links import Link, load_link


def test_ring_allreduce_by_hand():
    nv = load_link("nvlink")
    nbytes = 1 << 20                       # 1 MiB over 8 GPUs: 14 steps of 131072 B
    step = 700_000 + math.ceil(131072 / (300e9 * 0.8) * 1e12)
    assert nv.allreduce_ps(nbytes, 8) == 14 * step
    assert nv.allreduce_ps(nbytes, 1) == 0
    assert Link.allreduce_bytes_sent(nbytes, 8) == 14 * 131072


def test_gpu_pim_transfer_by_hand():
    link = load_link("gpu_pim")
    assert link.transfer_ps(0) == 0
    assert link.transfer_ps(2_000_000) == 500_000 + math.ceil(2e6 / (2000e9 * 0.9) * 1e12)


def test_energy_figures_of_design():
    e = load_energy()
    assert e.gpu_traffic_pj(flops=2000, nbytes=100) == pytest.approx((2872.0, 100 * 3.68, 320.0))
    assert e.pim_pj(column_reads=10, column_bytes=32, lanes=16) == pytest.approx(
        (10 * 32 * 4.4, 10 * 16 * 0.32))
    # 60 W x 1 us = 60 uJ = 6e7 pJ; a PIM stack 3 W
    assert e.static(1_000_000, gpus=1, stacks=0) == pytest.approx(6e7)
    assert e.static(1_000_000, gpus=0, stacks=5) == pytest.approx(1.5e7)
