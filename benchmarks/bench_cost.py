"""How many decoding steps per second the cost model prices.

    .venv/bin/python benchmarks/bench_cost.py

cold:  every cache emptied before each step (operators, and a new ``PriceCache``)
new:   warm component caches, but every step is new: each request's context grows by one per
       step, as in a decoding run
seen:  every step is new, but each request's (context, queries) was priced before in another
       step (what the simulator mostly sees: many steps, contexts within the same range)
warm:  the same steps asked again (memo hits)
Workload: OPT-66B (64 layers) TLM pass on SADDLE, 64 requests with seeded random contexts,
the OPT-1.3B draft step of one device with FC on PIM (16 requests), and the commonest call of
a fig12 grid: a micro-batch's draft step with 2 requests (batch 16 over 8 devices), on the DGX.
"""
from __future__ import annotations

import random
import time

from sim.cost.step import PriceCache
from sim.cost.system import clear_caches, load_hardware
from sim.model import load_model


def measure(label: str, fn, steps: list) -> None:
    start = time.perf_counter()
    for reqs in steps:
        fn(reqs)
    seconds = time.perf_counter() - start
    print(f"  {label:5s} {len(steps) / seconds:12.0f} steps/s  {seconds / len(steps) * 1e6:9.1f} us/step")


def machine_reference() -> None:
    """A fixed pure-Python loop, so figures from a loaded (shared) machine can be scaled."""
    start = time.perf_counter()
    total = 0
    for i in range(200_000):
        total += max(i % 7, 3) * 2
    print(f"reference: 200k-iteration Python loop {1e3 * (time.perf_counter() - start):.1f} ms "
          "(compare between machines to scale the figures below)")


def main() -> int:
    machine_reference()
    system = load_hardware("saddle")
    tlm, dlm = load_model("opt-66b"), load_model("opt-1.3b")
    rng = random.Random(1)
    base = [rng.randint(64, 1024) for _ in range(64)]
    steps = [[(L + i, 1) for L in base] for i in range(400)]
    verify = [[(L + 8 * i, 9) for L in base] for i in range(400)]
    dgx = load_hardware("dgx-a100")
    # Each case prices through one PriceCache, as a run's adapter does.
    cases = [("OPT-66B decoding step, 64 requests, saddle",
              lambda r, cache: system.price_step(tlm, r, cache=cache), steps),
             ("OPT-66B verification (q = 9), 64 requests",
              lambda r, cache: system.price_verify(tlm, r, cache=cache), verify),
             ("OPT-1.3B draft step, 16 requests, FC on PIM",
              lambda r, cache: system.price_draft(dlm, r[:16], fc="pim", cache=cache), steps),
             ("OPT-1.3B draft step, 2 requests, dgx-a100",
              lambda r, cache: dgx.price_draft(dlm, r[:2], cache=cache), steps)]
    for title, price, work in cases:
        print(title)

        def cold(r, price=price):
            clear_caches()
            price(r, PriceCache())
        measure("cold", cold, work[:50])
        clear_caches()
        cache = PriceCache()
        fn = lambda r, price=price, cache=cache: price(r, cache)
        fn(work[0])
        measure("new", fn, work[1:])
        # The same request shapes, paired differently: every step new, every instance seen.
        seen = [r[1:] + r[:1] for r in work[1:]]
        measure("seen", fn, seen)
        measure("warm", fn, work[1:])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
