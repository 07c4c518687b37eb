"""Speed of the trace tools on a trace of 1024 requests x 1024 output tokens (OPT-66B pair
parameters, max_seq_len raised to 2048 so every prompt fits): generating (synthesize + write
gzip) and reading back with full validation. Budget: under 5 s each. Also the stats time.

    .venv/bin/python benchmarks/bench_traces.py [--requests N] [--tokens N] [--keep FILE]
"""
from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

from traces.io import read_trace, write_trace
from traces.stats import trace_stats
from traces.synth import load_params, synthesize

BUDGET_S = 5.0
PAIR = "opt-66b+opt-1.3b"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1024)
    parser.add_argument("--tokens", type=int, default=1024, help="output tokens per request")
    parser.add_argument("--keep", type=Path, help="keep the generated trace at this path")
    args = parser.parse_args()

    params = dataclasses.replace(load_params(PAIR), max_seq_len=2 * args.tokens)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "bench.jsonl.gz"
        c0, t0 = time.process_time(), time.perf_counter()
        header, requests = synthesize(params, {"bench": args.requests}, seed=1,
                                      output_len=args.tokens)
        t1 = time.perf_counter()
        write_trace(path, header, requests)
        c2, t2 = time.process_time(), time.perf_counter()
        size = path.stat().st_size
        del requests
        c3, t3 = time.process_time(), time.perf_counter()
        _, back = read_trace(path)
        c4, t4 = time.process_time(), time.perf_counter()
        trace_stats(header, back)
        t5 = time.perf_counter()
    positions = args.requests * args.tokens
    offpath = sum(len(o) for r in back for o in r.offpath)
    generate, read = t2 - t0, t4 - t3
    print(f"trace: {args.requests} requests x {args.tokens} output tokens = {positions} positions, "
          f"{offpath} off-path values, {size / 1e6:.1f} MB gzip")
    # CPU time says what the code costs when other jobs share the cores; the budget is wall time.
    print(f"generate: {generate:.2f} s wall, {c2 - c0:.2f} s CPU (synthesize {t1 - t0:.2f} s + "
          f"write {t2 - t1:.2f} s)  budget {BUDGET_S:.0f} s  {'OK' if generate < BUDGET_S else 'OVER'}")
    print(f"read:     {read:.2f} s wall, {c4 - c3:.2f} s CPU (gunzip + parse + validate)"
          f"  budget {BUDGET_S:.0f} s  {'OK' if read < BUDGET_S else 'OVER'}")
    print(f"stats:    {t5 - t4:.2f} s (fixed-d d = 2, 4, 8, 12; per-round; reliability)")
    return 0 if generate < BUDGET_S and read < BUDGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
