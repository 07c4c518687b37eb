"""The paper's experiments as golden records: every run of fig3, fig12, fig14 and the stopping
rules (``configs/experiments/``) is simulated and its record compared with the one the
simulator wrote before its core was redesigned (``golden_experiments.json.gz``): every token
count, pass count, time and throughput equal, energy to 1e-9 relative (``golden.py``).

A result that moves on purpose (a model change) regenerates the file:
``SADDLE_REGEN_GOLDEN=1 pytest tests/sim/systems/test_golden_experiments.py``, and the commit
and CHANGELOG.md say why."""
from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from sim.experiments.grid import load_experiment, resolve_path
from sim.experiments.runner import execute
from tests.sim.systems.golden import mismatches

GOLDEN = Path(__file__).with_name("golden_experiments.json.gz")
EXPERIMENTS = ("fig3", "fig12", "fig14", "stopping")


def _key(record: dict) -> str:
    return (f"{record['system']}|{record['pair']}|b{record['batch']}|d{record['draft_length']}"
            f"|L{record['sequence_length']}")


def _records(name: str, out: Path) -> dict[str, dict]:
    _, runs = load_experiment(resolve_path(name))
    records = execute(name, runs, out / name, progress=False, jobs=2)
    keyed = {_key(r): r for r in records}
    assert len(keyed) == len(records), f"{name}: two runs share a key"
    return keyed


@pytest.mark.slow
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_records_equal_the_golden_ones(name, tmp_path):
    got = _records(name, tmp_path)
    stored = json.loads(gzip.decompress(GOLDEN.read_bytes()))
    if os.environ.get("SADDLE_REGEN_GOLDEN"):
        stored[name] = got
        GOLDEN.write_bytes(gzip.compress(json.dumps(stored, sort_keys=True, indent=0).encode(),
                                         mtime=0))
    want = stored[name]
    assert sorted(got) == sorted(want)
    for key in want:
        diff = mismatches(got[key], want[key])
        assert not diff, f"{name} {key}: {diff[:5]}"
