"""Speed of the bank PE's bit-exact model and of the PE on both RTL simulators.

    .venv/bin/python benchmarks/bench_pe.py [--rtl]

model: hw/pe/reference.accumulate over 1024 PEs (one HBM3 stack) x 64 MAC commands x 16 lanes,
       in MAC commands per second (each = 16 FP16 MACs), both modes
--rtl: also cycles per second of the 4-lane PE in Amaranth's simulator on a random program
       (the Verilator figure is in the cocotb summary of tests/hw/pe/test_pe_verilator.py)
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from hw.flow.testbench.pe_vectors import finite_fp16, random_program
from hw.pe.reference import Mode, accumulate


def bench_model() -> None:
    rng = np.random.default_rng(0)
    pes, commands, lanes = 1024, 64, 16
    rows, ops = finite_fp16(rng, (pes, commands, lanes)), finite_fp16(rng, (pes, commands, lanes))
    for mode in Mode:
        start = time.perf_counter()
        accumulate(mode, rows, ops)
        seconds = time.perf_counter() - start
        print(f"  model {mode.name:4s} {pes * commands / seconds:12.0f} MAC commands/s "
              f"({pes * commands * lanes / seconds / 1e6:.1f} M FP16 MACs/s)")


def bench_amaranth() -> None:
    from hw.flow.pe_replay import run_program

    program = random_program(1, 4, 20)
    start = time.perf_counter()
    run_program(program, 4)
    seconds = time.perf_counter() - start
    print(f"  amaranth 4-lane PE {len(program) / seconds:10.0f} cycles/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rtl", action="store_true", help="also time the Amaranth simulator")
    args = parser.parse_args()
    print("bank PE")
    bench_model()
    if args.rtl:
        bench_amaranth()


if __name__ == "__main__":
    main()
