"""The synthetic generator: determinism, Dolly's mix, length caps, the calibration curve, bursts,
config errors, the shipped traces, and the published shape of acceptance (SADDLE (HPCA 2026), motivation)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import yaml

import traces.synth as synth
from common.errors import ConfigError
from sim.cli import main as saddle
from tests.traces.helpers import PAIRS, shipped, shipped_stats
from traces.format import CATEGORIES
from traces.io import read_trace
from traces.stats import FIXED_D

OPT66 = "opt-66b+opt-1.3b"
LLAMA = "llama-3.1-70b+llama-3.2-1b"
DOLLY = dict(zip(CATEGORIES, (3742, 2191, 2136, 1773, 1766, 1506, 1188, 709)))


def test_pairs():
    assert PAIRS == ["llama-3.1-70b+llama-3.2-1b", "opt-175b+opt-6.7b", "opt-66b+opt-1.3b"]
    for pair in PAIRS:
        params = synth.load_params(pair)
        assert (params.target, params.draft) == tuple(pair.split("+"))
        assert params.category_mix == DOLLY
        assert params.max_seq_len == (512 if pair.startswith("opt-175b") else 1024)


def test_category_counts_largest_remainder():
    # 256 * count / 15011 = 63.82 37.37 36.43 30.24 30.12 25.68 20.26 12.09: floors sum to 253,
    # the three largest remainders (open_qa .82, information_extraction .68, classification .43)
    # get one more.
    assert synth.category_counts(DOLLY, 256) == {
        "open_qa": 64, "general_qa": 37, "classification": 37, "closed_qa": 30,
        "brainstorming": 30, "information_extraction": 26, "summarization": 20,
        "creative_writing": 12}
    assert sum(synth.category_counts(DOLLY, 7).values()) == 7


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    out = []
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        path = tmp_path / f"{name}.jsonl.gz"
        assert saddle(["trace", "synth", "--pair", OPT66, "--requests", "40", "--seed", str(seed),
                       "--out", str(path)]) == 0
        out.append(path.read_bytes())
    assert out[0] == out[1] and out[0] != out[2]


def test_synth_output_passes_check_and_has_the_splits(tmp_path, capsys):
    path = tmp_path / "s.jsonl"
    assert saddle(["trace", "synth", "--pair", "opt-175b+opt-6.7b", "--split", "val=9",
                   "--split", "test=8", "--out", str(path)]) == 0
    assert saddle(["trace", "check", str(path)]) == 0
    header, reqs = read_trace(path)
    assert header.splits == {"val": 9, "test": 8}
    assert [r.id for r in reqs[:2]] == ["val-0000", "val-0001"] and reqs[9].id == "test-0000"
    assert header.provenance["seed"] == 1 and header.provenance["generator"] == synth.GENERATOR
    assert header.provenance["parameters"]["calibration"] == {"bias": -0.25, "slope": 0.9}
    assert "valid saddle-trace/1" in capsys.readouterr().out


@pytest.mark.parametrize("pair", PAIRS)
def test_lengths_are_capped(pair):
    params = synth.load_params(pair)
    _, reqs = synth.synthesize(params, {"x": 300}, seed=11)
    for r in reqs:
        cp = params.categories[r.category]
        assert r.prompt_len + r.output_len <= params.max_seq_len
        assert r.output_len >= cp.output.min and r.prompt_len >= 1
        assert all(len(o) == min(params.offpath_len, r.output_len - 1 - i)
                   for o, i in zip(r.offpath, np.flatnonzero(~r.accepted)))


def test_fixed_output_length():
    params = dataclasses.replace(synth.load_params(OPT66), max_seq_len=300)
    _, reqs = synth.synthesize(params, {"x": 20}, seed=2, output_len=256)
    assert {r.output_len for r in reqs} == {256}
    assert max(r.prompt_len for r in reqs) <= 44
    with pytest.raises(ConfigError, match="output_len 300: expected 1 <= output_len < max_seq_len 300"):
        synth.synthesize(params, {"x": 1}, seed=2, output_len=300)


def big_trace(requests=1500, **changes):
    params = dataclasses.replace(synth.load_params(OPT66), **changes)
    return params, synth.synthesize(params, {"x": requests}, seed=5)[1]


@pytest.mark.parametrize("bias,slope", [(-0.4, 0.8), (0.0, 1.0), (0.5, 1.5)])
def test_reliability_follows_the_calibration_curve(bias, slope):
    params, reqs = big_trace(calibration_bias=bias, calibration_slope=slope)
    p = np.concatenate([r.p for r in reqs])
    acc = np.concatenate([r.accepted for r in reqs])
    curve = 1 / (1 + np.exp(-(bias + slope * np.log(p / (1 - np.minimum(p, 1 - 1e-9))))))
    bins = np.minimum((p * 10).astype(int), 9)
    for b in range(10):
        sel = bins == b
        if sel.sum() < 2000:
            continue
        expected = curve[sel].mean()
        se = np.sqrt(expected * (1 - expected) / sel.sum())
        assert abs(acc[sel].mean() - expected) < 4 * se + 0.005, (b, acc[sel].mean(), expected)
    if bias < 0 and slope < 1:   # over-confident: acceptance below p in the populated bins
        assert acc.mean() < p.mean() - 0.05


def mismatch_after(reqs, previous: bool) -> float:
    """P(mismatch at i+1 | mismatch at i) (previous=True) or given an accept at i."""
    hits = total = 0
    for r in reqs:
        miss = ~r.accepted
        sel = miss[:-1] if previous else ~miss[:-1]
        hits += int(miss[1:][sel].sum())
        total += int(sel.sum())
    return hits / total


def test_mismatches_come_in_bursts():
    _, reqs = big_trace(500, burst_sd=1.0, burst_corr=0.85, difficulty_sd=0.0)
    bursty = mismatch_after(reqs, True) / mismatch_after(reqs, False)
    # Without the AR(1) term only the drift and the categories' differences correlate
    # neighbouring positions.
    _, flat = big_trace(500, burst_sd=0.0, difficulty_sd=0.0)
    smooth = mismatch_after(flat, True) / mismatch_after(flat, False)
    assert bursty > 1.5 and smooth < 1.25, (bursty, smooth)


def test_offpath_follows_the_shift():
    params, reqs = big_trace(300)
    deltas = []
    for r in reqs:
        for o, i in zip(r.offpath, np.flatnonzero(~r.accepted)):
            if len(o):
                q = r.p[i + 1:i + 1 + len(o)]
                deltas.append(np.log(o / (1 - np.minimum(o, 1 - 1e-4)))
                              - np.log(q / (1 - np.minimum(q, 1 - 1e-4))))
    mean = float(np.mean(np.concatenate(deltas)))
    assert mean == pytest.approx(params.offpath_logit_shift, abs=0.1)


# -- configuration errors ----------------------------------------------------------------------

def variant(tmp_path, edit) -> str:
    data = yaml.safe_load(synth.config_path("traces", OPT66).read_text())
    edit(data)
    path = tmp_path / "variant.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


@pytest.mark.parametrize("edit,message", [
    (lambda d: d["calibration"].pop("slope"), "missing key 'calibration.slope'"),
    (lambda d: d["categories"]["summarization"].update(accept_end=1.2),
     "categories.summarization.accept_end: expected a probability in (0, 1), found 1.2"),
    (lambda d: d["categories"]["open_qa"]["output_tokens"].update(median="long"),
     "categories.open_qa.output_tokens.median: expected float, found 'long'"),
    (lambda d: d["category_mix"].update(poetry=3), "category_mix: unknown categories ['poetry']"),
    (lambda d: d["acceptance"].update(burst_corr=1.0), "acceptance.burst_corr: expected a number in [0, 1)"),
    (lambda d: d["categories"].pop("closed_qa"), "missing key 'categories.closed_qa'"),
    (lambda d: d.update(max_seq_len=30),
     "categories.closed_qa: prompt_tokens.min + output_tokens.min = 34, expected <= max_seq_len 30"),
])
def test_config_errors_name_file_and_key(tmp_path, edit, message):
    path = variant(tmp_path, edit)
    with pytest.raises(ConfigError) as info:
        synth.load_params(OPT66, path)
    assert str(info.value).startswith(str(path))
    assert message in str(info.value)


def test_unknown_pair_lists_the_known_ones():
    with pytest.raises(ConfigError, match="known: llama-3.1-70b\\+llama-3.2-1b, opt-175b"):
        synth.load_params("gpt-2+gpt-1")


def test_variant_config_on_the_command_line(tmp_path):
    path = variant(tmp_path, lambda d: d["calibration"].update(bias=0.0, slope=1.0))
    out = tmp_path / "v.jsonl"
    assert saddle(["trace", "synth", "--pair", OPT66, "--requests", "5", "--config", path,
                   "--out", str(out)]) == 0
    header, _ = read_trace(out)
    assert header.provenance["config"] == path
    assert header.provenance["parameters"]["calibration"] == {"bias": 0.0, "slope": 1.0}


# -- shipped traces ----------------------------------------------------------------------------

@pytest.mark.parametrize("pair", PAIRS)
def test_shipped_trace_is_a_fresh_generation(tmp_path, monkeypatch, pair):
    monkeypatch.setattr(synth, "TRACE_DATA", tmp_path)
    fresh = synth.default_trace(pair)          # missing here, so generated and cached
    assert fresh.parent == tmp_path
    monkeypatch.undo()
    shipped_path = synth.default_trace_path(pair)
    assert fresh.read_bytes() == shipped_path.read_bytes(), "run: saddle trace defaults"
    # 1280 requests extended to the pair's maximum sequence length
    assert shipped_path.stat().st_size < 10_000_000
    header, reqs = shipped(pair)
    assert header.splits == {"validation": 256, "test": 1024} and len(reqs) == 1280
    assert all(r.prompt_len + r.output_len == header.max_seq_len for r in reqs)


# -- the published shape (SADDLE (HPCA 2026), motivation) ------------------------------------------

@pytest.mark.parametrize("pair", PAIRS)
def test_acceptance_falls_as_d_grows_for_every_category(pair):
    stats = shipped_stats(pair)
    assert list(stats["fixed_d_acceptance"]) == list(CATEGORIES)
    for category, rate in stats["fixed_d_acceptance"].items():
        values = [rate[str(d)] for d in FIXED_D]
        assert all(a > b for a, b in zip(values, values[1:])), (category, values)


@pytest.mark.parametrize("pair", PAIRS)
def test_accepted_per_round_changes_over_a_requests_life(pair):
    rounds = shipped_stats(pair)["accepted_per_round"]
    pooled = rounds["all"]["mean"]
    assert pooled[0] - pooled[11] > 0.5


def test_opt66_creative_writing_falls_from_about_five_to_about_one():
    rounds = shipped_stats(OPT66)["accepted_per_round"]["by_category"]
    cw = rounds["creative_writing"]["mean"]
    # "About 5 ... about 1" (SADDLE (HPCA 2026), motivation), with room for `saddle calibrate`'s level shift.
    assert 3.5 <= cw[0] <= 6.5
    assert np.mean(cw[10:13]) <= 1.75
    for category, row in rounds.items():   # every OPT-66B category accepts less later on
        assert row["mean"][0] > np.mean(row["mean"][9:12]) + 0.2, category


def test_llama_pair_differs_from_opt_pair():
    opt = shipped_stats(OPT66)["accepted_per_round"]["by_category"]["creative_writing"]["mean"]
    llama = shipped_stats(LLAMA)["accepted_per_round"]["by_category"]["creative_writing"]["mean"]
    # On creative_writing OPT's accepted tokens per round collapse over a request's life,
    # Llama's barely move.
    opt_drop = opt[0] - np.mean(opt[9:12])
    llama_drop = llama[0] - np.mean(llama[9:12])
    assert opt_drop > llama_drop + 2.0, (opt_drop, llama_drop)
