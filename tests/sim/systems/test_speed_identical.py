"""Speed and structure changes must not change a result: the full run records of a
representative set of runs (every system kind, PIM-SD's mapping search and the d search,
SADDLE's issue rules, continuous batching, the paper's workload on the shipped traces) are
compared with the records the code wrote before any speed change (``golden_speed.json``):
every field equal, energy to 1e-9 relative (``golden.py``). A result that moves on purpose (a model change, not a speed change)
regenerates it: ``SADDLE_REGEN_GOLDEN=1``, and the commit says why."""
import json
import os
from pathlib import Path

from sim.systems.run import RunParams, simulate
from tests.sim.systems.golden import mismatches

GOLDEN = Path(__file__).with_name("golden_speed.json")

OPT175, OPT66, LLAMA = "opt-175b+opt-6.7b", "opt-66b+opt-1.3b", "llama-3.1-70b+llama-3.2-1b"


def _runs() -> dict[str, RunParams]:
    runs = []
    # fig12's seven systems, continuous batching, the pair's paper length (512 for OPT-175B).
    for batch, requests in ((4, 10), (8, 12)):
        for system, d, label in (("gpu-ad", None, None), ("gpu-sd", 8, None),
                                 ("gpu-sd", "search", "gpu-sd-best"), ("pim-ad", None, None),
                                 ("pim-sd", 8, None), ("pim-sd", "search", "pim-sd-best"),
                                 ("saddle", None, None)):
            runs.append(RunParams(system=system, pair=OPT175, batch=batch, draft_length=d,
                                  label=label, requests=requests, sequence_length=512))
    # The other pairs at their paper length (1024), fewer requests; SADDLE's variants and issue
    # rules; the natural-length workload.
    runs += [RunParams(system="saddle", pair=OPT66, batch=4, requests=5, sequence_length=1024),
             RunParams(system="pim-sd", pair=LLAMA, batch=4, draft_length=8, requests=5,
                       sequence_length=1024),
             RunParams(system="saddle", pair=LLAMA, batch=4, requests=5, sequence_length=1024)]
    for system in ("saddle-d", "saddle-p", "saddle-s", "oracle"):
        runs.append(RunParams(system=system, pair=OPT175, batch=4, requests=6, sequence_length=512))
    for rule in ("tlm-idle", "drained"):
        runs.append(RunParams(system="saddle", pair=OPT175, batch=4, requests=6,
                              sequence_length=512, issue_rule=rule))
    # Lock-step rounds of full micro-batches (4 requests each): draft steps that start at the
    # same instant on several devices, with and without the Controller's monitoring latency.
    runs += [RunParams(system="pim-sd", pair=OPT175, batch=32, draft_length=8, requests=32,
                       sequence_length=512),
             RunParams(system="saddle-d", pair=OPT175, batch=32, requests=32, sequence_length=512)]
    runs += [RunParams(system="saddle", pair=OPT66, batch=8, requests=24),
             RunParams(system="gpu-sd", pair=OPT66, batch=8, draft_length=4, requests=24)]
    return {f"{p.label or p.system}|{p.pair}|b{p.batch}|d{p.draft_length}|r{p.requests}"
            f"|L{p.sequence_length}|{p.issue_rule}": p for p in runs}


def _record(p: RunParams) -> str:
    """The run's record as ``saddle run`` writes it (sim/experiments/runner.py), canonical."""
    metrics, _ = simulate(p)
    return json.dumps(metrics.to_dict() | {"sequence_length": p.sequence_length}, sort_keys=True)


def test_records_are_byte_identical_to_the_golden_ones():
    got = {key: _record(p) for key, p in _runs().items()}
    if os.environ.get("SADDLE_REGEN_GOLDEN"):   # deliberate regeneration after a model change
        GOLDEN.write_text(json.dumps(got, indent=0, sort_keys=True) + "\n")
    want = json.loads(GOLDEN.read_text())
    assert sorted(got) == sorted(want)
    for key in want:
        diff = mismatches(json.loads(got[key]), json.loads(want[key]))
        assert not diff, f"{key}: {diff[:5]}"
