"""The Ray backend on a Ray cluster this module starts on this machine (and stops): the same
rows as the local backend, byte for byte, through --address; a task whose worker process is
killed is run again."""
import json
import os
import sys

import pytest
import ray  # the ray extra: make test installs it
from ray import cloudpickle
from ray.cluster_utils import Cluster

from sim.cli import main
from sim.experiments.backends import RAY_RETRIES, make

BASE = """
name: base
pairs: [opt-66b+opt-1.3b]
batches: [2]
systems: [{system: pim-ad}, {system: saddle}]
workload: {split: test, requests: 4, seed: 0}
"""
SWEEP = "grid: {batch: [2, 4], hardware.links.nvlink.step_latency_ns: [700, 6060]}\n"


@pytest.fixture(scope="module")
def cluster():
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")      # no network
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2,
                                                            "include_dashboard": False})
    yield cluster
    if ray.is_initialized():
        ray.shutdown()
    cluster.shutdown()


def _rows(out):
    return {p.name: p.read_bytes() for p in sorted((out / "rows").glob("*.json"))} | {
        "rows.json": (out / "rows.json").read_bytes(), "rows.csv": (out / "rows.csv").read_bytes()}


def test_ray_rows_are_the_local_rows(cluster, tmp_path, capsys):
    (tmp_path / "base.yaml").write_text(BASE)
    path = tmp_path / "sweep.yaml"
    path.write_text(f"name: s\nexperiment: {tmp_path / 'base.yaml'}\n" + SWEEP)
    assert main(["sweep", str(path), "--out", str(tmp_path / "local"), "--jobs", "2", "--json",
                 "--no-plot"]) == 0
    local = json.loads(capsys.readouterr().out)
    assert main(["sweep", str(path), "--out", str(tmp_path / "ray"), "--backend", "ray",
                 "--address", cluster.address, "--json", "--no-plot"]) == 0
    on_ray = json.loads(capsys.readouterr().out)
    assert on_ray["succeeded"] == local["succeeded"] == 8
    assert _rows(tmp_path / "ray") == _rows(tmp_path / "local")
    assert not ray.is_initialized()             # the driver left; the cluster stays up


def die_once(marker: str) -> int:
    """Kill this worker process the first time (no Python exception: the process is gone)."""
    if not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)
    return os.getpid()


def test_a_killed_worker_task_is_run_again(cluster, tmp_path):
    cloudpickle.register_pickle_by_value(sys.modules[__name__])    # workers cannot import tests/
    backend = make("ray", 1, cluster.address)
    tasks = [str(tmp_path / f"m{i}") for i in range(2)]
    done = list(backend.map(die_once, tasks))
    assert sorted(task for task, _, _ in done) == tasks
    assert all(isinstance(pid, int) and lost is None for _, pid, lost in done)
    assert all(os.path.exists(m) for m in tasks) and RAY_RETRIES >= 1
