"""The paper's workload (decode until the context reaches the sequence length), the Shared Pool
issue rules, and the query count of a later chunk of a round."""
import json

import numpy as np
import pytest

from common.errors import ConfigError
from sim.systems import pooled
from sim.systems.run import RunParams, simulate
from sim.workload import load_workload
from tests.sim.systems.conftest import make_trace, request
from traces.format import RequestTrace


def extended(rid, prompt, accepted, natural):
    r = request(rid, prompt, accepted)
    return RequestTrace(r.id, r.category, r.prompt_len, r.p, r.accepted, r.offpath, natural_len=natural)


def _load(trace, **kw):
    return load_workload(trace, split="all", n_requests=None, seed=0, validation_fraction=0.5,
                         max_seq_len=1024, source="test.yaml", **kw)


def test_output_length_natural_and_at_a_sequence_length(tmp_path):
    # prompt 30, 20 positions recorded, natural end after 6.
    trace = str(make_trace(tmp_path / "t.jsonl", [extended("x", 30, [1] * 10 + [0] + [1] * 9, 6),
                                                  request("y", 40, [1, 0, 1])]))
    natural = _load(trace)
    assert [r.output_len for r in natural.requests] == [6, 3]
    assert natural.total_output == 9
    paper = load_workload(trace, split="all", n_requests=1, seed=0, validation_fraction=0.5,
                          max_seq_len=1024, source="test.yaml", sequence_length=48)
    (x,) = paper.requests
    assert x.output_len == 48 - 30 and x.prompt_len == 30      # context 30 + 18 = 48
    assert x.natural_len == 6 and len(x.offpath) == 1


def test_a_trace_too_short_for_the_sequence_length_is_an_error_naming_it(tmp_path):
    trace = str(make_trace(tmp_path / "t.jsonl", [request("x", 30, [1, 0, 1]), request("y", 5, [1])]))
    with pytest.raises(ConfigError, match=r"test.yaml: sequence_length 40: request x of .*t.jsonl "
                                          r"reaches context 33 .*natural end"):
        _load(trace, sequence_length=40)
    with pytest.raises(ConfigError, match=r"request x .* prompt of 30 tokens"):
        _load(trace, sequence_length=30)


def test_paper_mode_generates_exactly_sequence_length_minus_prompt(tmp_path):
    reqs = [extended(f"r{i}", 20 + i, (np.random.default_rng(i).random(60) < 0.7), 10 + i)
            for i in range(6)]
    trace = str(make_trace(tmp_path / "t.jsonl", reqs))
    for system, d in [("gpu-ad", None), ("pim-sd", 3), ("saddle", None)]:
        m, _ = simulate(RunParams(system=system, pair="opt-66b+opt-1.3b", batch=2, draft_length=d,
                                  trace=trace, split="all", tau=0.3, sequence_length=64))
        assert m.tokens.generated == sum(64 - (20 + i) for i in range(6))
        natural, _ = simulate(RunParams(system=system, pair="opt-66b+opt-1.3b", batch=2,
                                        draft_length=d, trace=trace, split="all", tau=0.3))
        assert natural.tokens.generated == sum(10 + i for i in range(6))


def _tiny(system, trace, **kw):
    return RunParams(system=system, pair="opt-66b+opt-1.3b", batch=4, trace=trace, split="all",
                     tau=0.3, **kw)


@pytest.mark.parametrize("rule", ["gpu-idle", "tlm-idle", "drained"])
@pytest.mark.parametrize("system", ["saddle-s", "saddle"])
def test_issue_rules_conserve_tokens_and_are_deterministic(system, rule, tiny_trace):
    a, _ = simulate(_tiny(system, tiny_trace, issue_rule=rule))
    b, _ = simulate(_tiny(system, tiny_trace, issue_rule=rule))
    assert json.dumps(a.to_dict(), sort_keys=True) == json.dumps(b.to_dict(), sort_keys=True)
    assert a.tokens.generated == sum(12 + 5 * i for i in range(12))
    assert a.to_dict()["issue_rule"] == rule


def _watch_issues(monkeypatch):
    """Every VerifyIssue the engine sends, with the engine's state at that instant."""
    seen = []
    original = pooled.PooledRun.try_issue

    def spy(self):
        if not self.in_pass:
            seen.append({"ok": self.below_capacity_ok(), "tlm_busy": self.in_pass,
                         "gpu_steps": bool(self.gpu_steps),
                         "can_draft": any(not (r.round.stopped or r.round.blocked)
                                             for r in self.live.values()),
                         "pool": self.manager.shared_pool.count, "capacity": self.capacity})
        return original(self)
    monkeypatch.setattr(pooled.PooledRun, "try_issue", spy)
    return seen


@pytest.mark.pure_python
@pytest.mark.parametrize("rule", ["gpu-idle", "tlm-idle", "drained"])
def test_a_pass_below_capacity_starts_only_as_the_rule_says(rule, tiny_trace, monkeypatch):
    seen = _watch_issues(monkeypatch)
    simulate(_tiny("saddle-s", tiny_trace, issue_rule=rule))   # DLM FC on the GPU (static)
    assert seen
    for s in seen:
        expect = not s["tlm_busy"] and {"tlm-idle": True, "gpu-idle": not s["gpu_steps"],
                                        "drained": not s["can_draft"]}[rule]
        assert s["ok"] == expect
    # The rules differ on this run: tlm-idle lets a pass start while a GPU DLM step runs.
    if rule == "tlm-idle":
        assert any(s["ok"] and s["gpu_steps"] for s in seen)


def test_gpu_idle_waits_for_the_dlm_on_the_gpu(tiny_trace):
    tlm, _ = simulate(_tiny("saddle-s", tiny_trace, issue_rule="tlm-idle"))
    gpu, _ = simulate(_tiny("saddle-s", tiny_trace, issue_rule="gpu-idle"))
    assert gpu.verification_passes < tlm.verification_passes


def test_issue_rule_is_checked():
    with pytest.raises(ConfigError, match="issue_rule: expected one of"):
        simulate(RunParams(system="saddle", pair="opt-66b+opt-1.3b", batch=4, issue_rule="soon",
                           requests=4))
    with pytest.raises(ConfigError, match="saddle-p has no Eager Pool"):
        simulate(RunParams(system="saddle-p", pair="opt-66b+opt-1.3b", batch=4,
                           issue_rule="drained", requests=4))


@pytest.mark.pure_python
def test_a_later_chunk_is_priced_with_its_own_queries(tiny_trace, monkeypatch):
    priced = []
    original = pooled.PooledRun.price_tlm

    def spy(self, requests, attention=None):
        priced.append(list(requests))
        return original(self, requests, attention)
    monkeypatch.setattr(pooled.PooledRun, "price_tlm", spy)
    _, run = simulate(_tiny("saddle", tiny_trace), record=True)
    issued = [out[0] for _, out in run.events if type(out[0]).__name__ == "Issued"]
    assert len(issued) == len(priced)
    later = 0
    for event, requests in zip(issued, priced):
        groups = {}
        for tok in event.tokens:
            groups.setdefault(tok.request, []).append(tok.position)
        queries = [q for _, q in requests]
        want = [len(p) + (p[0] == 1) for _, p in sorted(groups.items())]
        assert queries == want
        later += sum(p[0] > 1 for p in groups.values())
    assert later > 0          # the run has later chunks, so the rule was exercised
