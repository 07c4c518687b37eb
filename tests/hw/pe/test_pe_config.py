"""configs/hardware/bank_pe.yaml, the RTL and the PIM cost model agree: lanes and column size
from the PE's ports, latencies measured in simulation of the shipped PE."""
from hw.flow.pe_replay import run_program
from hw.flow.testbench.pe_vectors import Command, h
from hw.pe.bank_pe import BankPE
from hw.pe.reference import Mode, Op, load_params
from sim.cost.pim import load_pim


def test_ports_match_lanes_and_column_size():
    params = load_params()
    pe = BankPE(params.lanes)
    row = pe.cmd.payload.row
    assert len(row) == params.lanes == params.macs_per_column
    assert len(row.as_value()) // 8 == params.column_bytes  # one column of the row buffer
    assert len(pe.out.payload.fp32) == params.lanes


def test_latencies_measured_in_simulation():
    params = load_params()
    lanes = params.lanes
    one = (h(1.0),) * lanes
    # MAC at cycle 1, then the earliest DRAIN (cycle 2) and one more.
    program = [Command(Op.START, Mode.DOT), Command(Op.MAC, row=one, operand=one),
               Command(Op.DRAIN), Command(Op.DRAIN)]
    seen = run_program(program, lanes)
    first = min(seen)
    drain_latency = first - 2
    assert drain_latency == params.drain_latency_cycles == BankPE.DRAIN_LATENCY
    assert sorted(seen) == [first, first + 1]  # one command per cycle, in order
    assert seen[first][0][0] == 0x41800000  # 16.0: the MAC of cycle 1 is already in
    pipeline_latency = first - 1
    assert pipeline_latency == params.pipeline_latency_cycles == BankPE.PIPELINE_LATENCY
    assert params.command_interval_cycles == 1


def test_cost_model_reads_the_same_parameters():
    """The PIM model takes lanes and column size from the same file, and its PE latency (last
    MAC to result) is the RTL's measured one."""
    params, pim = load_params(), load_pim()
    assert (pim.lanes, pim.column_bytes) == (params.lanes, params.column_bytes)
    assert pim.pe_latency == params.pipeline_latency_cycles
