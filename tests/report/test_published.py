"""Published values beside ours (report/published.py) and the grid's paper-workload keys."""
import math

import pytest

from common.errors import ConfigError
from report import published
from sim.experiments.grid import load_experiment, resolve_path


def rec(system, pair, batch, tps, d=None, passes=10, verify_s=1.0, time_s=1.0, window=1.0):
    """A run record with tokens/s ``tps`` over its window; ``window`` = window / run tokens/s."""
    run_tps = tps / window
    return {"system": system, "pair": pair, "batch": batch, "sequence_length": None,
            "draft_length": d, "tokens_per_s": tps, "run_tokens_per_s": run_tps,
            "time_s": time_s, "verification_s": verify_s, "verification_passes": passes,
            "tokens": {"generated": run_tps * time_s}}


RECORDS = [rec("ad", "p", 16, 100), rec("sd", "p", 16, 200), rec("new", "p", 16, 300),
           rec("ad", "p", 128, 100), rec("sd", "p", 128, 50), rec("new", "p", 128, 400),
           rec("ad", "q", 128, 10), rec("sd", "q", 128, 20), rec("new", "q", 128, 5)]


def test_claims_by_hand():
    pub = {"source": "hand", "claims": [
        {"kind": "mean_ratio", "num": "new", "den": "sd", "value": 2.0},
        {"kind": "best_count", "systems": ["ad", "sd", "new"], "best": "new", "value": 3},
        {"kind": "below", "lower": "sd", "higher": "ad", "where": {"batch": 128}, "value": "all"},
        {"kind": "ratio", "num": "new", "den": "ad", "where": {"batch": 16}, "value": 3.3},
        {"kind": "argmax", "system": "sd", "over": "batch", "where": {"pair": "p"}, "value": 16}]}
    published.check(pub, "x.yaml")
    rows = published.compare(pub, RECORDS)
    # new / sd = 1.5, 8, 0.25 -> geometric mean 3 ** (1/3) * ... = (1.5 * 8 * 0.25) ** (1/3)
    assert rows[0]["ours"] == pytest.approx(round(3 ** (1 / 3), 3))
    assert "arithmetic 3.25" in rows[0]["detail"] and not rows[0]["agrees"]
    assert rows[1]["ours"] == "2 of 3" and not rows[1]["agrees"]
    assert rows[2]["ours"] == "1 of 2" and rows[2]["published"] == "2 of 2"
    assert rows[3]["ours"] == 3.0 and rows[3]["agrees"]                 # within 10 %
    assert rows[4]["ours"] == 16 and rows[4]["agrees"]
    text = published.table(pub, rows)
    assert text.startswith("published (hand) vs ours:") and "NO" in text


def test_a_ratio_off_is_decomposed_into_factors_that_multiply_to_it():
    # num: 600 tokens over 2 s (300/s), 10 passes of 0.1 s busy 1 s, window 1.5x the run rate.
    # den: 400 tokens over 4 s (100/s), 40 passes of 0.075 s busy 3 s, window = run.
    records = [rec("sd", "p", 16, 450, passes=10, verify_s=1.0, time_s=2.0, window=1.5),
               rec("ad", "p", 16, 100, passes=40, verify_s=3.0, time_s=4.0)]
    claim = {"kind": "mean_ratio", "num": "sd", "den": "ad", "value": 9.0}
    f = published.decompose(records, claim)
    assert f == pytest.approx({"tokens per pass": 60 / 10, "pass time": 0.075 / 0.1,
                               "verifying share": 0.5 / 0.75, "window": 1.5})
    assert math.prod(f.values()) == pytest.approx(4.5)
    row, = published.compare({"source": "s", "claims": [claim]}, records)
    assert row["ours"] == 4.5 and not row["agrees"] and row["factors"]["tokens per pass"] == 6.0
    text = published.table({"source": "s"}, [row])
    assert "why ours differs" in text and "6.000" in text and "0.750" in text
    claim["value"] = 4.6                                # agrees: no decomposition
    assert "factors" not in published.compare({"source": "s", "claims": [claim]}, records)[0]


def test_bad_published_section_names_the_file():
    with pytest.raises(ConfigError, match=r"x.yaml: published.claims\[0\]: kind ratio needs \['den'"):
        published.check({"source": "s", "claims": [{"kind": "ratio", "num": "a", "value": 1}]}, "x.yaml")
    with pytest.raises(ConfigError, match="x.yaml: published.source"):
        published.check({"claims": []}, "x.yaml")


def test_fig12_and_fig3_use_the_papers_workload():
    data, runs = load_experiment(resolve_path("fig12"))
    lengths = {(r.pair, r.sequence_length) for r in runs}
    assert lengths == {("opt-66b+opt-1.3b", 1024), ("opt-175b+opt-6.7b", 512),
                       ("llama-3.1-70b+llama-3.2-1b", 1024)}
    assert {r.requests for r in runs if r.batch == 128} == {1024}
    assert {r.requests for r in runs if r.batch == 16} == {128}
    sd = {(r.label or r.system, r.draft_length) for r in runs if "sd" in r.system}
    assert sd == {("gpu-sd", 8), ("pim-sd", 8), ("gpu-sd-best", "search"), ("pim-sd-best", "search")}
    values = {c.get("label"): c["value"] for c in data["published"]["claims"] if "label" in c}
    assert values["SADDLE / PIM-SD"] == 1.71 and values["SADDLE / GPU-AD"] == 3.36
    energy = {c["label"]: c["metric"] for c in data["published"]["claims"] if "fig13" in c.get("label", "")}
    assert sorted(energy.values()) == ["tokens_per_joule"] * 4 + ["tokens_per_joule_dynamic"] * 4
    fig3, runs3 = load_experiment(resolve_path("fig3"))
    assert {r.sequence_length for r in runs3} == {1024}
    assert fig3["published"]["claims"][1]["value"] == 1.41


def test_requests_and_requests_per_batch_exclude_each_other(tmp_path):
    path = tmp_path / "e.yaml"
    path.write_text("name: e\npairs: [opt-66b+opt-1.3b]\nbatches: [4]\nsystems: [{system: gpu-ad}]\n"
                    "workload: {requests: 4, requests_per_batch: 2}\n")
    with pytest.raises(ConfigError, match="give requests or requests_per_batch, not both"):
        load_experiment(path)
    path.write_text("name: e\npairs: [opt-66b+opt-1.3b]\nbatches: [4]\nsystems: [{system: gpu-ad}]\n"
                    "sequence_length: long\n")
    with pytest.raises(ConfigError, match=r"sequence_length\[0\]: expected a positive integer, max or null"):
        load_experiment(path)


def test_calibrate_and_tune_tau_run_the_experiments_sequence_length(tmp_path, monkeypatch):
    """Both fit on the workload fig3 / fig12 report: the settings' sequence_length reaches every
    simulated run, and a bad one is refused naming the file and key before anything runs."""
    from tuning import tau as tune
    from validation import calibrate
    seen = []
    monkeypatch.setattr(tune, "simulate", lambda p: (seen.append(p.sequence_length), (_Metrics(100.0), None))[1])
    monkeypatch.setattr(calibrate, "simulate", tune.simulate)
    tune.tune_tau("opt-175b+opt-6.7b", write=False)
    calibrate.evaluate("opt-175b+opt-6.7b", tmp_path / "t.jsonl", {"batches": [64], "sequence_length": "max"}, "c.yaml")
    assert seen and set(seen) == {512}
    with pytest.raises(ConfigError, match=r"c.yaml: sequence_length: expected a positive integer"):
        calibrate.evaluate("opt-175b+opt-6.7b", tmp_path / "t.jsonl", {"batches": [64], "sequence_length": 0}, "c.yaml")


def test_tune_tau_finishes_from_an_earlier_runs_output(tmp_path, monkeypatch):
    from common.config import config_path, load_yaml
    from tuning import tau as tune
    grid = load_yaml(config_path("experiments", "tune-tau"))["tau_grid"]
    log = tmp_path / "tau.log"
    log.write_text("".join(f"tau {t:.3f}: {1000 + (50 if t == 0.6 else t):.1f} tokens/s (geomean)\n"
                           for t in grid[:-1]))
    ran = []
    monkeypatch.setattr(tune, "simulate", lambda p: (ran.append(p.tau), (_Metrics(900.0), None))[1])
    assert tune.tune_tau("opt-66b+opt-1.3b", write=False, from_log=str(log)) == 0.6
    assert ran == [grid[-1], grid[-1]]            # only the tau missing from the log, both batches


class _Metrics:
    def __init__(self, tps):
        self.tps = tps

    def to_dict(self):
        return {"tokens_per_s": self.tps}


def test_a_claim_may_compare_its_own_metric():
    """fig13's energy claims sit in fig12's file: a claim's ``metric`` replaces the file's."""
    records = [{"system": s, "pair": "p", "batch": 8, "sequence_length": None,
                "tokens_per_s": tps, "tokens_per_joule": tpj}
               for s, tps, tpj in (("new", 300.0, 40.0), ("old", 100.0, 10.0))]
    pub = {"source": "s", "metric": "tokens_per_s",
           "claims": [{"kind": "ratio", "num": "new", "den": "old", "value": 3.0},
                      {"kind": "ratio", "num": "new", "den": "old", "value": 4.0,
                       "metric": "tokens_per_joule"}]}
    published.check(pub, "x.yaml")
    assert [r["ours"] for r in published.compare(pub, records)] == [3.0, 4.0]


def test_a_share_claim_sums_nested_parts_over_the_whole():
    record = {"system": "saddle", "pair": "p", "batch": 64, "sequence_length": None, "time_s": 2.0,
              "latency_breakdown": {"monitoring": 0.005, "decision_making": 0.007, "idle": 0.5}}
    claim = {"kind": "share", "system": "saddle", "value": 0.0083, "of": "time_s",
             "parts": ["latency_breakdown.monitoring", "latency_breakdown.decision_making"]}
    published.check({"source": "s", "claims": [claim]}, "x.yaml")
    row, = published.compare({"source": "s", "claims": [claim]}, [record])
    assert row["ours"] == 0.006 and row["agrees"]         # within 0.005 of the whole
    far = dict(claim, value=0.2)
    assert not published.compare({"source": "s", "claims": [far]}, [record])[0]["agrees"]
    with pytest.raises(ConfigError, match="no metric 'latency_breakdown.nothing'"):
        published.compare({"source": "s", "claims": [dict(claim, of="latency_breakdown.nothing")]},
                          [record])


def test_a_share_over_several_points_is_their_mean_and_a_metric_may_be_a_sum():
    records = [{"system": "saddle", "pair": "p", "batch": b, "sequence_length": None,
                "verification_s": 1.0, "verification_comm_s": c,
                "latency_breakdown": {"prediction": 0.25, "overlap": o}}
               for b, c, o in ((16, 0.1, 0.5), (64, 0.3, 0.25))]
    share = {"kind": "share", "system": "saddle", "value": 0.2, "of": "verification_s",
             "parts": ["verification_comm_s"]}
    row, = published.compare({"source": "s", "claims": [share]}, records)
    assert row["ours"] == 0.2 and row["agrees"] and row["detail"] == "mean of 2 points (0.1000-0.3000)"
    assert published.value(records[0], "latency_breakdown.prediction+latency_breakdown.overlap") == 0.75
    ratio = {"kind": "ratio", "num": "saddle", "den": "saddle", "where": {"batch": 16}, "value": 1.0,
             "metric": "latency_breakdown.prediction+latency_breakdown.overlap"}
    assert published.compare({"source": "s", "claims": [ratio]}, records)[0]["ours"] == 1.0
