"""Running a sweep: a row per run written as it ends, a failed point recorded while the others
go on, a rerun that reuses finished points and retries failed ones, an interrupted sweep that
resumes to the same rows, the summary, the plots with the best point of each facet."""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from common.errors import SaddleError
from report.sweep_plots import best
from sim.cli import main
from sim.sweeps.run import run_sweep, write_outputs
from sim.sweeps.spec import load_sweep

BASE = """
name: base
pairs: [opt-66b+opt-1.3b]
batches: [2]
systems: [{system: pim-ad}]
workload: {split: test, requests: 4, seed: 0}
"""
NVLINK = "hardware.links.nvlink.step_latency_ns"
SWEEP = f"grid: {{batch: [2, 4], {NVLINK}: [700, 6060]}}\n"


@pytest.fixture
def sweep_file(tmp_path):
    (tmp_path / "base.yaml").write_text(BASE)
    path = tmp_path / "sweep.yaml"
    path.write_text(f"name: s\nexperiment: {tmp_path / 'base.yaml'}\n" + SWEEP)
    return path


def _outputs(out):
    return {name: (out / name).read_bytes() for name in ("rows.json", "rows.csv")} | {
        f"rows/{p.name}": p.read_bytes() for p in sorted((out / "rows").glob("*.json"))}


def test_failed_points_are_rows_and_a_rerun_retries_only_them(sweep_file, tmp_path, monkeypatch,
                                                              capsys):
    sweep = load_sweep(sweep_file)
    clean, rows = run_sweep(sweep, tmp_path / "clean", progress=False)
    write_outputs(sweep, tmp_path / "clean", clean, rows)
    assert clean.to_dict() == {"sweep": "s", "points": 4, "runs": 4, "succeeded": 4, "failed": 0,
                               "reused": 0}
    assert [r["point"] for r in rows] == [{"batch": 2, NVLINK: 700}, {"batch": 2, NVLINK: 6060},
                                          {"batch": 4, NVLINK: 700}, {"batch": 4, NVLINK: 6060}]
    assert [r["run"]["batch"] for r in rows] == [2, 2, 4, 4]
    by = {(r["point"]["batch"], r["point"][NVLINK]): r["metrics"]["tokens_per_s"] for r in rows}
    assert by[(2, 700)] > by[(2, 6060)] and by[(4, 700)] > by[(4, 6060)]   # slower all-reduces
    assert all(len(r["digest"]) == 64 and r["status"] == "ok" and r["error"] is None for r in rows)
    assert len({r["digest"] for r in rows}) == 4

    from sim.experiments import runner
    real = runner.simulate

    def broken(p):                           # batch 4 fails (jobs = 1: in this process)
        if p.batch == 4:
            raise SaddleError("broken on purpose")
        return real(p)
    monkeypatch.setattr(runner, "simulate", broken)
    out = tmp_path / "out"
    capsys.readouterr()
    summary, rows = run_sweep(sweep, out, progress=True)
    err = capsys.readouterr().err               # off a terminal: the summary line
    assert re.fullmatch(r"saddle: s: 4 runs: 2 simulated, 0 reused, 2 failed in 0:\d\d\n", err)
    assert (summary.succeeded, summary.failed, summary.reused) == (2, 2, 0)
    assert [r["status"] for r in rows] == ["ok", "ok", "failed", "failed"]
    assert rows[2]["error"] == "broken on purpose" and rows[2]["metrics"] == {}
    assert len(list((out / "rows").glob("*.json"))) == 4

    monkeypatch.setattr(runner, "simulate", real)
    summary, rows = run_sweep(sweep, out, progress=False)
    assert (summary.succeeded, summary.failed, summary.reused) == (2, 0, 2)
    write_outputs(sweep, out, summary, rows)
    assert _outputs(out) == _outputs(tmp_path / "clean")


def test_the_schedulers_thresholds_are_axes(tmp_path):
    (tmp_path / "base.yaml").write_text(BASE)
    path = tmp_path / "sweep.yaml"
    path.write_text(f"name: thr\nexperiment: {tmp_path / 'base.yaml'}\n"
                    "grid: {system: [saddle], dlm_fc_threshold: [0, 500], tlm_attention_threshold: [3]}\n")
    summary, rows = run_sweep(load_sweep(path), tmp_path / "out", progress=False)
    assert summary.succeeded == 2
    used = [(r["metrics"]["scheduler_thresholds.dlm_fc"],
             r["metrics"]["scheduler_thresholds.tlm_attention"]) for r in rows]
    assert used == [(0, 3), (500, 3)]
    # 0: DLM FC always on the GPU; 500: never (more requests than any micro-batch holds)
    assert rows[0]["metrics"]["pim_op_fraction"] < rows[1]["metrics"]["pim_op_fraction"]


def test_best_point_of_each_facet():
    plot = {"x": "batch", "y": None, "facet": "pair", "best": "max"}
    rows = [{"point": {"batch": b, "pair": p}, "run": {"system": "s"}, "status": s,
             "metrics": {"m": m}} for b, p, s, m in
            [(1, "a", "ok", 3.0), (2, "a", "ok", 5.0), (3, "a", "failed", 9.0),
             (1, "b", "ok", 7.0), (2, "b", "ok", 7.0)]]
    assert {k: v["point"]["batch"] for k, v in best(rows, plot, "m").items()} == {"a": 2, "b": 1}
    assert {k: v["point"]["batch"] for k, v in best(rows, plot | {"best": "min"}, "m").items()} == \
        {"a": 1, "b": 1}
    # best_per: y (a heatmap's best x of each y): here x = pair, y = batch
    per_y = plot | {"x": "pair", "y": "batch", "facet": None, "best_per": "y"}
    assert {k: v["point"]["pair"] for k, v in best(rows, per_y, "m").items()} == \
        {(None, 1): "b", (None, 2): "b"}


def _default_sigint():
    """A test run launched in the background (non-interactive shells start those with SIGINT
    ignored, and Python then keeps it ignored) must still see Ctrl-C as a user's terminal sends
    it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_cli_summary_plots_and_sigint_resume(sweep_file, tmp_path, capsys):
    """From the command line: Ctrl-C after the first row, a rerun finishes the rest and the
    rows are the bytes of an uninterrupted run (on 2 worker processes)."""
    # A longer sweep (SADDLE runs) interrupted after its first row, then resumed. The point
    # after the first (200 requests) runs for about a second, so the sweep is still running when
    # the interrupt arrives.
    path = tmp_path / "long.yaml"
    path.write_text(f"name: long\nexperiment: {tmp_path / 'base.yaml'}\n"
                    "grid: {system: [saddle], batch: [2, 4], workload.requests: [8, 200]}\n"
                    "plot: {x: workload.requests, y: null, facet: batch}\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = tmp_path / "interrupted"
    proc = subprocess.Popen([sys.executable, "-m", "sim.cli", "sweep", str(path), "--out", str(out),
                             "--jobs", "1", "--json"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    deadline = time.time() + 120
    while not list((out / "rows").glob("*.json")) if (out / "rows").is_dir() else True:
        assert proc.poll() is None and time.time() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted; results written so far are kept" in err
    finished = len(list((out / "rows").glob("*.json")))
    assert 1 <= finished < 4

    assert main(["sweep", str(path), "--out", str(out), "--jobs", "1", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["runs"], summary["reused"], summary["succeeded"], summary["failed"]) == \
        (4, finished, 4 - finished, 0)
    assert [os.path.basename(p) for p in summary["plots"]] == ["long-tokens_per_s.png"]
    assert main(["sweep", str(path), "--out", str(tmp_path / "clean"), "--jobs", "2", "--json",
                 "--no-plot"]) == 0
    assert json.loads(capsys.readouterr().out)["plots"] == []
    assert _outputs(out) == _outputs(tmp_path / "clean")
