"""Statistics against values computed by hand on tests/traces/data/tiny.jsonl.

Requests (accepted flags): a = 1 1 0 1 1 1 0 1 (open_qa), b = 0 0 1 (open_qa), c = 1 1 1 1
(creative_writing). Rounds of fixed-d speculation, as (accepted k, drafted m):
  d = 2:  a (2,2) (2,2) (0,2) (1,1)   b (0,2) (0,2) (1,1)   c (2,2) (1,1)
  d = 4:  a (2,4) (3,4) (1,1)         b (0,3) (0,2) (1,1)   c (4,4)
  d = 8:  a (2,8) (3,5) (1,1)         b (0,3) (0,2) (1,1)   c (4,4)     (d = 12 the same)
"""
from __future__ import annotations

import json

import pytest

from sim.cli import main as saddle
from tests.traces.helpers import TINY
from traces.io import read_trace
from traces.stats import reliability_table, summary_text, trace_stats


@pytest.fixture(scope="module")
def stats():
    return trace_stats(*read_trace(TINY), bins=4)


def test_rounds_of_one_request():
    _, reqs = read_trace(TINY)
    k, m = reqs[0].fixed_d_rounds(4)
    assert k.tolist() == [2, 3, 1] and m.tolist() == [4, 4, 1]
    k, m = reqs[1].fixed_d_rounds(2)
    assert k.tolist() == [0, 0, 1] and m.tolist() == [2, 2, 1]
    # The same rounds, walked with leading_accepted (the simulator's accessor).
    for r in reqs:
        for d in (1, 2, 3, 5, 8, 12):
            t, ks = 0, []
            while t < r.output_len:
                ks.append(r.leading_accepted(t, d))
                t += ks[-1] + 1
            assert r.fixed_d_rounds(d)[0].tolist() == ks


def test_sizes(stats):
    assert stats["requests"] == 3 and stats["tokens"] == 15 and stats["prompt_tokens"] == 18
    assert stats["categories"]["open_qa"] == {
        "requests": 2, "tokens": 11, "prompt_tokens": 8, "mean_output_len": 5.5,
        "mean_prompt_len": 4.0, "onpath_acceptance": round(7 / 11, 6)}
    assert list(stats["categories"]) == ["open_qa", "creative_writing"]


def test_fixed_d_acceptance(stats):
    assert stats["fixed_d_acceptance"] == {
        "open_qa": {"2": 0.5, "4": round(7 / 15, 6), "8": 0.35, "12": 0.35},
        "creative_writing": {"2": 1.0, "4": 1.0, "8": 1.0, "12": 1.0}}
    assert stats["fixed_d_acceptance_all"] == {
        "2": 0.6, "4": round(11 / 19, 6), "8": round(11 / 24, 6), "12": round(11 / 24, 6)}


def test_accepted_per_round(stats):
    apr = stats["accepted_per_round"]
    assert apr["d"] == 8
    assert apr["by_category"]["open_qa"] == {"mean": [1.0, 1.5, 1.0], "requests": [2, 2, 2]}
    assert apr["by_category"]["creative_writing"] == {"mean": [4.0], "requests": [1]}
    assert apr["all"] == {"mean": [2.0, 1.5, 1.0], "requests": [3, 2, 2]}


def test_reliability(stats):
    rel = stats["reliability"]
    # p by bin: [0, .25): .2 .1 (rejected); [.25, .5): .3 .4 (rejected);
    # [.5, .75): .7 .6 .55 .6 (accepted); [.75, 1]: .9 .8 1.0 .95 .99 .85 .76 (accepted)
    assert rel["bins"] == [
        {"low": 0.0, "high": 0.25, "positions": 2, "mean_p": 0.15, "acceptance": 0.0},
        {"low": 0.25, "high": 0.5, "positions": 2, "mean_p": 0.35, "acceptance": 0.0},
        {"low": 0.5, "high": 0.75, "positions": 4, "mean_p": 0.6125, "acceptance": 1.0},
        {"low": 0.75, "high": 1.0, "positions": 7, "mean_p": round(6.25 / 7, 6), "acceptance": 1.0}]
    # ECE = 2/15 * .15 + 2/15 * .35 + 4/15 * .3875 + 7/15 * (1 - 6.25/7) = 0.22
    assert rel["ece"] == pytest.approx(0.22, abs=1e-6)


def test_reliability_empty_bins():
    _, reqs = read_trace(TINY)
    rows = reliability_table(reqs[2:], bins=2)["bins"]
    assert rows[0] == {"low": 0.0, "high": 0.5, "positions": 0, "mean_p": None, "acceptance": None}
    assert rows[1]["positions"] == 4


def test_summary_text(stats):
    text = summary_text(stats)
    assert "open_qa" in text and "0.500  0.467  0.350  0.350" in text
    assert "reliability (ECE 0.220)" in text


def test_stats_command_json_and_plots(tmp_path, capsys):
    assert saddle(["trace", "stats", str(TINY), "--json", "--bins", "4",
                   "--plot", str(tmp_path / "plots")]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out == json.loads(json.dumps(trace_stats(*read_trace(TINY), bins=4)))
    assert {"requests", "tokens", "fixed_d_acceptance"} <= set(out)
    names = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert names == ["acceptance_vs_d.png", "accepted_per_round.png", "categories.png",
                     "reliability.png"]
    for name in names:
        data = (tmp_path / "plots" / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert "wrote" in captured.err
