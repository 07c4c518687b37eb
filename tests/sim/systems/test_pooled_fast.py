"""The per-step shortcuts of ``PooledRun`` (sim/systems/pooled.py) against the plain calls they
stand for: every DraftToken carries the token id (position mod 2**17) and ``quantize_prob`` of its round's trace
position, and a prediction step takes its ready rounds in slot order."""
import pytest

from common.paths import CONFIGS
from sim.manager.formats import quantize_prob
from sim.manager.manager import Manager
from sim.systems import pooled
from sim.systems.run import simulate
from tests.sim.systems.test_systems import params


@pytest.mark.pure_python
@pytest.mark.parametrize("system", ["saddle", "saddle-p"])
def test_draft_tokens_carry_the_plain_token_and_probability(system, tiny_trace, monkeypatch):
    runs, seen, steps = [], [], []
    step, draft = pooled.PooledRun.mb_step, Manager.draft

    def mb_step(self, mb):
        runs.append(self)
        want = [self.ready[mb][slot] for slot in sorted(self.ready[mb])]
        step(self, mb)
        if want:
            assert self.stepping[mb] == want
            steps.append(len(want))

    def checked(self, request, microbatch, position, token, prob):
        rnd = runs[-1].live[request].round
        p = rnd.p[position - 1]
        assert (token, prob) == ((rnd.base + position - 1) & pooled._TOKEN_MASK, quantize_prob(p))
        seen.append(p)
        return draft(self, request, microbatch, position, token, prob)
    monkeypatch.setattr(pooled.PooledRun, "mb_step", mb_step)
    monkeypatch.setattr(Manager, "draft", checked)
    simulate(params(system, None, tiny_trace, batch=12, manager=str(CONFIGS / "manager_coverify.yaml")))
    assert len(seen) > 100 and len(set(seen)) >= 10 and max(steps) > 1


@pytest.mark.pure_python
@pytest.mark.parametrize("p", [0.0, 1.0, 1.5, 1e-300, 0.5 / 65536, 1.5 / 65536, 1 - 0.5 / 65536,
                               0.1, 0.3, 0.7, 0.999999])
def test_quantized_edges_through_a_step(p, tiny_trace, monkeypatch):
    """Probabilities outside the common case (0 < p < 1) and at rounding edges, put into every
    round, give the DraftToken quantize_prob gives."""
    seen = []
    draft = Manager.draft
    new_round = pooled.PooledRun.new_round

    def forced(self, live):
        new_round(self, live)
        rnd = live.round
        rnd.p = [p] * len(rnd.p)

    def checked(self, request, microbatch, position, token, prob):
        seen.append(prob)
        return draft(self, request, microbatch, position, token, prob)
    monkeypatch.setattr(pooled.PooledRun, "new_round", forced)
    monkeypatch.setattr(Manager, "draft", checked)
    simulate(params("saddle", None, tiny_trace, batch=4))
    assert seen and set(seen) == {quantize_prob(p)}
