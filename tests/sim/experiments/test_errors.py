"""Every bad input of `saddle run` (and its neighbours) is one clear error: exit status 2, one
line naming the file and the key path, no traceback, and nothing simulated (issue 15). Also the
behaviours that came with it: portable results, --out, --timeline-run, --version, help texts."""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
from pathlib import Path

import numpy as np
import pytest

from common.errors import SaddleError
from common.paths import ROOT
from sim.cli import build_parser, main
from tests.sim.systems.conftest import make_trace, request

PAIR = "opt-66b+opt-1.3b"
EXPERIMENT = f"""
name: small
description: "three systems"
pairs: [{PAIR}]
batches: [2]
systems:
  - {{system: gpu-ad}}
  - {{system: gpu-sd, draft_length: 2}}
  - {{system: pim-ad}}
workload: {{split: all, batching: continuous, seed: 0}}
plot: {{x: system, metric: tokens_per_s, normalize: gpu-ad}}
"""


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> str:
    rng = np.random.default_rng(3)
    reqs = [request(f"r{i}", 10 + 5 * i, rng.random(6 + 2 * i) < 0.7) for i in range(4)]
    return str(make_trace(tmp_path_factory.mktemp("trace") / "t.jsonl", reqs))


@pytest.fixture
def no_simulation(monkeypatch):
    """Any simulated run fails the test: errors must come before the first run."""
    import sim.experiments.runner as runner

    def refuse(*a, **k):
        raise AssertionError("a run was simulated")
    monkeypatch.setattr(runner, "simulate", refuse)


def _write(tmp_path, text: str, name: str = "exp.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _fails(capsys, *argv) -> str:
    """The one error line of a command that must fail cleanly (exit 2, no traceback)."""
    assert main([str(a) for a in argv]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    # A grid's summary line ("NAME: N runs: ...") may come before an error in writing outputs.
    lines = [ln for ln in err.strip().splitlines() if not re.match(r"saddle: \S+: \d+ runs: ", ln)]
    assert len(lines) == 1 and lines[0].startswith("saddle: error: "), err
    return lines[0]


# -- files that are not there ----------------------------------------------------------------

@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_run_trace_flag_missing_or_a_directory(tmp_path, capsys, no_simulation, trace, kind):
    exp = _write(tmp_path, EXPERIMENT)
    path = tmp_path / "nothing.jsonl" if kind == "missing" else tmp_path
    err = _fails(capsys, "run", exp, "--trace", path, "--out", tmp_path / "out", "--jobs", 1)
    assert f"--trace {path}: " in err
    assert ("no such trace file" if kind == "missing" else "is a directory") in err
    assert not (tmp_path / "out").exists()


def test_trace_check_of_a_directory_says_directory(tmp_path, capsys):
    err = _fails(capsys, "trace", "check", tmp_path)
    assert f"{tmp_path}: is a directory, expected a trace file" in err


def test_run_of_a_missing_experiment_file_or_name(tmp_path, capsys):
    assert "no such experiment file" in _fails(capsys, "run", tmp_path / "nope.yaml")
    assert "is a directory" in _fails(capsys, "run", str(tmp_path) + "/")
    assert "unknown experiment config 'fig99' (did you mean 'fig19'?)" in _fails(capsys, "run", "fig99")


# -- unknown names -----------------------------------------------------------------------------

@pytest.mark.parametrize("saddle", [False, True])
def test_unknown_pair_names_file_key_and_the_closest_pair(tmp_path, capsys, no_simulation, saddle):
    text = EXPERIMENT.replace(f"pairs: [{PAIR}]", "pairs: [opt-66b+opt-1.3x]")
    if saddle:      # today's "unknown tau config" came from SADDLE's tau lookup
        text = text.replace("  - {system: pim-ad}", "  - {system: pim-ad}\n  - {system: saddle}")
    exp = _write(tmp_path, text)
    err = _fails(capsys, "run", exp)
    assert (f"{exp}: pairs[0]: unknown pair config 'opt-66b+opt-1.3x' "
            f"(did you mean '{PAIR}'?)") in err


def test_unknown_system_names_file_and_entry(tmp_path, capsys, no_simulation):
    exp = _write(tmp_path, EXPERIMENT.replace("{system: pim-ad}", "{system: pim-adx}"))
    err = _fails(capsys, "run", exp)
    assert f"{exp}: systems[2].system: unknown system config 'pim-adx' (did you mean 'pim-ad'?)" in err


@pytest.mark.parametrize("old, new, message", [
    ("split: all", "split: tst", "workload.split: unknown split 'tst' (did you mean 'test'?)"),
    ("batching: continuous", "batching: continous",
     "workload.batching: unknown batching 'continous' (did you mean 'continuous'?)"),
    ("normalize: gpu-ad", "normalize: gpu-adx",
     "plot.normalize: no system of the experiment is named 'gpu-adx' (did you mean 'gpu-ad'?)"),
    ("{system: gpu-ad}", "{system: gpu-ad, draft_length: 4}",
     "systems[0].draft_length: system gpu-ad does not take a fixed d"),
    ("{system: gpu-sd, draft_length: 2}", "{system: gpu-sd}",
     "systems[1].draft_length: system gpu-sd drafts a fixed d"),
    ("{system: pim-ad}", "{system: saddle, issue_rule: gpu-idel}",
     "systems[2].issue_rule: expected one of ['gpu-idle', 'tlm-idle', 'drained', 'cost'], found 'gpu-idel' "
     "(did you mean 'gpu-idle'?)"),
    ("{system: pim-ad}", "{system: pim-ad, tau: 0.3}",
     "systems[2].tau: system pim-ad has no stopping threshold"),
    ("{system: pim-ad}", "{system: pim-ad, batches: [4]}",
     "systems[2].batches[0]: 4 is not one of the experiment's batches [2]"),
    ("{system: pim-ad}", "{system: saddle, capacity_rule: fc_slack, capacity_slack: 11}",
     "systems[2].capacity_slack: expected a number in [0, 10]"),
    ("{system: pim-ad}", "{system: saddle, capacity_slack: 0.3}",
     "systems[2].capacity_slack: only capacity_rule fc_slack has a slack (saddle's rule here is 'ridge')"),
    ("{system: pim-ad}", "{system: saddle, capacity_rule: ridg}",
     "systems[2].capacity_rule: expected one of ['ridge', 'fc_slack', 'pool', 'cost'], found 'ridg' "
     "(did you mean 'ridge'?)"),
    ("{system: pim-ad}", "{system: pim-ad, aging_passes: 2}",
     "systems[2].aging_passes: system pim-ad has no Shared Pool"),
    ("{system: pim-ad}", "{system: saddle, aging_passes: [2, 0]}",
     "systems[2].aging_passes[1]: expected an integer >= 1, found 0"),
    ("{system: pim-ad}", "{system: saddle, aging_passes: 256}",
     "systems[2].aging_passes: expected at most 255, found 256"),
    ("batches: [2]", "batches: [2000]",
     "batches[0]: batch 2000 exceeds the 128 Controller slots of configs/manager.yaml "
     "(controller.max_requests) for saddle (systems[3])"),
])
def test_bad_names_and_values_name_file_and_key(tmp_path, capsys, no_simulation, trace,
                                                old, new, message):
    text = EXPERIMENT.replace(old, new)
    if "2000" in new:           # the Controller's slots bound a Shared Pool system's batch
        text = text.replace("  - {system: pim-ad}", "  - {system: pim-ad}\n  - {system: saddle}")
    assert text != EXPERIMENT
    exp = _write(tmp_path, text)
    err = _fails(capsys, "run", exp, "--trace", trace, "--jobs", 1, "--out", tmp_path / "o")
    assert f"{exp}: {message}" in err, err
    assert not (tmp_path / "o").exists()


# -- unknown keys --------------------------------------------------------------------------------

@pytest.mark.parametrize("line, key", [("bogus_key: 3", "bogus_key"), ("trace: /missing", "trace"),
                                       ("batchs: [4]", "batchs")])
def test_unknown_top_level_keys_are_refused(tmp_path, capsys, no_simulation, line, key):
    exp = _write(tmp_path, EXPERIMENT + line + "\n")
    err = _fails(capsys, "run", exp)
    assert f"{exp}: {key}: unknown key" in err
    if key == "batchs":
        assert "(did you mean 'batches'?)" in err


def test_a_typo_in_a_systems_entry_is_refused_with_the_right_key(tmp_path, capsys, no_simulation):
    exp = _write(tmp_path, EXPERIMENT.replace("draft_length: 2", "draft_lenght: 2"))
    err = _fails(capsys, "run", exp)
    assert f"{exp}: systems[1].draft_lenght: unknown key (did you mean 'draft_length'?)" in err


@pytest.mark.parametrize("old, new, message", [
    ("workload: {", "workload: {sedd: 1, ", "workload.sedd: unknown key (did you mean 'seed'?)"),
    ("normalize: gpu-ad}", "normalize: gpu-ad, metirc: x}", "plot.metirc: unknown key (did you mean 'metric'?)"),
])
def test_unknown_keys_in_nested_sections(tmp_path, capsys, no_simulation, old, new, message):
    exp = _write(tmp_path, EXPERIMENT.replace(old, new))
    assert f"{exp}: {message}" in _fails(capsys, "run", exp)


@pytest.fixture
def configs(tmp_path, monkeypatch):
    """A copy of configs/ the code reads instead of the shipped one."""
    import common.config
    import sim.systems.resolve
    copy = tmp_path / "configs"
    shutil.copytree(ROOT / "configs", copy, ignore=shutil.ignore_patterns("*.md"))
    monkeypatch.setattr(common.config, "CONFIGS", copy)
    monkeypatch.setattr(sim.systems.resolve, "CONFIGS", copy)
    return copy


@pytest.mark.parametrize("change, message", [
    (("capacity_rule:", "capacity_rul:"), "capacity_rul: unknown key (did you mean 'capacity_rule'?)"),
    (("hardware: saddle", "hardware: sadle"), "hardware: unknown hardware config 'sadle' (did you mean 'saddle'?)"),
])
def test_system_files_are_checked_completely(tmp_path, capsys, configs, no_simulation, change, message):
    text = (configs / "systems" / "saddle.yaml").read_text()
    assert change[0] in text
    (configs / "systems" / "saddle-typo.yaml").write_text(text.replace(*change))
    exp = _write(tmp_path, EXPERIMENT.replace("{system: pim-ad}", "{system: saddle-typo, tau: 0.3}"))
    err = _fails(capsys, "run", exp)
    assert f"{configs}/systems/saddle-typo.yaml: {message}" in err


def test_pair_files_name_unknown_models(tmp_path, capsys, configs, no_simulation):
    text = (configs / "models" / "pairs" / f"{PAIR}.yaml").read_text()
    (configs / "models" / "pairs" / "opt-typo.yaml").write_text(text.replace("opt-1.3b", "opt-1.3c"))
    exp = _write(tmp_path, EXPERIMENT.replace(f"pairs: [{PAIR}]", "pairs: [opt-typo]"))
    err = _fails(capsys, "run", exp)
    assert "opt-typo.yaml: dlm: unknown model config 'opt-1.3c' (did you mean 'opt-1.3b'?)" in err


def test_sweep_settings_files_refuse_unknown_keys_and_pairs(tmp_path, capsys, monkeypatch):
    import tuning.tau as tune
    monkeypatch.setattr(tune, "simulate", lambda p: (_ for _ in ()).throw(AssertionError("ran")))
    bad = _write(tmp_path, (ROOT / "configs/experiments/tune-tau.yaml").read_text()
                 .replace("tau_grid:", "tau_grd:"), "tune.yaml")
    err = _fails(capsys, "tune-tau", "--pair", PAIR, "--config", bad, "--dry-run")
    assert f"{bad}: tau_grd: unknown key (did you mean 'tau_grid'?)" in err
    err = _fails(capsys, "tune-tau", "--pair", "opt-66b", "--dry-run")
    assert "--pair: unknown pair config 'opt-66b'" in err
    assert "--pair: unknown pair config" in _fails(capsys, "calibrate", "--pair", "opt-66b+opt-1.3x")


# -- errors every run shares: once, before the first run -----------------------------------------

def test_a_split_the_trace_lacks_is_one_error_before_any_run(tmp_path, capsys, no_simulation):
    from traces.format import TraceHeader
    from traces.io import write_trace
    header = TraceHeader(pair=PAIR, target="opt-66b", draft="opt-1.3b", dataset="x",
                         max_seq_len=1024, offpath_len=2, provenance={}, splits={"validation": 2})
    path = tmp_path / "v.jsonl"
    write_trace(path, header, [request("a", 10, [1, 0, 1]), request("b", 10, [1, 1])])
    exp = _write(tmp_path, EXPERIMENT.replace("split: all", "split: test"))
    err = _fails(capsys, "run", exp, "--trace", path, "--jobs", 1)
    assert f"{exp}: the trace declares splits ['validation'], not 'test'" in err
    assert err.count("not 'test'") == 1


def test_a_bad_trace_is_one_error_before_any_run(tmp_path, capsys, no_simulation, trace):
    lines = Path(trace).read_bytes().split(b"\n")
    lines[2] = lines[2][:40]        # a cut line in the middle of the file
    bad = tmp_path / "cut.jsonl"
    bad.write_bytes(b"\n".join(lines))
    err = _fails(capsys, "run", _write(tmp_path, EXPERIMENT), "--trace", bad, "--jobs", 1)
    assert f"{bad}:3: found invalid JSON" in err and err.count(str(bad)) == 1


def test_a_cut_json_line_is_reported_at_the_decoders_column(tmp_path, trace):
    import orjson

    from traces.format import TraceError
    from traces.io import read_trace
    lines = Path(trace).read_bytes().split(b"\n")
    lines[2] = lines[2][:len(lines[2]) - 7]
    with pytest.raises(orjson.JSONDecodeError) as decoder:
        orjson.loads(lines[2])
    column = len(lines[2]) + 1          # just after the line's last character
    assert f"column {column}" in str(decoder.value)
    bad = tmp_path / "cut.jsonl"
    bad.write_bytes(b"\n".join(lines))
    with pytest.raises(TraceError, match=rf"cut.jsonl:3: found invalid JSON \(.* at column {column}\)"):
        read_trace(bad)


def test_runs_failing_alike_are_reported_once_and_nothing_is_called_saved(tmp_path, trace):
    from sim.experiments.runner import execute
    from sim.systems.run import RunParams
    runs = [RunParams(system="gpu-sd", pair=PAIR, batch=b, draft_length=0, trace=trace, split="all")
            for b in (1, 2, 3)]
    with pytest.raises(SaddleError) as err:
        execute("bad", runs, tmp_path, progress=False, jobs=1)
    text = str(err.value)
    assert "3 of 3 runs failed (no run finished), all with: " in text
    assert text.count("draft_length: expected an integer >= 1") == 1
    assert "saved" not in text


# -- portable results, --out ---------------------------------------------------------------------

def _run_json(capsys, *argv) -> dict:
    assert main(["run", *map(str, argv), "--json", "--no-plot", "--jobs", "1"]) == 0
    return json.loads(capsys.readouterr().out)


def test_results_move_with_their_folder_and_trace(tmp_path, capsys, monkeypatch, trace):
    """Saved runs name a trace inside the project relative to it, and match a run by the
    trace's content: a moved results folder (and trace) is still its own cache."""
    inside = ROOT / "build" / "test-portable" / f"{tmp_path.name}.jsonl"
    inside.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(trace, inside)
    try:
        exp = _write(tmp_path, EXPERIMENT)
        first = _run_json(capsys, exp, "--trace", inside, "--out", tmp_path / "a")
        saved = [p.read_text() for p in (tmp_path / "a" / "runs").glob("*.json")]
        saved.append((tmp_path / "a" / "config.yaml").read_text())
        assert len(saved) == 4 and not any(str(ROOT) in text for text in saved)
        rel = inside.relative_to(ROOT).as_posix()
        assert all(json.loads(t)["params"]["trace"] == rel for t in saved[:3])
        # Moved: the results folder and the trace, to elsewhere; nothing is simulated again.
        shutil.move(tmp_path / "a", tmp_path / "b")
        moved = tmp_path / "elsewhere.jsonl"
        shutil.move(inside, moved)
        import sim.experiments.runner as runner
        monkeypatch.setattr(runner, "simulate", lambda *a, **k: (_ for _ in ()).throw(AssertionError("ran")))
        again = _run_json(capsys, exp, "--trace", moved, "--out", tmp_path / "b")
        assert again == first
    finally:
        shutil.rmtree(inside.parent, ignore_errors=True)


def test_results_go_to_the_current_directory(tmp_path, capsys, monkeypatch, trace):
    exp = _write(tmp_path, EXPERIMENT)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv("SADDLE_RESULTS", raising=False)
    _run_json(capsys, exp, "--trace", trace)
    assert (work / "results" / "small" / "results.json").is_file()
    _run_json(capsys, exp, "--trace", trace, "--out", "mine")
    assert (work / "mine" / "results.json").is_file()


# -- --timeline-run, --version, help, interrupt ----------------------------------------------------

def test_timeline_records_the_chosen_run_and_says_where(tmp_path, capsys, trace):
    exp = _write(tmp_path, EXPERIMENT)
    out, tl = tmp_path / "o", tmp_path / "tl.json"
    assert main(["run", str(exp), "--trace", trace, "--out", str(out), "--no-plot", "--jobs", "1",
                 "--timeline", str(tl), "--timeline-run", "system=pim-ad,batch=2"]) == 0
    text = capsys.readouterr().out
    assert f"timeline: {tl} (run 3 of 3: pim-ad, {PAIR}, batch 2)" in text
    counters = {e["name"] for e in json.loads(tl.read_text())["traceEvents"] if e["ph"] == "C"}
    assert "PIM" in counters                 # pim-ad, not the first run (gpu-ad)
    err = _fails(capsys, "run", exp, "--trace", trace, "--out", out, "--timeline", tl,
                 "--timeline-run", "batch=2")
    assert "--timeline-run batch=2: 3 runs of" in err and "system=gpu-sd" in err
    err = _fails(capsys, "run", exp, "--trace", trace, "--out", out, "--timeline", tl,
                 "--timeline-run", "system=saddle")
    assert "no run of" in err
    assert "give --timeline too" in _fails(capsys, "run", exp, "--timeline-run", "system=gpu-ad")


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip().startswith("saddle 0.")


def test_every_option_of_every_command_has_help_text():
    missing = []

    def walk(parser, path):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, path + [name])
            elif not action.help:
                missing.append(" ".join(path + [action.option_strings[0] if action.option_strings
                                                else action.dest]))
    walk(build_parser(), ["saddle"])
    assert not missing


def test_interrupt_is_reported_once(monkeypatch, capsys):
    import sim.experiments.cli as cli

    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "run_handler", interrupted)
    previous = signal.getsignal(signal.SIGINT)
    try:
        assert main(["run"]) == 130
    finally:
        signal.signal(signal.SIGINT, previous)
    err = capsys.readouterr().err
    assert err == "saddle: interrupted; results written so far are kept\n"


def test_shipped_sweep_settings_pass_and_a_typo_is_refused(tmp_path):
    from common.config import config_path
    from common.errors import ConfigError
    from validation.calibrate import check_settings
    settings, shape = check_settings(config_path("experiments", "calibrate"), PAIR)
    assert settings["deltas"] and shape["category"] == "creative_writing"
    bad = _write(tmp_path, (ROOT / "configs/experiments/calibrate.yaml").read_text()
                 .replace("rounds_10_12_max", "rounds_10_12_mx"), "calibrate.yaml")
    with pytest.raises(ConfigError, match=re.escape(
            f"{bad}: acceptance_shape.{PAIR}.rounds_10_12_mx: unknown key "
            "(did you mean 'rounds_10_12_max'?)")):
        check_settings(bad, PAIR)
    with pytest.raises(ConfigError, match="--from-log nope.txt: no such file"):
        check_settings(config_path("experiments", "calibrate"), PAIR, "nope.txt")


def test_an_entry_repeating_another_is_refused(tmp_path, capsys, no_simulation):
    exp = _write(tmp_path, EXPERIMENT.replace("  - {system: pim-ad}",
                                              "  - {system: pim-ad}\n  - {system: gpu-sd, draft_length: [4, 2]}"))
    err = _fails(capsys, "run", exp)
    assert f"{exp}: systems[3]: the same runs as systems[1]" in err


# -- one rule, one message -------------------------------------------------------------------------

@pytest.mark.parametrize("field, value, message", [
    ("issue_rule", "soon", "issue_rule: expected one of ['gpu-idle', 'tlm-idle', 'drained', 'cost'], "
                           "found 'soon'"),
    ("capacity_rule", "ridg", "capacity_rule: expected one of ['ridge', 'fc_slack', 'pool', 'cost'], "
                              "found 'ridg' (did you mean 'ridge'?)"),
    ("aging_passes", 256, "aging_passes: expected at most 255, found 256"),
    ("dlm_fc_threshold", -1, "dlm_fc_threshold: expected an integer >= 0, found -1"),
])
def test_an_experiment_and_the_api_say_the_same(tmp_path, capsys, no_simulation, trace, field,
                                                 value, message):
    """An entry of an experiment file and a RunParams given to simulate are checked by the same
    rule (sim/systems/resolve.py): the message differs only in where the value was read."""
    from sim.systems.run import RunParams, simulate
    exp = _write(tmp_path, EXPERIMENT.replace("{system: pim-ad}", f"{{system: saddle, {field}: {value}}}"))
    assert f"{exp}: systems[2].{message}" in _fails(capsys, "run", exp, "--trace", trace)
    with pytest.raises(SaddleError) as err:
        simulate(RunParams(system="saddle", pair=PAIR, batch=2, trace=trace, split="all",
                           source="api", **{field: value}))
    assert str(err.value) == f"api: {message}"


@pytest.mark.parametrize("argv, line", [
    (["run", "--jobs", "x"],
     "saddle run: error: argument --jobs/-j: expected a positive integer, found 'x' "
     "(see saddle run --help)"),
    (["frobnicate"], "saddle: error: argument COMMAND: invalid choice: 'frobnicate'"),
    (["trace", "synth", "--pair", "opt-66b+opt-1.3b"],
     "saddle trace synth: error: the following arguments are required"),
    (["hw", "timing", "--bogus"], "saddle: error: unrecognized arguments: --bogus"),
])
def test_an_argument_error_is_one_line(capsys, argv, line):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(line), err


# -- outputs ------------------------------------------------------------------------------------

@pytest.mark.parametrize("option, where", [
    ("--out", "file/sub"), ("--out", "file"), ("--timeline", "file/t.json"), ("--timeline", "dir"),
])
def test_an_output_that_cannot_be_written_is_refused_before_any_run(tmp_path, capsys, trace,
                                                                      no_simulation, option, where):
    exp = _write(tmp_path, EXPERIMENT)
    (tmp_path / "file").write_text("a regular file")
    (tmp_path / "dir").mkdir()
    argv = ["run", exp, "--trace", trace, "--jobs", 1, option, tmp_path / where]
    if option == "--timeline":
        argv += ["--out", tmp_path / "o"]
    err = _fails(capsys, *argv)
    assert err.startswith(f"saddle: error: {option} {tmp_path / where}: "), err


def test_a_results_folder_from_the_environment_is_checked_too(tmp_path, capsys, trace,
                                                              no_simulation, monkeypatch):
    exp = _write(tmp_path, EXPERIMENT)
    (tmp_path / "file").write_text("a regular file")
    monkeypatch.setenv("SADDLE_RESULTS", str(tmp_path / "file"))
    err = _fails(capsys, "run", exp, "--trace", trace, "--jobs", 1)
    assert err.startswith(f"saddle: error: results folder {tmp_path / 'file' / 'small'}: ")
    assert "is a file, not a folder" in err


def test_a_failed_write_is_one_error_and_keeps_the_runs(tmp_path, capsys, trace, monkeypatch):
    import errno

    import sim.experiments.runner as runner
    exp = _write(tmp_path, EXPERIMENT)

    def disk_full(out, *args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(out / "results.json"))
    monkeypatch.setattr(runner, "write_results", disk_full)
    out = tmp_path / "o"
    err = _fails(capsys, "run", exp, "--trace", trace, "--jobs", 1, "--out", out)
    assert err == (f"saddle: error: {out / 'results.json'}: No space left on device; results "
                   "written before it are kept")
    assert len(list((out / "runs").glob("*.json"))) == 3


# -- --readme: the README's tables of the shipped workload, checked before any run -------------

def test_readme_needs_a_compare_table(tmp_path, capsys, no_simulation, trace):
    exp = _write(tmp_path, EXPERIMENT)
    line = _fails(capsys, "run", exp, "--trace", trace, "--readme", "--out", tmp_path / "out")
    assert "--readme: experiment small has no compare: table to write" in line


def test_readme_refuses_a_changed_workload(tmp_path, capsys, no_simulation):
    assert main(["run", "stopping", "--requests", "512", "--readme", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err      # after the check's progress line, when it took a second
    assert err.strip().splitlines()[-1].startswith("saddle: error: --readme: the README's tables are of the "
                                                   "shipped workload") and "Traceback" not in err


def test_readme_needs_the_experiments_block(tmp_path, capsys, no_simulation, trace):
    exp = _write(tmp_path, EXPERIMENT.replace("plot:", "compare: {reference: gpu-ad}\nplot:"))
    line = _fails(capsys, "run", exp, "--trace", trace, "--readme", "--out", tmp_path / "out")
    assert "has no block for small" in line
