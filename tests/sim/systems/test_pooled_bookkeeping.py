"""The Shared Pool engine's shortcuts (sim/systems/pooled.py) against what they stand for: the
per-micro-batch ``ready`` rounds are exactly the requests that can draft, and a run that sends
DraftToken unboxed (not recording) gives the record of one that builds every transaction."""
import json

import pytest

from common.paths import CONFIGS
from sim.systems import pooled
from sim.systems.run import simulate
from tests.sim.systems.test_systems import params


@pytest.mark.pure_python
@pytest.mark.parametrize("system", ["saddle", "saddle-p", "saddle-s", "oracle"])
def test_ready_rounds_are_the_requests_that_can_draft(system, tiny_trace, monkeypatch):
    steps = []
    original = pooled.PooledRun.mb_step

    def checked(self, mb):
        want = {live.slot: live.round for live in self.live.values()
                if live.mb == mb and not (live.round.stopped or live.round.blocked)}
        assert self.ready[mb] == want
        steps.append(len(want))
        return original(self, mb)
    monkeypatch.setattr(pooled.PooledRun, "mb_step", checked)
    # The coverify Manager (32 + 24 entries) with every request in: full pools, refused and blocked requests.
    _, run = simulate(params(system, None, tiny_trace, batch=12, manager=str(CONFIGS / "manager_coverify.yaml")))
    assert len(steps) > 100 and 0 in steps and max(steps) > 1
    if system != "oracle":
        assert run.refused > 0


@pytest.mark.parametrize("system", ["saddle", "saddle-p"])
def test_recording_does_not_change_the_run(system, tiny_trace):
    small = str(CONFIGS / "manager_coverify.yaml")
    plain, _ = simulate(params(system, None, tiny_trace, batch=8, manager=small))
    recorded, run = simulate(params(system, None, tiny_trace, batch=8, manager=small), record=True)
    drafted = sum(type(out[0]).__name__ == "Drafted" for _, out in run.events)
    assert drafted == recorded.tokens.drafted - recorded.tokens.discard_reasons.get("stale_context", 0)
    assert json.dumps(plain.to_dict(), sort_keys=True) == json.dumps(recorded.to_dict(), sort_keys=True)
