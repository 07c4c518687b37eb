"""Testbench parts: cocotb coroutines for the exported Verilog on Verilator
(hw/flow/verilator_runner.py runs them) and the bank PE's golden programs (pe_vectors.py)."""
