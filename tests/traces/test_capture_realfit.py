"""traces.realfit: the calibration fit recovers a known curve, and the vectorised fixed-d
acceptance equals the trace's own round rule."""
from __future__ import annotations

import numpy as np
import pytest

from traces.format import RequestTrace
from traces.realfit import calibration_report, fit_calibration, fixed_d_curve, fixed_d_matrix


def _request(rid: str, accepted: list[int], p: list[float] | None = None) -> RequestTrace:
    acc = np.array(accepted, dtype=bool)
    return RequestTrace(rid, "open_qa", 4, np.array(p or [0.5] * len(acc)), acc,
                        [np.zeros(0)] * int((~acc).sum()))


def test_fixed_d_by_hand():
    r = _request("a", [1, 1, 0, 1])
    # d=2: round at 0 drafts 2, accepts 2, next at 3 drafts 1, accepts 1 -> 3/3.
    # d=3: round at 0 drafts 3, accepts 2; at 3 drafts 1, accepts 1 -> 3/4.
    # d=4: round at 0 drafts 4, accepts 2; at 3 drafts 1, accepts 1 -> 3/5.
    assert fixed_d_curve([r])[2] == 1.0
    assert fixed_d_curve([r])[4] == pytest.approx(3 / 5)
    acc = np.array([[1, 1, 0, 1]], dtype=bool)
    assert fixed_d_matrix(acc, np.array([4]), 3) == pytest.approx(3 / 4)


def test_fixed_d_matrix_equals_the_trace_round_rule():
    rng = np.random.default_rng(3)
    lengths = rng.integers(1, 40, size=30)
    acc = rng.random((30, 40)) < 0.7
    acc[:, :] &= np.arange(40)[None, :] < lengths[:, None]
    requests = [_request(str(i), acc[i, :n].astype(int).tolist()) for i, n in enumerate(lengths)]
    curve = fixed_d_curve(requests)
    for d, value in curve.items():
        assert fixed_d_matrix(acc, lengths, d) == pytest.approx(value, abs=1e-15)


def test_calibration_fit_recovers_a_known_curve():
    rng = np.random.default_rng(7)
    p = rng.uniform(0.02, 0.999, size=40000)
    logit = np.log(p) - np.log1p(-p)
    accepted = rng.random(p.size) < 1 / (1 + np.exp(-(-0.7 + 0.6 * logit)))
    bias, slope = fit_calibration(p, accepted)
    assert bias == pytest.approx(-0.7, abs=0.05) and slope == pytest.approx(0.6, abs=0.03)
    report = calibration_report([_request("x", accepted.astype(int).tolist(), p.tolist())])
    # The generator's own family fits its own data: as good as the binned curve, far better
    # than taking p at face value.
    assert report["log_loss"]["fitted"] <= report["log_loss"]["binned"] + 0.002
    assert report["log_loss"]["identity"] > report["log_loss"]["fitted"] + 0.02
    assert report["max_bin_gap"] < 0.03
