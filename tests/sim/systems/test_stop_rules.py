"""The stopping rules beyond the paper on hand-made traces with known stopping points, the
acceptance table fitted by hand, and their errors."""
from __future__ import annotations

import numpy as np
import pytest

from common.errors import ConfigError
from sim.manager.controller import Controller, acceptance_bin
from sim.manager.formats import quantize_prob
from sim.systems.registry import CALIBRATION_BINS, STOP_RULES, calibration_table, check_entropy
from tests.sim.experiments.test_errors import _fails
from traces.format import RequestTrace


def trace(p, accepted, offpath=(), entropy=None, offpath_entropy=None) -> RequestTrace:
    extra = {}
    if entropy is not None:
        extra = {"entropy": np.array(entropy, dtype=float),
                 "offpath_entropy": [np.array(e, dtype=float) for e in offpath_entropy]}
    return RequestTrace("hand", "open_qa", 4, np.array(p, dtype=float), np.array(accepted, dtype=bool),
                        [np.array(o, dtype=float) for o in offpath], extra)


def rule(name, param, calibration=None, max_draft_len=8):
    return STOP_RULES[name](draft_length=None, tau_raw=0, max_draft_len=max_draft_len, param=param,
                            calibration=calibration)


ALL_ACCEPTED = trace([0.9, 0.8, 0.4, 0.95, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9], [1] * 10)


def test_confidence_stops_after_the_first_token_below_c():
    r = rule("confidence", 0.5)
    assert r.planned(ALL_ACCEPTED, 0, 10) == 3        # 0.4 < 0.5: the third token is drafted, then stop
    assert r.planned(ALL_ACCEPTED, 3, 7) == 7         # none below 0.5 from 3 on: the cap (remaining)
    assert r.planned(ALL_ACCEPTED, 3, 10) == 7        # 7 positions left in the output
    assert rule("confidence", 0.5, max_draft_len=2).planned(ALL_ACCEPTED, 0, 10) == 2
    assert rule("confidence", 0.0).planned(ALL_ACCEPTED, 0, 10) == 8       # never below 0
    assert rule("confidence", 0.9).planned(ALL_ACCEPTED, 0, 10) == 2       # 0.8 < 0.9
    # The comparison is on UQ1.16 raws: p = c exactly does not stop.
    assert rule("confidence", 0.4).planned(ALL_ACCEPTED, 0, 10) == 8


def test_confidence_reads_the_off_path_probabilities_after_a_mismatch():
    # Mismatch at 1; the DLM continues on its own path with 0.7, then 0.3.
    t = trace([0.9, 0.8, 0.9, 0.9, 0.9], [1, 0, 1, 1, 1], offpath=[[0.7, 0.3]])
    assert rule("confidence", 0.5).planned(t, 0, 5) == 4


def test_calibration_table_by_hand():
    # 16 bins of width 1/16. Bin 15 ([0.9375, 1]): p = 0.95, 0.99, 1.0, 0.97 with accepted
    # 1, 1, 0, 1 -> 3/4. Bin 8 ([0.5, 0.5625)): p = 0.5, 0.55 accepted 0, 1 -> 1/2. Bin 1: p =
    # 0.1, rejected -> 0. Every other bin is empty -> its midpoint (2k + 1) / 32.
    a = trace([0.95, 0.5, 0.99, 0.1], [1, 0, 1, 0], offpath=[[0.2], [0.3]])
    b = trace([1.0, 0.55, 0.97], [0, 1, 1], offpath=[[0.5]])
    table = calibration_table([a, b])
    want = [quantize_prob((2 * k + 1) / 32) for k in range(16)]
    want[15], want[8], want[1] = 49152, 32768, 0
    assert list(table) == want
    assert len(table) == CALIBRATION_BINS
    assert [acceptance_bin(quantize_prob(x)) for x in (0.0, 0.0625, 0.5, 0.95, 1.0)] == [0, 1, 8, 15, 15]


def calibrated_round(h, table, probs, max_draft_len=8) -> int:
    """Tokens the Controller drafts in a round with the calibrated rule's tau and table."""
    r = rule("calibrated", h, table, max_draft_len)
    assert r.planned(ALL_ACCEPTED, 0, 10) is None and r.planned_by_controller
    ctl = Controller(1, max_draft_len, r.controller_tau, r.acceptance_table)
    slot = ctl.admit(0, 0)
    for t, p in enumerate(probs, 1):
        if ctl.advance(slot, quantize_prob(p)):
            return t
    return len(probs)


def test_calibrated_stops_when_the_round_is_likely_rejected():
    table = [quantize_prob((2 * k + 1) / 32) for k in range(16)]
    table[14] = 49152                  # a(p) = 0.75 for p in [0.875, 0.9375): 0.9 lands here
    table[15] = 62259                  # a(p) = 0.95 for p >= 0.9375
    probs = [0.9, 0.9, 0.95, 0.9, 0.9]
    # A: 49152, then 49152 * 49152 >> 16 = 36864 (0.5625). h = 0.4: stop when A < 39322 (0.6).
    assert calibrated_round(0.4, table, probs) == 2
    # h = 0.5: limit 32768; A3 = 36864 * 62259 >> 16 = 35020, A4 = 35020 * 49152 >> 16 = 26265.
    assert calibrated_round(0.5, table, probs) == 4
    # SADDLE's H on the DLM's own word stays above 0.6 over all five (0.9, 0.81, 0.77, 0.69,
    # 0.62): the table is what stops the calibrated rule earlier.
    assert np.prod(probs) >= 0.6
    assert calibrated_round(1.0, table, probs) == 5     # limit 0: never
    assert calibrated_round(0.0, table, probs) == 1     # limit 1: at once
    assert calibrated_round(1.0, table, probs, max_draft_len=3) == 3


def test_entropy_stops_when_the_bound_falls_below_lambda():
    # lambda = 0.75: stop when E > (1 - 0.75)^2 / gamma = 0.0625 / 0.25 = 0.25 nats.
    t = trace([0.9] * 6, [1, 1, 0, 1, 1, 1], offpath=[[0.9, 0.9, 0.9]],
              entropy=[0.1, 0.2, 0.25, 0.9, 0.9, 0.9], offpath_entropy=[[0.2, 0.3, 0.1]])
    r = rule("entropy", 0.75)
    # Tokens 0, 1 on path (0.1, 0.2), token 2 the mismatch (0.25, not above), then its off-path
    # entropies 0.2, 0.3: the fifth token trips the bound.
    assert r.planned(t, 0, 6) == 5
    assert r.planned(t, 3, 3) == 1                     # 0.9 at once
    assert rule("entropy", 0.0).planned(t, 3, 3) == 3  # bound 4 nats: never
    assert rule("entropy", 0.5).planned(t, 3, 3) == 3  # bound 1 nat: 0.9 is below it


def test_entropy_rule_refuses_a_trace_without_entropy():
    plain = trace([0.9, 0.9], [1, 1])
    with pytest.raises(ConfigError, match=r"my\.jsonl: request hand has no 'entropy' field: stop rule 'entropy'"):
        check_entropy([plain], "my.jsonl")


@pytest.mark.parametrize("name, param, message", [
    ("confidence", None, r"'confidence' needs its parameter c in \[0, 1\], found None"),
    ("entropy", 1.5, r"'entropy' needs its parameter lambda in \[0, 1\], found 1.5"),
    ("calibrated", 0.5, r"'calibrated' needs an acceptance table of 16 entries, found None"),
])
def test_rule_parameters_are_checked(name, param, message):
    with pytest.raises(ConfigError, match=message):
        rule(name, param)
    with pytest.raises(ConfigError, match="takes no parameter"):
        rule("oracle", 0.5)


# -- in runs and experiments ---------------------------------------------------------------

STOP_EXPERIMENT = """
name: stops
pairs: [opt-66b+opt-1.3b]
batches: [2]
systems:
  - {system: saddle}
  - {system: saddle, stop: confidence, stop_param: 0.5, label: confidence}
  - {system: oracle}
workload: {split: all, batching: continuous, seed: 0}
compare: {reference: oracle, baseline: saddle}
"""


@pytest.mark.parametrize("old, new, message", [
    ("stop: confidence,", "stop: confidnce,", "systems[1]: stop: expected one of ['calibrated', 'confidence', 'entropy', 'oracle', 'threshold'], found 'confidnce'"),
    ("{system: saddle, stop: confidence", "{system: gpu-sd, draft_length: 2, stop: confidence",
     "systems[1]: stop: system gpu-sd has no adaptive stopping rule to replace"),
    ("{system: oracle}", "{system: oracle, stop_param: 0.3}",
     "systems[2].stop_param: stop rule 'oracle' takes no parameter"),
    ("stop_param: 0.5", "stop_param: 1.5", "systems[1].stop_param: expected a number in [0, 1], found 1.5"),
    ("reference: oracle", "reference: orcle", "compare.reference: 'orcle' is none of the experiment's systems"),
])
def test_bad_stop_entries_name_file_and_key(tmp_path, capsys, tiny_trace, old, new, message):
    exp = tmp_path / "exp.yaml"
    exp.write_text(STOP_EXPERIMENT.replace(old, new))
    err = _fails(capsys, "run", exp, "--trace", tiny_trace, "--out", tmp_path / "out", "--jobs", 1)
    assert message in err, err
    assert not (tmp_path / "out" / "runs").exists() or not list((tmp_path / "out" / "runs").iterdir())


def test_entropy_rule_on_a_trace_without_entropy_fails_before_running(tmp_path, capsys, tiny_trace):
    exp = tmp_path / "exp.yaml"
    exp.write_text(STOP_EXPERIMENT.replace("stop: confidence, stop_param: 0.5", "stop: entropy, stop_param: 0.5"))
    err = _fails(capsys, "run", exp, "--trace", tiny_trace, "--out", tmp_path / "out", "--jobs", 1)
    assert f"{tiny_trace}: request r0 has no 'entropy' field: stop rule 'entropy' needs" in err


def test_rules_run_and_the_comparison_table(tmp_path, capsys, tiny_trace):
    from sim.cli import main
    exp = tmp_path / "exp.yaml"
    exp.write_text(STOP_EXPERIMENT)
    assert main(["run", str(exp), "--trace", tiny_trace, "--out", str(tmp_path / "out"), "--jobs", "1",
                 "--no-plot"]) == 0
    out = capsys.readouterr().out
    assert "gap to oracle" in out and "tok/s vs saddle (geomean)" in out
    import json
    summary = json.loads((tmp_path / "out" / "results.json").read_text())
    rows = {r["system"]: r for r in summary["compare"]["rows"]}
    assert rows["oracle"]["gap_to_reference"] == 0
    runs = {r["system"]: r for r in summary["runs"]}
    assert runs["confidence"]["stop_param"] == 0.5 and runs["confidence"]["stop"] == "confidence"
    for name, r in rows.items():
        t = runs[name]["tokens"]
        assert r["drafted_per_accepted"] == t["drafted"] / t["accepted"]


def test_tune_stop_scores_every_value_and_keeps_the_best(tmp_path, capsys):
    """tune-tau's procedure for a rule's parameter, on a tiny settings file (2 natural-length
    validation requests, batch 2, two values); nothing written with write=False."""
    from tuning.tau import tune_stop

    settings = tmp_path / "tune.yaml"
    settings.write_text("system: saddle\nbatches: [2]\nrequests: 2\nsequence_length: null\n"
                        "grids: {confidence: [0.5, 0.9]}\n")
    best = tune_stop("opt-66b+opt-1.3b", "confidence", str(settings), write=False, out=tmp_path / "out")
    out = capsys.readouterr().out
    scores = {float(line.split()[2].rstrip(":")): float(line.split()[3])
              for line in out.splitlines() if line.startswith("confidence c ")}
    assert set(scores) == {0.5, 0.9} and best == max(scores, key=scores.get)
    assert len(list((tmp_path / "out" / "runs").glob("*.json"))) == 2
    with pytest.raises(ConfigError, match=r"tune.yaml: missing key 'grids.entropy'"):
        tune_stop("opt-66b+opt-1.3b", "entropy", str(settings), write=False, out=tmp_path / "out")
