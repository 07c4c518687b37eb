"""Every Manager block exports to Verilog that `verilator --lint-only` accepts (small
instances; `saddle hw export` does the shipped sizes), and the shipped factories are sized by
configs/manager.yaml."""
from __future__ import annotations

import pytest

from hw.flow.blocks import BLOCKS
from hw.flow.export import lint, write_verilog
from hw.manager.controller import Controller
from hw.manager.eager_pool import EagerPools
from hw.manager.manager import Manager
from hw.manager.scheduler import Scheduler
from hw.manager.shared_pool import SharedPool
from hw.manager.softmax import Softmax
from sim.manager.config import ManagerConfig
from tests.hw.manager.test_manager import SMALL, SOFTMAX

SMALL_BLOCKS = {
    "softmax": lambda: Softmax(SOFTMAX),
    "controller": lambda: Controller(8, SOFTMAX),
    "shared_pool": lambda: SharedPool(16, 8),
    "eager_pool": lambda: EagerPools(3, 12, 8),
    "scheduler": lambda: Scheduler(8, 64),
    "manager": lambda: Manager.from_config(SMALL, SOFTMAX),
    # The pools' SRAM storage: the selector without payload ports, the macros' memories.
    "manager_sram": lambda: Manager.from_config(SMALL, SOFTMAX, storage="sram", selector_stage_levels=1),
}


@pytest.mark.parametrize("name", sorted(SMALL_BLOCKS))
def test_small_block_exports_lint_clean(name, tmp_path):
    path = write_verilog(SMALL_BLOCKS[name](), f"mgr_{name}", tmp_path)
    result = lint(path, f"mgr_{name}")
    assert result.ok, result.messages


def test_shipped_blocks_are_registered_at_the_configured_size():
    config = ManagerConfig.load()
    for name in SMALL_BLOCKS:
        assert name in BLOCKS
    pool, eager, top = (BLOCKS[name]() for name in ("shared_pool", "eager_pool", "manager"))
    for block in (pool, eager, top):
        block._MustUse__silence = True          # constructed for their sizes only
    assert (pool.entries, pool.requests) == (config.shared_entries, config.max_requests)
    assert (eager.pools, eager.entries) == (config.micro_batches, config.eager_entries)
    assert (top.requests, top.shared_entries, top.eager_entries, top.micro_batches) == \
        (config.max_requests, config.shared_entries, config.eager_entries, config.micro_batches)
