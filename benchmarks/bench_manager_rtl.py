"""Cycle costs of the Manager RTL, measured in Amaranth's simulator on a seeded random sequence
(the reduced CI configuration), and the simulator's speed.

    .venv/bin/python benchmarks/bench_manager_rtl.py [--txns N] [--seed S]

Prints, per transaction kind, the cycles it occupies the Manager (cmd transfer to DONE transfer,
no back-pressure), the Issue cost per selected token, and transactions per second simulated.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict

from common.paths import ROOT
from hw.flow.manager_random import generate_with_events

sys.path.insert(0, str(ROOT))     # the RTL test benches live in tests/ (a package)
from tests.hw.manager.test_manager import SMALL, replay  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--txns", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    pairs, _ = generate_with_events(SMALL, args.seed, args.txns)
    started = time.perf_counter()
    cycles = replay(SMALL, pairs, "bench_manager")
    elapsed = time.perf_counter() - started
    by_kind = defaultdict(list)
    issue_overhead = set()
    for kind, n, tokens in cycles:
        by_kind[kind].append(n)
        if kind == "VerifyIssue" and tokens:
            issue_overhead.add(n - tokens)
    print(f"Manager RTL, {SMALL.max_requests} requests, {SMALL.shared_entries}-entry Shared Pool, "
          f"{SMALL.eager_entries} eager entries / {SMALL.micro_batches} pools; seed {args.seed}")
    print(f"{'transaction':<16}{'count':>7}{'min':>6}{'mean':>8}{'max':>6}  cycles")
    for kind in sorted(by_kind):
        v = by_kind[kind]
        print(f"{kind:<16}{len(v):>7}{min(v):>6}{statistics.mean(v):>8.2f}{max(v):>6}")
    print(f"Issue of k tokens: k + {sorted(issue_overhead)} cycles (one selected token per cycle)")
    total = sum(n for _, n, _ in cycles)
    print(f"{len(cycles)} transactions, {total} cycles in {elapsed:.1f} s: "
          f"{len(cycles) / elapsed:.0f} transactions/s, {total / elapsed:.0f} cycles/s (Amaranth simulator)")


if __name__ == "__main__":
    main()
