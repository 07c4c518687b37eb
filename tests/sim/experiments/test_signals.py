"""SIGTERM and SIGHUP stop `saddle run` as Ctrl-C does: one message, the worker processes gone
at once, the runs written so far kept and reused by a rerun, whose results are an uninterrupted
run's."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

EXPERIMENT = """name: signals
pairs: [opt-66b+opt-1.3b]
batches: [4, 8, 16, 32]
systems: [{system: saddle}, {system: pim-sd, draft_length: 8}]
workload: {split: test, requests_per_batch: 24, batching: continuous, seed: 0}
"""


def _run(path, out, **kwargs):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.Popen([sys.executable, "-m", "sim.cli", "run", str(path), "--out", str(out),
                             "--jobs", "2", "--no-plot", "--json"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, **kwargs)


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_stop_signal_keeps_the_runs_and_stops_the_workers(tmp_path, stop):
    path = tmp_path / "signals.yaml"
    path.write_text(EXPERIMENT)
    out = tmp_path / "out"
    proc = _run(path, out)
    deadline = time.time() + 180
    while not (out / "runs").is_dir() or not list((out / "runs").glob("*.json")):
        assert proc.poll() is None and time.time() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(stop)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "saddle: interrupted; results written so far are kept"
    assert "Traceback" not in err
    gone = time.time() + 5
    while _alive(proc.pid) and time.time() < gone:
        time.sleep(0.05)
    assert not _alive(proc.pid), "a worker outlived the interrupted run"
    kept = {p.name: p.read_bytes() for p in (out / "runs").glob("*.json")}
    assert 0 < len(kept) < 8
    if stop != signal.SIGTERM:
        return      # resuming is the same for every signal: once is enough

    resumed = _run(path, out)
    text, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err
    assert {p.name: p.read_bytes() for p in (out / "runs").glob("*.json")
            if p.name in kept} == kept          # reused, not simulated again
    fresh = _run(path, tmp_path / "fresh")
    again, err = fresh.communicate(timeout=300)
    assert fresh.returncode == 0, err
    assert json.loads(text) == json.loads(again)
