"""The exported bank PE Verilog on Verilator (cocotb) against the bit-exact model: corner cases,
random back-to-back accumulations in both modes, and long accumulations."""
from pathlib import Path

import pytest

from hw.pe.bank_pe import BankPE
from hw.pe.reference import load_params

BENCH = Path(__file__).with_name("cocotb_pe.py")


@pytest.mark.slow
def test_shipped_pe_on_verilator_matches_model(verilator_design):
    lanes = load_params().lanes
    design = verilator_design(f"bank_pe_l{lanes}", lambda: BankPE(lanes))
    design.run(BENCH, env={"SADDLE_PE_LANES": str(lanes), "SADDLE_SEED": "11",
                           "SADDLE_PE_RANDOM": "300", "SADDLE_PE_LONG": "2000"})
