"""The run protocol: each system's class (``catalog.run_class``), one ``BaseRun.commit`` that
conserves tokens for every class, and a system added by name with its own class."""
import pytest

from sim.systems import catalog
from sim.systems.autoregressive import AutoregressiveRun
from sim.systems.planned import PlannedRun
from sim.systems.pooled import PooledRun
from sim.systems.run import simulate
from sim.systems.saddle_d import SaddleDRun
from tests.sim.systems.test_systems import SYSTEMS, params

CLASSES = {"gpu-ad": AutoregressiveRun, "pim-ad": AutoregressiveRun, "specpim-ad": AutoregressiveRun,
           "gpu-sd": PlannedRun, "pim-sd": PlannedRun, "specpim-sd": PlannedRun,
           "saddle-d": SaddleDRun, "saddle-p": PooledRun, "saddle-s": PooledRun,
           "saddle": PooledRun, "oracle": PooledRun}


@pytest.mark.pure_python
@pytest.mark.parametrize("system,d", SYSTEMS)
def test_each_system_class_commits_every_output_token_once(system, d, tiny_trace, monkeypatch):
    committed: dict[str, int] = {}
    commit = catalog.BaseRun.commit

    def counted(self, live, accepted, tlm_token):
        before = live.t
        finished = commit(self, live, accepted, tlm_token)
        committed[live.trace.id] = committed.get(live.trace.id, 0) + live.t - before
        assert 0 <= live.t <= live.out_len and finished == (live.t == live.out_len)
        return finished
    monkeypatch.setattr(catalog.BaseRun, "commit", counted)
    record, run = simulate(params(system, d, tiny_trace))
    assert type(run) is CLASSES[system]
    assert sorted(committed.values()) == sorted(12 + 5 * i for i in range(12))
    assert not run.live and run.request_tokens and sum(run.request_tokens) == record.tokens.generated


def test_a_system_named_in_the_catalog_gets_its_class(tiny_trace, monkeypatch):
    class Counted(PlannedRun):
        rounds = 0

        def new_round(self, batch):
            self.rounds += 1
            super().new_round(batch)
    monkeypatch.setitem(catalog.BY_NAME, "gpu-sd", Counted)
    counted, run = simulate(params("gpu-sd", 3, tiny_trace))
    assert type(run) is Counted and run.rounds == counted.verification_passes
    monkeypatch.delitem(catalog.BY_NAME, "gpu-sd")
    plain, _ = simulate(params("gpu-sd", 3, tiny_trace))
    assert counted.to_dict() == plain.to_dict()
