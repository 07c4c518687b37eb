"""The optional entropy fields: ``entropy`` per position, ``offpath_entropy`` per off-path token;
their round trip, their errors, the window along the DLM's path, and the synthetic model."""
from __future__ import annotations

import numpy as np
import pytest

from tests.traces.test_format_io import header, request
from traces.format import MissingField, TraceError
from traces.io import read_trace, write_trace
from traces.synth import load_params, synthesize, with_entropy

# request(): accepted [1, 0, 1, 0, 0, 1], off-path lists of 3, 1 and 0 values.
ENTROPY = np.array([0.5, 2.0, 0.25, 3.0, 1.0, 0.125])
OFF_ENTROPY = [np.array([1.5, 2.5, 3.5]), np.array([4.0]), np.array([])]


def with_fields(rid="e"):
    return request(rid, entropy=ENTROPY.copy(), offpath_entropy=[a.copy() for a in OFF_ENTROPY])


@pytest.mark.parametrize("name", ["t.jsonl", "t.jsonl.gz"])
def test_round_trip_with_and_without_entropy(tmp_path, name):
    reqs = [request("plain"), with_fields()]
    path = tmp_path / name
    write_trace(path, header(), reqs)
    _, back = read_trace(path)
    assert back == reqs
    assert "entropy" not in back[0].extra
    np.testing.assert_array_equal(back[1].extra["offpath_entropy"][0], OFF_ENTROPY[0])


def test_truncated_cuts_offpath_entropy_like_offpath():
    cut = with_fields().truncated(3)     # mismatch at 1 keeps 3 - 1 - 1 = 1 off-path value
    assert [len(o) for o in cut.offpath] == [1]
    assert [e.tolist() for e in cut.extra["offpath_entropy"]] == [[1.5]]
    assert cut.extra["entropy"].tolist() == [0.5, 2.0, 0.25]


def test_draft_entropy_follows_the_draft_path():
    r = with_fields()
    # From 0: token 0 accepted, token 1 the first mismatch (on-path values up to it), then the
    # off-path list of the mismatch at 1.
    assert r.draft_entropy(0, 5).tolist() == [0.5, 2.0, 1.5, 2.5, 3.5]
    assert r.draft_probs(0, 5).p.tolist() == [0.5, 0.1234, 0.25, 0.125, 0.5]
    # Past the recorded values the last one repeats, as for probabilities.
    assert r.draft_entropy(0, 6).tolist() == [0.5, 2.0, 1.5, 2.5, 3.5, 3.5]
    # From 3 (a mismatch): its on-path value, then its one off-path value, repeated.
    assert r.draft_entropy(3, 3).tolist() == [3.0, 4.0, 4.0]


def test_draft_entropy_without_the_fields_names_them():
    with pytest.raises(MissingField, match="request plain: no 'entropy' field"):
        request("plain").draft_entropy(0, 2)
    with pytest.raises(MissingField, match="no 'offpath_entropy' field"):
        request("half", entropy=ENTROPY.copy()).draft_entropy(0, 2)


def _write_raw(path, line: bytes):
    lines = [header().to_record(), with_fields().to_record()]
    import json
    text = "\n".join(json.dumps(x) for x in lines).encode() + b"\n"
    path.write_bytes(text.replace(b'"offpath_entropy": [[1.5, 2.5, 3.5], [4.0], []]', line))


@pytest.mark.parametrize("value, message", [
    (b'"offpath_entropy": [[1.5, 2.5], [4.0], []]', r"t.jsonl:2: offpath_entropy\[0\]: found length 2, expected length 3"),
    (b'"offpath_entropy": [[1.5, 2.5, 3.5], [4.0]]', r"t.jsonl:2: offpath_entropy: found 2 lists, expected 3"),
    (b'"offpath_entropy": [[1.5, -2.5, 3.5], [4.0], []]', r"t.jsonl:2: offpath_entropy\[0\]\[1\]: found -2.5, expected a finite number >= 0"),
    (b'"offpath_entropy": 7', r"t.jsonl:2: offpath_entropy: found 7, expected a list with one list"),
])
def test_bad_offpath_entropy_is_named(tmp_path, value, message):
    path = tmp_path / "t.jsonl"
    _write_raw(path, value)
    with pytest.raises(TraceError, match=message):
        read_trace(path)


def test_synthetic_entropy_leaves_the_rest_alone_and_follows_its_model():
    params = load_params("opt-66b+opt-1.3b")
    h, reqs = synthesize(params, {"test": 16}, seed=3)
    h2, with_e = with_entropy(params, h, reqs, seed=3)
    assert [r.p.tolist() for r in with_e] == [r.p.tolist() for r in reqs]
    assert [r.accepted.tolist() for r in with_e] == [r.accepted.tolist() for r in reqs]
    assert set(h2.provenance["entropy"]["tail_nats"]) == {"accepted", "rejected", "offpath"}
    p = np.concatenate([r.p for r in with_e])
    e = np.concatenate([r.extra["entropy"] for r in with_e])
    q = 1 - p
    with np.errstate(divide="ignore", invalid="ignore"):
        low = -p * np.log(p) - np.where(q > 0, q * np.log(q), 0.0)
    # At least the entropy of p and 1 - p on one other token (rounding aside).
    assert (e >= low - 1e-4).all()
    again = with_entropy(params, h, reqs, seed=3)[1]
    assert all(np.array_equal(a.extra["entropy"], b.extra["entropy"]) for a, b in zip(again, with_e))
    for r in with_e:
        assert [len(o) for o in r.extra["offpath_entropy"]] == [len(o) for o in r.offpath]


def test_realfit_recovers_the_entropy_model(tmp_path):
    """The entropy fit of traces/realfit.py on a synthetic trace recovers the model's tail
    parameters for each kind of token (the generator's inverse), and accepted tokens have the
    lower entropy at equal p, as the model says."""
    from traces.realfit import entropy_report

    cfg = tmp_path / "entropy.yaml"
    cfg.write_text("tail_nats:\n  accepted: {median: 0.5, sigma: 0.5}\n"
                   "  rejected: {median: 2.0, sigma: 0.3}\n  offpath: {median: 1.0, sigma: 0.4}\n")
    params = load_params("opt-66b+opt-1.3b")
    h, reqs = synthesize(params, {"test": 64}, seed=4)
    _, reqs = with_entropy(params, h, reqs, seed=4, entropy_config=cfg)
    report = entropy_report(reqs)
    for kind, (median, sigma) in {"accepted": (0.5, 0.5), "rejected": (2.0, 0.3), "offpath": (1.0, 0.4)}.items():
        fit = report["tail_nats"][kind]
        assert abs(fit["median"] / median - 1) < 0.1 and abs(fit["sigma"] - sigma) < 0.06, (kind, fit)
    for row in report["by_p_bin"]:
        if row["positions"] > 200:
            assert row["acceptance_low_entropy"] > row["acceptance_high_entropy"], row


def test_entropy_model_parameters_are_checked(tmp_path):
    from common.errors import ConfigError

    cfg = tmp_path / "entropy.yaml"
    cfg.write_text("tail_nats:\n  accepted: {median: 0.5, sigma: 0.5}\n  rejected: {median: 2.0, sigma: 0.3}\n")
    params = load_params("opt-66b+opt-1.3b")
    h, reqs = synthesize(params, {"test": 2}, seed=4)
    with pytest.raises(ConfigError, match=r"entropy.yaml: tail_nats.offpath: missing"):
        with_entropy(params, h, reqs, seed=4, entropy_config=cfg)
