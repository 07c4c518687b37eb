"""`saddle run` end to end on a small experiment: JSON shape, resumption, timeline, golden."""
import json
import os
from pathlib import Path

import pytest

from common.errors import ConfigError
from sim.cli import main

GOLDEN = Path(__file__).with_name("golden_small.json")

EXPERIMENT = """
name: small
description: "small golden experiment"
pairs: [opt-66b+opt-1.3b]
batches: [4]
systems:
  - {system: gpu-ad}
  - {system: gpu-sd, draft_length: 3}
  - {system: pim-ad}
  - {system: pim-sd, draft_length: 3}
  - {system: saddle, tau: 0.3}
workload: {split: all, batching: continuous, seed: 0}
plot: {x: system, metric: tokens_per_s, normalize: gpu-ad}
"""


@pytest.fixture
def experiment(tmp_path, tiny_trace):
    path = tmp_path / "small.yaml"
    path.write_text(EXPERIMENT)
    return path


def _run(capsys, *argv) -> dict:
    assert main(["run", *map(str, argv), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_fields_resume_and_timeline(experiment, tiny_trace, tmp_path, capsys):
    out = tmp_path / "out"
    timeline = tmp_path / "tl.json"
    first = _run(capsys, experiment, "--trace", tiny_trace, "--out", out, "--timeline", timeline)
    assert first["experiment"] == "small" and len(first["runs"]) == 5
    for r in first["runs"]:
        for key in ("system", "pair", "batch", "draft_length", "tokens_per_s", "tokens_per_joule",
                    "latency_breakdown", "utilization", "pim_op_fraction", "tokens",
                    "request_latency_s"):
            assert key in r
        assert set(r["utilization"]) == {"gpu", "pim"}
        assert set(r["request_latency_s"]) == {"p50", "p99", "max"}
        assert {"generated", "drafted", "accepted", "discarded"} <= set(r["tokens"])
    assert [r["draft_length"] for r in first["runs"]] == [None, 3, None, 3, None]
    for name in ("results.json", "results.csv", "config.yaml", "small.png"):
        assert (out / name).is_file()
    events = json.loads(timeline.read_text())["traceEvents"]
    lanes = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert "TLM" in lanes
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert counters == {"GPU"}               # gpu-ad, the first run, has no PIM
    stamps = {p: p.stat().st_mtime_ns for p in (out / "runs").glob("*.json")}
    again = _run(capsys, experiment, "--trace", tiny_trace, "--out", out)
    assert again == first
    assert {p: p.stat().st_mtime_ns for p in (out / "runs").glob("*.json")} == stamps
    # a run saved before a record field existed is simulated again, to the same record
    old = sorted(stamps)[0]
    saved = json.loads(old.read_text())
    del saved["result"]["request_rate_jain"]
    old.write_text(json.dumps(saved))
    assert _run(capsys, experiment, "--trace", tiny_trace, "--out", out) == first
    assert "request_rate_jain" in json.loads(old.read_text())["result"]


def test_golden_small_experiment(experiment, tiny_trace, tmp_path, capsys):
    result = _run(capsys, experiment, "--trace", tiny_trace, "--out", tmp_path / "g", "--no-plot")
    keep = ("system", "draft_length", "tokens", "time_s", "tokens_per_s", "tokens_per_joule")
    got = [{k: r[k] for k in keep} for r in result["runs"]]
    if os.environ.get("SADDLE_REGEN_GOLDEN"):   # deliberate regeneration after a model change
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True))
    want = json.loads(GOLDEN.read_text())
    hint = " (after a deliberate cost-model or trace-format change: SADDLE_REGEN_GOLDEN=1)"
    assert [g["tokens"] for g in got] == [w["tokens"] for w in want], hint
    for g, w in zip(got, want):
        assert g["time_s"] == pytest.approx(w["time_s"], rel=1e-9), g["system"] + hint
        assert g["tokens_per_joule"] == pytest.approx(w["tokens_per_joule"], rel=1e-9), g["system"] + hint


def test_bad_experiment_names_file_and_key(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(EXPERIMENT.replace("batches: [4]", "batches: [0]"))
    assert main(["run", str(path)]) == 2
    assert f"{path}: batches[0]" in capsys.readouterr().err


def test_requests_override_replaces_the_workload_size():
    from sim.experiments.grid import load_experiment, resolve_path
    path = resolve_path("default")
    _, runs = load_experiment(path)
    assert {r.requests for r in runs} == {8 * 64}          # requests_per_batch: 8 at batch 64
    _, runs = load_experiment(path, requests=100)
    assert {r.requests for r in runs} == {100}
    with pytest.raises(ConfigError, match="batch 64 exceeds the 5 requests the run replays"):
        load_experiment(path, requests=5)
    _, runs = load_experiment(path, requests="all")
    assert {r.requests for r in runs} == {None}


def test_requests_flag_rejects_garbage(capsys):
    with pytest.raises(SystemExit):
        main(["run", "default", "--requests", "-3"])
    assert "expected a positive integer or 'all'" in capsys.readouterr().err


def test_aging_from_an_experiment_file(tmp_path, tiny_trace, capsys):
    """`saddle run` takes the Shared Pool's aging K per system entry, one run per K; runs
    without it carry no aging field (their records are those of before aging existed)."""
    path = tmp_path / "aging.yaml"
    path.write_text(EXPERIMENT.replace("name: small", "name: aging").replace(
        "  - {system: saddle, tau: 0.3}",
        "  - {system: saddle, tau: 0.3}\n  - {system: saddle, tau: 0.3, label: aged, aging_passes: [1, 3]}")
        .replace("plot: {x: system", "plot: {x: aging_passes"))
    runs = _run(capsys, path, "--trace", tiny_trace, "--out", tmp_path / "o")["runs"]
    assert [(r["system"], r.get("aging_passes")) for r in runs[4:]] == [
        ("saddle", None), ("aged", 1), ("aged", 3)]
    assert (tmp_path / "o" / "aging.png").is_file()


def test_saved_runs_are_simulated_again_when_a_config_file_changes(experiment, tiny_trace, tmp_path,
                                                                  capsys, monkeypatch):
    import shutil

    from sim.experiments import runner
    configs = tmp_path / "configs"
    for kind in runner.RUN_CONFIGS:
        shutil.copytree(runner.CONFIGS / kind, configs / kind)
    monkeypatch.setattr(runner, "CONFIGS", configs)
    runner._configs_digest.cache_clear()
    out = tmp_path / "out"
    first = _run(capsys, experiment, "--trace", tiny_trace, "--out", out, "--no-plot")
    stamps = {p.name: p.stat().st_mtime_ns for p in (out / "runs").glob("*.json")}
    saddle = configs / "systems" / "saddle.yaml"
    saddle.write_text(saddle.read_text().replace("capacity_rule: ridge", "capacity_rule: pool"))
    runner._configs_digest.cache_clear()
    again = _run(capsys, experiment, "--trace", tiny_trace, "--out", out, "--no-plot")
    assert again == first          # the copies are not what the runs read: same results, re-simulated
    assert all(p.stat().st_mtime_ns != stamps[p.name] for p in (out / "runs").glob("*.json"))
    runner._configs_digest.cache_clear()
