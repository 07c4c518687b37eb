"""Per-request latency spread and Jain's index of token rates, on hand-computed runs."""
import numpy as np
import pytest

from sim.metrics import PS_PER_S, Measured, TokenCounts, jain_index, run_record


def _metrics(latency_s: list[float], tokens: list[int]) -> dict:
    return run_record("x", "p", 2, None, {}, Measured(
        time_ps=10 * PS_PER_S, energy_fj=1000, static_fj=400, tokens=TokenCounts(), breakdown_ps={}, gpu_busy_ps=0,
        pim_busy_ps=0, n_devices=1, pim_ops=0, total_ops=0,
        request_latency_ps=[int(s * PS_PER_S) for s in latency_s], request_tokens=tokens,
        window_ps=PS_PER_S, window_tokens=1, window_energy_fj=1000,
        window_static_fj=250)).to_dict()


def test_jain_index_by_hand():
    assert jain_index(np.array([3.0, 3.0, 3.0])) == 1.0
    assert jain_index(np.array([1.0, 0.0, 0.0, 0.0])) == 0.25           # one of four served
    assert jain_index(np.array([1.0, 3.0])) == pytest.approx(16 / (2 * 10))   # (1+3)^2 / (2 (1+9))
    assert jain_index(np.array([])) == 1.0


def test_request_spread_and_rates():
    # Request A: 10 tokens in 2 s (0.2 s/token, 5 tok/s); B: 10 tokens in 4 s (0.4 s/token, 2.5 tok/s).
    r = _metrics([2.0, 4.0], [10, 10])
    assert r["request_latency_s"] == {"p50": 3.0, "p99": pytest.approx(2 + 2 * 0.99), "max": 4.0}
    assert r["request_time_per_token_s"]["max"] == pytest.approx(0.4)
    assert r["request_time_per_token_s"]["p50"] == pytest.approx(0.3)
    assert r["request_rate_jain"] == pytest.approx(7.5 ** 2 / (2 * (25 + 6.25)))   # 0.9
    # Rates, not latencies: a request twice as long taking twice the time is served as fairly.
    assert _metrics([2.0, 4.0], [10, 20])["request_rate_jain"] == pytest.approx(1.0)


def test_run_without_requests():
    r = _metrics([], [])
    assert r["request_latency_s"] == {"p50": 0.0, "p99": 0.0, "max": 0.0}
    assert r["request_rate_jain"] == 1.0


def test_energy_in_both_accountings_by_hand():
    r = _metrics([2.0], [10])
    assert r["energy_j"] == 1000e-15 and r["energy_static_j"] == 400e-15
    assert r["tokens_per_joule"] == pytest.approx(1 / 1000e-15)           # window: 1 token, 1000 fJ
    assert r["tokens_per_joule_dynamic"] == pytest.approx(1 / 750e-15)   # less its 250 fJ static
