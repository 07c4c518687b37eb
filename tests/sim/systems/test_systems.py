"""Every system on a tiny trace: tokens conserved, runs deterministic, timing hand-checkable."""
import json
import types

import pytest

from sim.cost.system import load_hardware as load_hw
from sim.model import load_model
from sim.systems.run import RunParams, simulate
from tests.sim.systems.conftest import make_trace, request

SYSTEMS = [("gpu-ad", None), ("gpu-sd", 3), ("pim-ad", None), ("pim-sd", 3), ("specpim-ad", None),
           ("specpim-sd", 8), ("saddle-d", None), ("saddle-p", None), ("saddle-s", None),
           ("saddle", None), ("oracle", None)]


def params(system, d, trace, batch=4, **kw):
    return RunParams(system=system, pair="opt-66b+opt-1.3b", batch=batch, draft_length=d,
                     trace=trace, split="all", tau=0.3, **kw)


@pytest.mark.parametrize("system,d", SYSTEMS)
def test_conservation_and_determinism(system, d, tiny_trace):
    a, _ = simulate(params(system, d, tiny_trace))          # conservation is checked inside
    b, _ = simulate(params(system, d, tiny_trace))
    ra, rb = a.to_dict(), b.to_dict()
    assert json.dumps(ra, sort_keys=True) == json.dumps(rb, sort_keys=True)
    t = ra["tokens"]
    assert t["generated"] == sum(12 + 5 * i for i in range(12))
    assert t["drafted"] == t["accepted"] + t["rejected"] + t["discarded"]
    assert sum(ra["latency_breakdown"].values()) == pytest.approx(ra["time_s"])
    assert ra["tokens_per_s"] > 0 and ra["tokens_per_joule"] > 0
    if system.endswith("-ad"):
        assert t["drafted"] == 0


def test_autoregressive_time_is_the_sum_of_its_steps(tmp_path):
    trace = str(make_trace(tmp_path / "one.jsonl", [request("x", 30, [1, 0, 1, 1, 0])]))
    m, run = simulate(params("gpu-ad", None, trace, batch=1))
    hw, tlm = load_hw("dgx-a100"), load_model("opt-66b")
    expect = sum(hw.price_step(tlm, [(30 + t, 1)], mapping={"fc": "gpu", "attention": "gpu"}).time_ps
                 for t in range(5))
    assert run.measured.time_ps == expect
    assert m.tokens.generated == 5 and m.tokens.tlm_tokens == 5


def test_fixed_d_rounds_by_hand(tmp_path):
    # d = 2 on accepted = 1 1 0 1 1 1 1: round 1 drafts 2, both accepted, +1 bonus (t=3);
    # round 2 at t=3 drafts 2, both accepted (+1, t=6); round 3 at t=6 drafts 1 (last
    # position), accepted, no TLM token. Accepted 5, rejected 0, TLM tokens 2.
    trace = str(make_trace(tmp_path / "one.jsonl", [request("x", 30, [1, 1, 0, 1, 1, 1, 1])]))
    m, run = simulate(params("gpu-sd", 2, trace, batch=1))
    t = m.tokens
    assert (t.drafted, t.accepted, t.rejected, t.discarded, t.tlm_tokens) == (5, 5, 0, 0, 2)
    hw, tlm, dlm = load_hw("dgx-a100"), load_model("opt-66b"), load_model("opt-1.3b")
    g = {"fc": "gpu", "attention": "gpu"}
    dlm_ps = lambda ctx: hw.price_step(dlm, [(ctx, 1)], mapping=g, devices=1).time_ps
    tlm_ps = lambda ctx, q: hw.price_step(tlm, [(ctx, q)], mapping=g).time_ps
    expect = (dlm_ps(30) + dlm_ps(31) + tlm_ps(32, 3)
              + dlm_ps(33) + dlm_ps(34) + tlm_ps(35, 3)
              + dlm_ps(36) + tlm_ps(37, 2))
    assert run.measured.time_ps == expect


def test_rejection_counts_as_the_manager_counts(tmp_path):
    # d = 4 on 1 0 1 1 ...: 1 accepted, 1 rejected, 2 verified after the mismatch discarded.
    trace = str(make_trace(tmp_path / "one.jsonl", [request("x", 30, [1, 0, 1, 1, 1, 1])]))
    m, _ = simulate(params("gpu-sd", 4, trace, batch=1))
    t = m.tokens
    assert t.discard_reasons["rejected_prefix"] >= 2
    assert t.rejected >= 1


def test_oracle_never_drafts_more_than_one_rejected_token_per_round(tiny_trace):
    m, run = simulate(params("oracle", None, tiny_trace))
    t = m.tokens
    # A round ends at its first rejected token: nothing after a mismatch is ever verified.
    assert t.discard_reasons.get("rejected_prefix", 0) == 0
    assert t.discard_reasons.get("eager_after_reject", 0) + t.discard_reasons.get("shared_after_reject", 0) == t.discarded


def test_shared_pool_systems_report_manager_conservation(tiny_trace):
    _, run = simulate(params("saddle", None, tiny_trace))
    totals = run.manager_totals
    assert totals["accepted"] == run.tokens.accepted


def test_throughput_window_ends_when_the_batch_can_no_longer_be_refilled(tmp_path):
    # Batch 2, outputs of 3 and 5 tokens, autoregressive: the first request ends after 3
    # steps with nobody left to enter; by then 6 tokens are out.
    trace = str(make_trace(tmp_path / "two.jsonl", [request("a", 30, [1, 1, 1]),
                                                    request("b", 40, [1, 0, 1, 1, 1])]))
    m, run = simulate(params("gpu-ad", None, trace, batch=2))
    hw, tlm = load_hw("dgx-a100"), load_model("opt-66b")
    g = {"fc": "gpu", "attention": "gpu"}
    steps = [hw.price_step(tlm, [(30 + t, 1), (40 + t, 1)], mapping=g).time_ps for t in range(3)]
    assert (run.measured.window_ps, run.measured.window_tokens) == (sum(steps), 6)
    r = m.to_dict()
    assert r["tokens_per_s"] == pytest.approx(6 / (sum(steps) * 1e-12))
    assert r["run_tokens_per_s"] == pytest.approx(8 / r["time_s"])


def test_pass_capacity_follows_the_systems_rule(tiny_trace):
    from sim.systems import offline
    from sim.systems.run import adapter
    costs = adapter("saddle", "opt-66b", "opt-1.3b")
    ridge = offline.verify_capacity(costs, 512, "ridge")
    # The ridge: every TLM FC GEMM memory-bound at N tokens, one compute-bound at N + 1.
    assert not costs.tlm_fc_compute_bound(ridge) and costs.tlm_fc_compute_bound(ridge + 1)
    assert not any(costs.tlm_fc_compute_bound(n) for n in range(1, ridge))
    m, _ = simulate(params("saddle", None, tiny_trace))                       # capacity_rule: ridge
    assert (m.verify_capacity, m.capacity_rule) == (ridge, "ridge")
    slack, _ = simulate(params("saddle", None, tiny_trace, capacity_rule="fc_slack", capacity_slack=0.1))
    assert slack.verify_capacity == offline.verify_capacity(costs, 512, "fc_slack", 0.1) < ridge
    assert slack.capacity_rule == "fc_slack 0.1"
    pool, _ = simulate(params("saddle", None, tiny_trace, capacity_rule="pool"))
    assert pool.verify_capacity == 512


class _SteppedCosts:
    """A GEMM model with a 20 % step at 23 tokens, memory-bound up to 150 tokens."""
    n_devices = 1

    def price(self, role, reqs, fc, attention, devices):
        (_, tokens), = reqs
        fc_ps = 1000 if tokens < 23 else 1200 + max(0, tokens - 150) * 10
        return types.SimpleNamespace(cost=types.SimpleNamespace(fc_ps=fc_ps))

    def tlm_fc_compute_bound(self, tokens):
        return tokens > 150


def test_capacity_rules_by_hand():
    from sim.systems import offline
    costs = _SteppedCosts()
    assert offline.verify_capacity(costs, 512, "ridge") == 150
    assert offline.verify_capacity(costs, 100, "ridge") == 100        # the pool bounds it
    assert offline.verify_capacity(costs, 512, "fc_slack", 0.1) == 22  # stops at the step
    assert offline.verify_capacity(costs, 512, "fc_slack", 0.25) == 155
    assert offline.verify_capacity(costs, 512, "pool") == 512


def test_capacity_rule_and_slack_are_checked(tmp_path, monkeypatch, tiny_trace):
    from common.errors import ConfigError
    from sim.systems import spec
    bad = tmp_path / "systems"
    bad.mkdir()
    text = spec.config_path("systems", "saddle").read_text()
    (bad / "neg.yaml").write_text(text.replace("capacity_rule: ridge",
                                               "capacity_rule: fc_slack\ncapacity_slack: -1"))
    (bad / "noslack.yaml").write_text(text.replace("capacity_rule: ridge", "capacity_rule: fc_slack"))
    (bad / "extra.yaml").write_text(text + "capacity_slack: 0.1\n")
    (bad / "typo.yaml").write_text(text.replace("capacity_rule: ridge", "capacity_rule: ridges"))
    (bad / "ad.yaml").write_text(spec.config_path("systems", "gpu-ad").read_text() + "capacity_rule: pool\n")
    real = spec.config_path
    monkeypatch.setattr(spec, "config_path", lambda kind, name: bad / f"{name}.yaml")
    with pytest.raises(ConfigError, match=r"neg.yaml: capacity_slack: expected a number in \[0, 10\]"):
        spec.load_system("neg")
    with pytest.raises(ConfigError, match="noslack.yaml: missing key 'capacity_slack'"):
        spec.load_system("noslack")
    with pytest.raises(ConfigError, match="extra.yaml: capacity_slack: only capacity_rule fc_slack"):
        spec.load_system("extra")
    with pytest.raises(ConfigError, match=r"typo.yaml: capacity_rule: expected one of \['ridge'"):
        spec.load_system("typo")
    with pytest.raises(ConfigError, match="ad.yaml: capacity_rule: only systems with verify: shared_pool"):
        spec.load_system("ad")
    monkeypatch.setattr(spec, "config_path", real)
    with pytest.raises(ConfigError, match="capacity_slack: only capacity_rule fc_slack has a slack"):
        simulate(params("saddle", None, tiny_trace, capacity_slack=0.1))
    with pytest.raises(ConfigError, match="capacity_rule fc_slack needs capacity_slack"):
        simulate(params("saddle", None, tiny_trace, capacity_rule="fc_slack"))


def test_manager_config_file_sizes_the_pools(tiny_trace):
    from common.errors import ConfigError
    from common.paths import CONFIGS
    small = str(CONFIGS / "manager_coverify.yaml")                            # 16 slots, 32 + 24 entries
    _, run = simulate(params("saddle", None, tiny_trace, manager=small))
    assert (run.manager.config.shared_entries, run.manager.config.eager_entries) == (32, 24)
    with pytest.raises(ConfigError, match=r"batch 32 exceeds the 16 Controller slots of .*manager_coverify.yaml"):
        simulate(params("saddle", None, tiny_trace, batch=32, manager=small))


def test_a_run_leaves_the_cycle_collector_as_it_found_it(tiny_trace):
    """simulate turns the collector off while the run executes and back on after (with what
    survived frozen); a caller that had it off keeps it off."""
    import gc

    p = RunParams(system="saddle", pair="opt-66b+opt-1.3b", batch=2, trace=tiny_trace, requests=2)
    assert gc.isenabled()
    simulate(p)
    assert gc.isenabled() and gc.get_freeze_count() > 0
    gc.disable()
    try:
        simulate(p)
        assert not gc.isenabled()
    finally:
        gc.enable()
