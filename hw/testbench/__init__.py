"""cocotb testbench parts for the exported Verilog on Verilator (hw/verilator.py runs them)."""
