"""How long the engine's pricing of whole fig12 runs takes, and a digest of what it priced.

    .venv/bin/python benchmarks/bench_pricing.py [SYSTEM:PAIR:BATCH[:INDEX] ...]

Each run (default: the seven below; INDEX picks among runs of that system, pair prefix and
batch, 1 = the -best variant of gpu-sd / pim-sd) is simulated once while every call to
``CostAdapter.price``, ``CostAdapter.price_draft`` (a DLM step by its contexts) and
``CostAdapter.price_round`` (a planned draft round's steps) is recorded; the calls are then
replayed in order on a fresh adapter with every cost cache emptied, and the CPU seconds of
the replay printed: the run's pricing alone, first call to last, cold caches included. The digest is a hash of every priced field (energy to the last
bit) of every step priced, in order: equal digests from two versions of the code mean they
price the run identically (a round's steps come in the order the run asked them one by one
before ``price_round``).

Recording patches ``CostAdapter``'s methods, which a compiled class does not allow: the script
runs sim/ in pure Python (``SADDLE_PURE_PYTHON=1``, set before ``import sim``), so its figures
are the interpreted pricing's.
"""
from __future__ import annotations

import gc
import hashlib
import os
import sys
import time

os.environ["SADDLE_PURE_PYTHON"] = "1"      # before sim is imported: see the docstring

from sim.cost.system import clear_caches
from sim.engine.costs import CostAdapter
from sim.experiments.grid import load_experiment, resolve_path
from sim.systems.run import simulate

RUNS = ("pim-sd:opt-66b:128", "gpu-sd:opt-66b:128", "saddle:opt-66b:64", "pim-ad:opt-66b:64",
        "gpu-ad:opt-66b:64", "saddle:llama:32", "pim-sd:opt-175b:64:1")


def recorded_calls(run) -> list[tuple]:
    """``(adapter arguments, method, its arguments)`` of every ``CostAdapter.price``,
    ``price_draft`` and ``price_round`` call of ``run``, in order."""
    calls = []
    methods = {name: getattr(CostAdapter, name) for name in ("price", "price_draft", "price_round")}

    def recording(name):
        def record(adapter, *args):
            calls.append(((adapter.system.name, adapter.tlm.name,
                           adapter.dlm.name if adapter.dlm else None), name, args))
            return methods[name](adapter, *args)
        return record
    for name in methods:
        setattr(CostAdapter, name, recording(name))
    try:
        simulate(run)
    finally:
        for name, method in methods.items():
            setattr(CostAdapter, name, method)
    return calls


def main(argv: list[str]) -> int:
    _, runs = load_experiment(resolve_path("fig12"))
    total = 0.0
    for spec in argv or RUNS:
        system, pair, batch, *index = spec.split(":")
        chosen = [p for p in runs if p.system == system and p.pair.startswith(pair)
                  and p.batch == int(batch)]
        calls = recorded_calls(chosen[int(index[0]) if index else 0])
        clear_caches()
        adapters = {key: CostAdapter.named(*key) for key in {key for key, _, _ in calls}}
        gc.disable()        # as simulate() prices: without the cycle collector
        start = time.process_time()
        priced = []
        for key, name, args in calls:
            if name == "price_round":
                priced += adapters[key].price_round(*args)
            else:
                priced.append(getattr(adapters[key], name)(*args))
        seconds = time.process_time() - start
        gc.enable()
        total += seconds
        fields = [(p.work.time_ps, p.work.gpu_ps, p.work.pim_ps, p.work.devices, p.energy_fj,
                   p.cost.attention_ps, p.cost.fc_ps, p.cost.comm_ps, p.flops, p.pim_flops)
                  for p in priced]
        digest = hashlib.sha256(repr(fields).encode()).hexdigest()[:16]
        print(f"{spec:22s} {len(priced):7d} steps {seconds:6.2f} CPU s "
              f"{1e6 * seconds / len(priced):6.1f} us/step  digest {digest}", flush=True)
    print(f"total {total:.2f} CPU s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
