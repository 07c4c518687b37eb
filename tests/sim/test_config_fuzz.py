"""Property test of the config loaders over generated corruptions of the shipped experiment and
sweep files, as tests/traces/test_fuzz.py does for traces.

Every corrupted file either loads (every check a run makes before it simulates passes) or
fails with the project's own error naming the file; never another exception. Corruptions:
values replaced by ones of another type or out of range (NaN, infinities, negative, huge, empty,
unknown names), keys deleted and added, values nested in a list or a mapping, YAML lines
duplicated (a key given twice), and config overrides of system, hardware, model and Manager
values (the way an experiment changes a system file's value for its runs).

The default suite runs a few hundred examples (derandomized: the same ones every run). The large
run::

    SADDLE_FUZZ_EXAMPLES=10000 python -m pytest -q tests/sim/test_config_fuzz.py
"""
from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
import yaml

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from common.config import load_yaml  # noqa: E402
from common.errors import SaddleError  # noqa: E402
from common.paths import CONFIGS  # noqa: E402
from sim.experiments.grid import load_experiment  # noqa: E402
from sim.sweeps.spec import load_sweep  # noqa: E402

EXAMPLES = int(os.environ.get("SADDLE_FUZZ_EXAMPLES", "300"))
FUZZ = settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))
# The shipped files whose checks take well under a second (fig12, fig15 and stopping read or
# extend long traces first; their keys are the same as these).
EXPERIMENTS = ["default", "fairness", "fig14", "fig16", "fig18", "fig19", "fig3", "issue-rules",
               "real-trace", "sweep-saddle"]
SWEEPS = ["pim-nvlink", "pool-batch", "tau-batch"]
BASES = {**{f"experiments/{n}": load_yaml(CONFIGS / "experiments" / f"{n}.yaml")
            for n in EXPERIMENTS},
         **{f"sweeps/{n}": load_yaml(CONFIGS / "sweeps" / f"{n}.yaml") for n in SWEEPS}}
# Config values an experiment's overrides may set (sim/overrides.py), one of each kind of file.
OVERRIDE_KEYS = ["systems.saddle.capacity_rule", "systems.saddle.eager", "systems.pim-sd.mapping",
                 "hardware.saddle.devices", "hardware.saddle.stacks_per_device",
                 "hardware.hbm3_pim.pim.mac_spacing", "hardware.energy.static.gpu_w",
                 "hardware.links.nvlink.step_latency_ns", "models.opt-66b.layers",
                 "models.opt-1.3b.heads", "manager.pools.shared_entries",
                 "manager.pools.eager_entries", "tau.opt-66b+opt-1.3b.tau"]

ODD = st.one_of(
    st.sampled_from([0, -1, 1, 2, 3, 7, 64, 2 ** 31, 2 ** 63, 10 ** 30, -10 ** 30]),
    st.sampled_from([0.0, -0.0, 0.5, 1.5, -2.5, 1e-300, 1e300, math.inf, -math.inf, math.nan]),
    st.sampled_from(["", "max", "search", "all", "saddle", "gpu-ad", "opt-66b+opt-1.3b", "test",
                     "continuous", "nope", "x" * 300, "1", "ünïcode", "null"]),
    st.booleans(), st.none(),
    st.lists(st.integers(-3, 300), max_size=3), st.dictionaries(st.sampled_from(["a", "batch"]),
                                                                st.integers(-1, 9), max_size=2))


def _paths(node, prefix=()):
    """Every (path, value) inside a parsed document."""
    yield prefix, node
    items = node.items() if isinstance(node, dict) else \
        enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        yield from _paths(value, prefix + (key,))


def _at(doc, path):
    for key in path:
        doc = doc[key]
    return doc


@st.composite
def _mutated(draw) -> tuple[str, str]:
    """(kind of file, YAML text) of a shipped file with one to three corruptions."""
    name = draw(st.sampled_from(sorted(BASES)))
    doc = yaml.safe_load(yaml.safe_dump(BASES[name]))      # a deep copy
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p, _ in _paths(doc) if p]
        op = draw(st.sampled_from(["set", "delete", "add", "nest", "override", "duplicate"]))
        if op == "override" or not paths:
            doc.setdefault("overrides", {})[draw(st.sampled_from(OVERRIDE_KEYS))] = draw(ODD)
            continue
        if op == "duplicate":
            break       # textual, below
        path = draw(st.sampled_from(paths))
        parent, key = _at(doc, path[:-1]), path[-1]
        if op == "set":
            parent[key] = draw(ODD)
        elif op == "delete":
            del parent[key]
        elif op == "add":
            target = parent if isinstance(parent, dict) else doc
            target[draw(st.sampled_from(["extra", "batchs", "seed", "systems", "x"]))] = draw(ODD)
        else:
            parent[key] = [parent[key]] if draw(st.booleans()) else {"value": parent[key]}
    text = yaml.safe_dump(doc, sort_keys=False)
    if op == "duplicate":
        lines = text.splitlines(keepends=True)
        i = draw(st.integers(0, len(lines) - 1))
        text = "".join(lines[:i + 1] + [lines[i]] + lines[i + 1:])
    return name.split("/")[0], text


@FUZZ
@given(_mutated())
def test_a_corrupted_config_loads_or_fails_with_one_clear_error(tmp_path_factory, case):
    kind, text = case
    path = Path(tmp_path_factory.mktemp("fuzz")) / "fuzzed.yaml"
    path.write_text(text)
    try:
        load_sweep(path) if kind == "sweeps" else load_experiment(path)
        hypothesis.event("loaded")
    except SaddleError as exc:
        message = str(exc)
        assert "fuzzed.yaml" in message, message
        assert "\n" not in message.strip(), message
        hypothesis.event(message.split(": ")[1][:40] if ": " in message else message[:40])
