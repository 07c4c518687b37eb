"""Speed of the Manager model: transactions per second on seeded random sequences, and the
cost of the two calls the simulator makes most (DraftToken, VerifyIssue on a full pool). CPU
time of this process (time.process_time), so a busy shared machine inflates it less.

    .venv/bin/python benchmarks/bench_manager.py
"""
from __future__ import annotations

import time

from common.paths import CONFIGS
from hw.flow.manager_random import generate_with_events
from sim.manager import Manager, ManagerConfig
from sim.manager.transactions import Admit, DraftToken, Unlock, VerifyIssue, VerifyResult


def best_of(n, fn):
    best = float("inf")
    for _ in range(n):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def replay_rate(config: ManagerConfig, seed: int, length: int) -> tuple[int, float]:
    pairs, _ = generate_with_events(config, seed, length)
    txns = [t for t, _ in pairs]

    def run():
        m = Manager(config)
        for t in txns:
            m.apply(t)
    return len(txns), best_of(3, run)


def draft_and_verify(config: ManagerConfig) -> tuple[float, float]:
    """(us per DraftToken, us per 512-token VerifyIssue+results+Unlock) with 128 requests."""
    m = Manager(config)
    for r in range(config.max_requests):
        m.apply(Admit(r, r % config.micro_batches))
    drafts = [DraftToken(r, r % config.micro_batches, 1 + k, 5, 65000 - r)
              for k in range(4) for r in range(config.max_requests)]
    t0 = time.process_time()
    for t in drafts:
        m.apply(t)
    per_draft = (time.process_time() - t0) / len(drafts)
    t0 = time.process_time()
    m.apply(VerifyIssue(True, config.shared_entries))
    for r in m.awaiting_results():
        m.apply(VerifyResult(r, len(m.shared_pool.in_flight(r)), 0))
    m.apply(Unlock())
    per_pass = time.process_time() - t0
    return per_draft * 1e6, per_pass * 1e6


def main() -> None:
    shipped = ManagerConfig.load()
    small = ManagerConfig.load(CONFIGS / "manager_small.yaml")
    for name, cfg in (("configs/manager.yaml", shipped), ("configs/manager_small.yaml", small)):
        n, secs = replay_rate(cfg, 1, 20000)
        print(f"replay {name}: {n} transactions in {secs * 1e3:.0f} ms = {n / secs / 1e3:.0f} k txn/s")
    d, v = draft_and_verify(shipped)
    print(f"DraftToken: {d:.2f} us each; a 512-token verification (issue, 128 results, unlock): {v:.0f} us")


if __name__ == "__main__":
    main()
