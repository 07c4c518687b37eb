"""SADDLE+ (issue 32) in the simulator: its Manager tables are set per run from the cost model
and configs/tau/plus/, each piece switches off on its own, SADDLE's Manager has none of them,
and runs conserve tokens and repeat byte for byte."""
import pytest

from sim.systems.resolve import RunParams, resolve
from sim.systems.run import simulate

PAIR = "opt-66b+opt-1.3b"


def params(system="saddle-plus", **kw) -> RunParams:
    return RunParams(system=system, pair=PAIR, batch=8, requests=16, sequence_length=1024, **kw)


def test_saddle_has_none_of_the_new_tables():
    cfg = resolve(params("saddle")).manager_config
    assert (cfg.pass_costs, cfg.tau_table, cfg.dlm_fc_threshold_locked) == (None, None, None)


def test_saddle_plus_tables_and_switches():
    setup = resolve(params())
    cfg = setup.manager_config
    assert cfg.pass_costs is not None and cfg.pass_costs.issue and cfg.pass_costs.select
    assert len(cfg.pass_costs.fc) == cfg.shared_entries // 16 + 1
    assert cfg.tau_table is not None and len(cfg.tau_table) == 8
    assert cfg.dlm_fc_threshold_locked is not None
    assert setup.capacity == cfg.shared_entries        # the planner decides below the pool
    assert resolve(params(issue_rule="gpu-idle")).manager_config.pass_costs.issue is False
    assert resolve(params(capacity_rule="ridge")).manager_config.pass_costs.select is False
    assert resolve(params("saddle-plus-flat-tau")).manager_config.tau_table is None
    assert resolve(params("saddle-plus-blind-scheduler")).manager_config.dlm_fc_threshold_locked is None
    # The oracle plans its own rounds: no tau table may stop them first.
    assert resolve(params(stop="oracle")).manager_config.tau_table is None


@pytest.mark.parametrize("system", ["saddle-plus", "saddle-plus-flat-tau"])
def test_runs_conserve_tokens_and_repeat(system):
    first, _ = simulate(params(system))
    again, _ = simulate(params(system))
    assert first.to_dict() == again.to_dict()
    t = first.tokens
    assert t.generated == t.accepted + t.tlm_tokens
    assert first.plus is not None and "pass_costs" in first.plus
