"""cocotb testbench parts for the exported Verilog on Verilator (hw/flow/verilator_runner.py
runs them)."""
