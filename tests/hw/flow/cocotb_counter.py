"""cocotb side of tests/hw/flow/test_verilator_runner.py: an accumulator adds `d` while `en` is high."""
import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge


@cocotb.test()
async def accumulates(dut):
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    dut.en.value = 0
    dut.d.value = 0
    await RisingEdge(dut.clk)
    dut.rst.value = 0
    dut.en.value = 1
    dut.d.value = 3
    for _ in range(4):
        await RisingEdge(dut.clk)
    await ReadOnly()
    # 4 edges with en high add 3 four times; EXPECT lets the pytest side check that a wrong
    # expectation is reported as a failure.
    expect = int(os.environ.get("EXPECT", "12"))
    assert int(dut.q.value) == expect, f"q = {int(dut.q.value)}, expected {expect}"
