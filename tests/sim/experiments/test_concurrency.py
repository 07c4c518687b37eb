"""Two processes writing one results folder share the work (each run simulated once, the other
process waits for it and reuses its file) and write every file whole; a second, different
experiment into the folder is one clear error naming both; progress off a terminal is a line
every SADDLE_PROGRESS_INTERVAL seconds and a summary line."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

EXPERIMENT = """name: {name}
pairs: [opt-66b+opt-1.3b]
batches: [4, 8, 16]
systems: [{{system: saddle}}, {{system: pim-sd, draft_length: 8}}, {{system: gpu-ad}}]
workload: {{split: test, requests_per_batch: 4, batching: continuous, seed: 0}}
"""
RUNS = 9
SUMMARY = re.compile(r"saddle: (\S+): (\d+) runs: (\d+) simulated, (\d+) reused"
                     r"(?:, (\d+) simulated by another process)?")


def _start(path, out, interval="0.2"):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), SADDLE_PROGRESS_INTERVAL=interval)
    return subprocess.Popen([sys.executable, "-m", "sim.cli", "run", str(path), "--out", str(out),
                             "--jobs", "1", "--no-plot"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _write(tmp_path, name):
    path = tmp_path / f"{name}.yaml"
    path.write_text(EXPERIMENT.format(name=name))
    return path


def test_two_processes_share_one_folder_and_simulate_each_run_once(tmp_path):
    path, out = _write(tmp_path, "shared"), tmp_path / "out"
    procs = [_start(path, out) for _ in range(2)]
    results = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, results):
        assert p.returncode == 0, err
        assert "Traceback" not in err
    counts = [SUMMARY.search(err).groups() for _, err in results]
    assert all(c[0] == "shared" and int(c[1]) == RUNS for c in counts)
    simulated = [int(c[2]) for c in counts]
    shared = [int(c[4] or 0) + int(c[3]) for c in counts]       # waited for, or saved already
    assert sum(simulated) == RUNS, counts                       # every run simulated once
    assert [s + o for s, o in zip(simulated, shared)] == [RUNS, RUNS]
    files = sorted((out / "runs").glob("*.json"))
    assert len(files) == RUNS and all(json.loads(f.read_text())["result"] for f in files)
    assert not list((out / "runs").glob("*.tmp")) and not list(out.glob(".*.tmp"))
    # Both wrote the same summary; a third process simulates nothing.
    assert len(json.loads((out / "results.json").read_text())["runs"]) == RUNS
    _, err = (third := _start(path, out)).communicate(timeout=300)
    assert third.returncode == 0 and f"{RUNS} runs: 0 simulated, {RUNS} reused" in err


def test_progress_off_a_terminal_is_a_line_at_an_interval_and_a_summary(tmp_path):
    path, out = _write(tmp_path, "progress"), tmp_path / "out"
    proc = _start(path, out, interval="0.02")
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    lines = err.strip().splitlines()
    timed = [ln for ln in lines if re.fullmatch(
        r"saddle: progress: \d of 9 runs done, \d+:\d\d elapsed(, about \d+:\d\d left)?", ln)]
    assert len(timed) >= 2, err             # the grid takes some tenths of a second
    done = [int(ln.split()[2]) for ln in timed]
    assert done == sorted(done)
    assert re.fullmatch(r"saddle: progress: 9 runs: 9 simulated, 0 reused in \d+:\d\d", lines[-1])


def test_a_second_experiment_into_one_folder_names_both(tmp_path):
    first, second, out = _write(tmp_path, "first"), _write(tmp_path, "second"), tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    (out / "runs").mkdir(parents=True)
    (out / "results.json").write_text(json.dumps({"experiment": "first", "runs": []}))
    proc = subprocess.run([sys.executable, "-m", "sim.cli", "run", str(second), "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"saddle: error: {out}: holds the results of experiment 'first'; experiment 'second' "
        f"({second}) would mix its runs in and replace its summary files: give another --out")
    assert first.exists() and not (out / ".experiment").exists()


def test_a_long_check_says_what_it_is_doing(capsys, monkeypatch):
    import time

    from common.progress import announce
    monkeypatch.setenv("SADDLE_PROGRESS_INTERVAL", "0.1")
    with announce("checking x", after=0.05):
        time.sleep(0.38)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "saddle: checking x (0 s)" and 3 <= len(lines) <= 5, lines
    with announce("quick"):             # under a second: nothing said
        pass
    time.sleep(0.2)
    assert capsys.readouterr().err == ""
