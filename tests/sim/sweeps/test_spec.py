"""Sweep files: points of grids, zipped axes and samples (known answers), every refusal before
anything runs, with the key named."""
import numpy as np
import pytest

from common.errors import ConfigError
from sim.sweeps.sampling import latin_hypercube, uniform
from sim.sweeps.spec import edit, load_sweep, points_of

BASE = """
name: base
pairs: [opt-66b+opt-1.3b]
batches: [2]
systems: [{system: pim-ad}]
workload: {split: test, requests: 4, seed: 0}
"""


@pytest.fixture
def write(tmp_path):
    (tmp_path / "base.yaml").write_text(BASE)

    def write(text: str):
        path = tmp_path / "sweep.yaml"
        path.write_text(f"name: s\nexperiment: {tmp_path / 'base.yaml'}\n" + text)
        return path
    return write


def test_grid_times_zip_times_sample_in_order():
    data = {"grid": {"batch": [2, 4], "workload.seed": [0, 1]},
            "zip": {"pair": ["a", "b", "c"], "tau": [0.7, 0.8, 0.9]}}
    axes, points = points_of(data, "s")
    assert axes == ("batch", "workload.seed", "pair", "tau")
    assert len(points) == 2 * 2 * 3
    assert points[:4] == [{"batch": 2, "workload.seed": 0, "pair": "a", "tau": 0.7},
                          {"batch": 2, "workload.seed": 0, "pair": "b", "tau": 0.8},
                          {"batch": 2, "workload.seed": 0, "pair": "c", "tau": 0.9},
                          {"batch": 2, "workload.seed": 1, "pair": "a", "tau": 0.7}]
    sampled = points_of({"grid": {"batch": [2, 4]},
                         "sample": {"method": "random", "points": 3, "seed": 5,
                                    "ranges": {"tau": [0.5, 0.9]}}}, "s")[1]
    assert [p["batch"] for p in sampled] == [2, 2, 2, 4, 4, 4]
    assert [p["tau"] for p in sampled[:3]] == [p["tau"] for p in sampled[3:]]


def test_latin_hypercube_takes_each_stratum_once():
    points = latin_hypercube({"a": (0.0, 1.0), "n": (1, 10)}, 10, seed=3)
    assert sorted(int(p["a"] * 10) for p in points) == list(range(10))
    assert sorted(p["n"] for p in points) == list(range(1, 11))    # integer strata of width 1
    assert all(isinstance(p["n"], int) for p in points)
    assert latin_hypercube({"a": (0.0, 1.0)}, 4, seed=3) == latin_hypercube({"a": (0.0, 1.0)}, 4, seed=3)
    assert latin_hypercube({"a": (0.0, 1.0)}, 4, seed=3) != latin_hypercube({"a": (0.0, 1.0)}, 4, seed=4)


def test_random_draws_are_seeded_and_inside_the_range():
    points = uniform({"x": (700, 6060), "t": (0.5, 0.9)}, 50, seed=1)
    assert points == uniform({"x": (700, 6060), "t": (0.5, 0.9)}, 50, seed=1)
    xs = np.array([p["x"] for p in points])
    assert xs.min() >= 700 and xs.max() <= 6060
    assert all(0.5 <= p["t"] < 0.9 and len(repr(p["t"])) <= 9 for p in points)   # 6 digits


def test_a_point_edits_the_experiment():
    base = {"pairs": ["p"], "batches": [2, 4], "workload": {"requests_per_batch": 2},
            "systems": [{"system": "saddle", "batches": [2], "tau": 0.5, "label": "x"}]}
    data = edit(base, {"batch": 8, "tau": 0.7, "workload.requests": 3, "max_draft_len": 6,
                       "manager.pools.shared_entries": 64})
    assert data == {"pairs": ["p"], "batches": [8], "tau": 0.7, "workload": {"requests": 3},
                    "systems": [{"system": "saddle", "label": "x", "max_draft_len": 6}],
                    "overrides": {"manager.pools.shared_entries": 64}}
    assert base["batches"] == [2, 4]                # the base is not changed


def test_a_sweep_resolves_to_one_run_per_point(write):
    sweep = load_sweep(write("grid: {batch: [2, 4], hardware.links.nvlink.step_latency_ns: [700, 6060]}\n"))
    assert sweep.axes == ("batch", "hardware.links.nvlink.step_latency_ns")
    assert [(i, p.batch, p.overrides) for i, p in sweep.runs] == [
        (0, 2, (("hardware.links.nvlink.step_latency_ns", 700),)),
        (1, 2, (("hardware.links.nvlink.step_latency_ns", 6060),)),
        (2, 4, (("hardware.links.nvlink.step_latency_ns", 700),)),
        (3, 4, (("hardware.links.nvlink.step_latency_ns", 6060),))]
    assert sweep.plot == {"metrics": ["tokens_per_s"], "x": "batch",
                          "y": "hardware.links.nvlink.step_latency_ns", "facet": None, "best": "max",
                          "best_per": "facet"}


@pytest.mark.parametrize("text, message", [
    ("grid: {bacth: [2]}\n", r"sweep.yaml: grid.bacth: unknown key \(did you mean 'batch'\?\)"),
    ("grid: {hardware.links.nvlink.step_latency: [2]}\n",
     r"grid.hardware.links.nvlink.step_latency: unknown key \(did you mean 'nvlink.step_latency_ns'\?\)"),
    ("grid: {batch: 2}\n", r"grid.batch: expected a non-empty list of values"),
    ("zip: {batch: [2, 4], workload.seed: [0]}\n", r"zip: the lists have different lengths"),
    ("grid: {batch: [2]}\nzip: {batch: [4]}\n", r"batch: an axis of more than one"),
    ("grid: {system: [saddle], batch: [2, 200]}\n",
     r"point 2 \(system=saddle, batch=200\): .*base.yaml: batches\[0\]: batch 200 exceeds the 128 "
     r"Controller slots of configs/manager.yaml \(controller.max_requests\) for saddle"),
    ("grid: {draft_length: [3]}\n",
     r"point 1 \(draft_length=3\): .*systems\[0\].draft_length: system pim-ad does not take a fixed d"),
    ("grid: {hardware.links.nvlink.efficiency: [0.5, 2.0]}\n",
     r"point 2 \(hardware.links.nvlink.efficiency=2.0\): .*nvlink.efficiency: 2.0: expected a "
     r"fraction in \(0, 1\], found 2.0 \(it replaces configs/hardware/links.yaml's value\)"),
    ("grid: {system: [pim-ad, pim-ad]}\n", r"point 2 \(system=pim-ad\): the same run as point 1"),
    ("grid: {dlm_fc_threshold: [3]}\n",
     r"systems\[0\].dlm_fc_threshold: system pim-ad has no Scheduler \(mapping: dynamic\)"),
    ("grid: {system: [saddle], tlm_attention_threshold: [70000]}\n",
     r"systems\[0\].tlm_attention_threshold: expected at most 65535, found 70000"),
    ("sample: {method: sobol, points: 2, ranges: {tau: [0.1, 0.2]}}\n",
     r"sample.method: unknown method 'sobol'; expected one of random, lhs"),
    ("sample: {method: lhs, points: 2, ranges: {tau: [0.9, 0.2]}}\n", r"sample.ranges.tau: expected \[low, high\]"),
    ("grid: {batch: [2]}\nplot: {x: batches}\n", r"plot.x: 'batches' is not an axis \(did you mean 'batch'\?\)"),
    ("grid: {batch: [2]}\nplots: {}\n", r"plots: unknown key \(did you mean 'plot'\?\)"),
])
def test_bad_sweeps_are_refused_before_anything_runs(write, text, message):
    with pytest.raises(ConfigError, match=message):
        load_sweep(write(text))
