"""A grid on worker processes (`saddle run --jobs N`): the same bytes as a serial run, resume,
errors that name the run without losing the others, the progress count."""
import json
import subprocess
import sys
import threading

import numpy as np
import pytest

from common.errors import SaddleError
from common.paths import ROOT
from sim.cli import main
from sim.experiments.backends import start_method
from sim.experiments.runner import MAX_DEFAULT_JOBS, default_jobs, execute
from sim.systems.run import RunParams
from tests.sim.systems.conftest import make_trace, request

EXPERIMENT = """
name: par
description: "parallel == serial"
pairs: [opt-66b+opt-1.3b]
batches: [2, 4]
systems:
  - {system: gpu-ad}
  - {system: gpu-sd, draft_length: 3}
  - {system: pim-sd, draft_length: 2}
  - {system: saddle, tau: 0.3}
workload: {split: all, batching: continuous, seed: 0}
plot: {x: system, metric: tokens_per_s, normalize: gpu-ad}
"""
OUTPUTS = ("results.json", "results.csv", "config.yaml")


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    rng = np.random.default_rng(11)
    reqs = [request(f"r{i}", 15 + 9 * i, rng.random(8 + 3 * i) < 0.7, p=0.55 + 0.04 * i)
            for i in range(6)]
    return str(make_trace(tmp_path_factory.mktemp("trace") / "t.jsonl", reqs))


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    path = tmp_path_factory.mktemp("exp") / "par.yaml"
    path.write_text(EXPERIMENT)
    return path


def _run(capsys, experiment, trace, out, jobs) -> str:
    assert main(["run", str(experiment), "--trace", trace, "--out", str(out), "--json",
                 "--no-plot", "--jobs", str(jobs)]) == 0
    return capsys.readouterr().out


def _files(out) -> dict:
    files = {name: (out / name).read_bytes() for name in OUTPUTS}
    files.update({f"runs/{p.name}": p.read_bytes() for p in (out / "runs").glob("*.json")})
    return files


def test_parallel_is_serial_byte_for_byte_and_resumes(experiment, trace, tmp_path, capsys):
    serial = _run(capsys, experiment, trace, tmp_path / "serial", 1)
    parallel = _run(capsys, experiment, trace, tmp_path / "par", 2)
    assert len(json.loads(serial)["runs"]) == 8
    assert parallel == serial
    reference = _files(tmp_path / "serial")
    assert len(reference) == 3 + 8
    assert _files(tmp_path / "par") == reference

    # Interrupted grid: two runs missing. Only those are simulated again, in parallel.
    runs = sorted((tmp_path / "par" / "runs").glob("*.json"))
    for p in runs[2:4]:
        p.unlink()
    kept = {p: p.stat().st_mtime_ns for p in runs[:2] + runs[4:]}
    assert _run(capsys, experiment, trace, tmp_path / "par", 2) == serial
    assert {p: p.stat().st_mtime_ns for p in kept} == kept
    assert _files(tmp_path / "par") == reference


def test_a_failing_run_is_named_and_the_others_are_saved(trace, tmp_path):
    runs = [RunParams(system="gpu-ad", pair="opt-66b+opt-1.3b", batch=2, trace=trace, split="all"),
            RunParams(system="gpu-sd", pair="opt-66b+opt-1.3b", batch=2, draft_length=0,
                      trace=trace, split="all"),
            RunParams(system="pim-ad", pair="opt-66b+opt-1.3b", batch=2, trace=trace, split="all")]
    with pytest.raises(SaddleError) as err:
        execute("bad", runs, tmp_path, progress=False, jobs=2)
    message = str(err.value)
    assert "1 of 3 runs failed" in message
    assert "run 2 (gpu-sd|opt-66b+opt-1.3b|b2|d0|" in message
    assert "draft_length: expected an integer >= 1" in message
    saved = sorted(p.name.split("_")[1] for p in (tmp_path / "runs").glob("*.json"))
    assert saved == ["gpu-ad", "pim-ad"]


def test_progress_counts_resumed_and_new_runs(experiment, trace, tmp_path, monkeypatch):
    import tqdm

    from sim.experiments.grid import load_experiment
    bars = []

    class Bar:
        def __init__(self, total, initial=0, **_):
            self.total, self.n = total, initial
            bars.append(self)

        def update(self, n):
            self.n += n

        def close(self):
            pass

    monkeypatch.setattr(tqdm, "tqdm", Bar)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)     # a bar on a terminal only
    _, runs = load_experiment(experiment, trace=trace)
    execute("par", runs[:3], tmp_path, jobs=2)
    execute("par", runs, tmp_path, jobs=2)
    assert [(b.total, b.n) for b in bars] == [(3, 3), (8, 8)]


def test_jobs_option_and_default(capsys):
    assert 1 <= default_jobs() <= MAX_DEFAULT_JOBS
    with pytest.raises(SystemExit):
        main(["run", "default", "--jobs", "0"])
    assert "--jobs/-j: expected a positive integer" in capsys.readouterr().err
    with pytest.raises(SaddleError, match="jobs must be a positive integer"):
        execute("x", [], None, jobs=0)


FORKED = """
import sys
from sim.experiments.backends import make, start_method
from sim.workload import load_workload
from tests.sim.experiments.test_parallel import _traces_read
load_workload(sys.argv[1], split="all", n_requests=None, seed=0, validation_fraction=0.2,
              max_seq_len=None, source="test")
print(start_method(), [v for _, v, _ in make("local", 2).map(_traces_read, [0, 1, 2])])
"""


def _traces_read(_task) -> int:
    from sim.workload import _read
    return _read.cache_info().currsize


@pytest.mark.skipif(sys.platform != "linux", reason="workers are forked on Linux only")
def test_forked_workers_start_with_the_parents_traces(trace):
    # In a fresh process: this one has imported Ray (test_ray.py), so it spawns its workers.
    out = subprocess.run([sys.executable, "-c", FORKED, trace], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout
    assert out.split() == ["fork", "[1,", "1,", "1]"]   # a spawned worker would start with none


def test_workers_are_spawned_while_another_thread_runs():
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert start_method() == "spawn"
    finally:
        stop.set()
        thread.join()


def test_workers_are_spawned_once_ray_is_imported(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", object())
    assert start_method() == "spawn"
