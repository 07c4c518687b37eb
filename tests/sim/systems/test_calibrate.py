"""The calibration knob: accept levels shifted in log-odds, nothing else touched."""
from validation.calibrate import score, shifted_config

TEXT = """categories:
  open_qa:
    accept_start: 0.80     # comment kept
    accept_end: 0.50
    drift_tokens: 40
"""


def test_shift_moves_only_accept_levels_in_log_odds():
    out = shifted_config(TEXT, 0.5)
    # logit(0.8) + 0.5 = 1.8863 -> 0.868; logit(0.5) + 0.5 = 0.5 -> 0.622
    assert out == TEXT.replace("0.80", "0.868").replace("0.50", "0.622")
    assert shifted_config(TEXT, 0.0) == TEXT.replace("0.80", "0.800").replace("0.50", "0.500")


def test_score_counts_violations_then_distance_to_published_speedup():
    good = {"s8@8": 2.0, "s8@16": 1.5, "s8@32": 1.1, "s8@64": 0.9, "s8@128": 0.7,
            "s4@64": 1.41, "s12@64": 0.8}
    assert score(good) == (0, 0.0)
    bad = dict(good, **{"s8@32": 0.95, "s12@64": 1.5})
    assert score(bad)[0] == 3       # s8@32 <= 1, s12@64 >= 1, s4@64 <= s12@64


def test_read_log_parses_printed_candidates(tmp_path):
    log = tmp_path / "cal.out"
    log.write_text("delta +0.50: violations 0, s8@8=3.21 s4@64=1.07\nchosen delta for x: +0.50\n")
    from validation.calibrate import read_log
    assert read_log(log) == {0.5: {"s8@8": 3.21, "s4@64": 1.07}}
