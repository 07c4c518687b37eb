"""Co-verification on a real trace: the transactions of a simulated SADDLE run on the shipped
SmolLM2 trace, replayed on the Manager RTL (Amaranth's simulator on the reduced Manager of
configs/manager_coverify.yaml, and the exported Verilog of the shipped-size Manager,
configs/manager.yaml, on Verilator), every event equal to the model's; a wrong expectation fails
on both simulators; and `saddle hw coverify --log` on a recorded log."""
import json

import pytest

from common.errors import SaddleError
from common.paths import CONFIGS, TRACE_DATA
from hw.flow.coverify import (
    SHIPPED_CI_TRANSACTIONS,
    SHIPPED_SEED,
    corrupt_expected,
    coverify,
    occupancy,
    record_run,
    shipped_params,
)
from hw.flow.manager_random import CORNERS, coverage
from sim.cli import main
from sim.manager.transactions import Refused
from sim.systems.run import RunParams

REAL = TRACE_DATA / "smollm2-135m.self24.real.jsonl.gz"


@pytest.fixture(scope="module")
def recorded():
    params = RunParams(system="saddle", pair="opt-66b+opt-1.3b", batch=4, trace=str(REAL), split="all",
                       requests=4, manager=str(CONFIGS / "manager_coverify.yaml"))
    return record_run(params)


def test_real_trace_run_matches_the_rtl(recorded, tmp_path):
    config, pairs, record = recorded
    assert (config.micro_batches, config.shared_entries, config.eager_entries) == (8, 32, 24)   # 8 devices
    cov = coverage(pairs)
    for corner in ("issued", "all_accepted", "moved", "resumed", "retired"):
        assert cov[corner] > 0, (corner, dict(cov))
    assert cov["reject_first"] + cov["reject_later"] > 0
    report = coverify(config, pairs, source="test", stall=0.2, seed=3, txlog=tmp_path / "run.jsonl")
    assert report.ok, report.mismatch
    assert report.transactions == len(pairs) > 500
    assert report.inputs["DraftToken"] == record["tokens"]["drafted"] + sum(
        isinstance(e, Refused) for _, events in pairs for e in events)
    # The log replays on the model too, and coverify accepts it as input.
    assert main(["manager", "replay", str(tmp_path / "run.jsonl")]) == 0


def test_calibrated_stop_rule_on_the_real_trace_matches_the_rtl():
    """SADDLE with the calibrated stop rule (the acceptance table fitted on the real trace's
    validation requests, in the Controller's multiplier): the run's transactions on the RTL."""
    params = RunParams(system="saddle", pair="opt-66b+opt-1.3b", batch=4, trace=str(REAL), split="all",
                       requests=4, manager=str(CONFIGS / "manager_coverify.yaml"), stop="calibrated",
                       stop_param=0.5)
    config, pairs, record = record_run(params)
    assert config.acceptance_table == tuple(record["acceptance_table"])
    assert len(set(config.acceptance_table)) > 8
    report = coverify(config, pairs, source="test", stall=0.2, seed=4)
    assert report.ok, report.mismatch
    assert report.transactions == len(pairs) > 300


def test_cli_replays_a_log(recorded, tmp_path, capsys):
    from sim.manager.txlog import write_txlog
    config, pairs, _ = recorded
    log = tmp_path / "short.jsonl"
    write_txlog(log, config, [(txn, None) for txn, _ in pairs[:200]])       # inputs only
    assert main(["hw", "coverify", "--log", str(log), "--json", "--stall", "0.5"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["transactions"] == report["compared"] == 200
    assert list(report["coverage"]) == list(CORNERS)
    assert report["coverage"] == {corner: coverage(pairs[:200])[corner] for corner in CORNERS}


def test_a_log_the_model_disagrees_with_is_refused(recorded, tmp_path):
    from hw.flow.coverify import log_pairs
    from sim.manager.txlog import write_txlog
    config, pairs, _ = recorded
    (txn, events), *rest = pairs[:50]
    log = tmp_path / "bad.jsonl"
    write_txlog(log, config, [(txn, [])] + rest)
    with pytest.raises(SaddleError, match=r"bad.jsonl: the model disagrees with the recorded outputs at line 2"):
        log_pairs(log)


@pytest.fixture(scope="module")
def shipped_runs():
    """The shipped-size runs of hw.flow.coverify.SHIPPED_RUNS, recorded once (about a second)."""
    return {kind: record_run(shipped_params(kind, source="test")) for kind in SHIPPED_CI_TRANSACTIONS}


def test_a_wrong_expectation_fails_on_amaranth(recorded):
    """The comparison is live: one bit wrong in one expected event is a mismatch there."""
    config, pairs, _ = recorded
    bad, at = corrupt_expected(pairs[:60], 30)
    assert bad[at] != pairs[at] and bad[:at] == pairs[:at]
    report = coverify(config, bad, source="test", stall=0.2, seed=3)
    assert not report.ok and report.compared == at and report.mismatch


@pytest.mark.slow
@pytest.mark.verilator_prebuild("hw.flow.coverify:shipped_design")
def test_a_wrong_expectation_fails_on_verilator(shipped_runs, tmp_path, monkeypatch):
    """The same on Verilator, through the transaction-log bench and coverify's report: the bench
    corrupts the model's events (SADDLE_MGR_CORRUPT), the replay stops at that transaction. On
    the shipped Manager's build (below)."""
    config, pairs, _ = shipped_runs["real"]
    _, at = corrupt_expected(pairs[:80], 40)
    monkeypatch.setenv("SADDLE_MGR_CORRUPT", "40")
    report = coverify(config, pairs[:80], source="test", txlog=tmp_path / "bad.jsonl", simulator="verilator", seed=5)
    assert not report.ok and report.compared == at
    assert report.mismatch.startswith(f"#{at} "), report.mismatch


@pytest.mark.slow
@pytest.mark.verilator_prebuild("hw.flow.coverify:shipped_design")
@pytest.mark.parametrize("kind", list(SHIPPED_CI_TRANSACTIONS))
def test_shipped_size_run_on_verilator(kind, shipped_runs, tmp_path):
    """The exported Verilog of the shipped Manager (128 requests, 512 + 512 entries; one
    Verilator build for both runs, started in the background when the session begins (this test
    runs last, tests/hw/conftest.py) and reused across sessions while the RTL is unchanged) on the first
    SHIPPED_CI_TRANSACTIONS of a real-trace and a synthetic batch-128 run, every event equal to
    the model's. The prefixes use what the reduced Manager does not have: more than 16 request
    slots, pools far beyond 32 + 24 entries; the synthetic one all 128 slots and full 64-entry
    Eager Pools."""
    config, pairs, _ = shipped_runs[kind]
    assert (config.max_requests, config.shared_entries, config.eager_entries, config.micro_batches) == \
        (128, 512, 512, 8)
    prefix = pairs[:SHIPPED_CI_TRANSACTIONS[kind]]
    used = occupancy(config, prefix)
    assert used["requests"] > 16 and used["peak_shared"] > 100 and used["peak_eager"] > 100, used
    if kind == "synthetic":
        assert used["max_request"] == 127 and used["peak_eager"] == 512, used
        assert coverage(prefix)["refused_eager"] > 0
    report = coverify(config, prefix, source="test", txlog=tmp_path / f"{kind}.jsonl", simulator="verilator",
                      seed=SHIPPED_SEED)
    assert report.ok, report.mismatch
    assert report.compared == len(prefix) == SHIPPED_CI_TRANSACTIONS[kind]


def _aging_run(batch: int, requests: int):
    """A real-trace SADDLE run with Shared Pool aging K = 1 (its strongest setting), and a check
    that aging changed its selections: the greedy model diverges on the same transactions.
    The pass capacity is the earlier fc_slack reading with no slack (the batch, here below the
    32-entry pool): with the shipped ridge capacity a pass takes the whole pool of this small
    Manager and no request is ever passed over."""
    from sim.manager.manager import Manager
    from sim.manager.transactions import ProtocolError
    params = RunParams(system="saddle", pair="opt-66b+opt-1.3b", batch=batch, trace=str(REAL), split="all",
                       requests=requests, manager=str(CONFIGS / "manager_coverify.yaml"), aging_passes=1,
                       capacity_rule="fc_slack", capacity_slack=0.0)
    config, pairs, record = record_run(params)
    assert config.aging_passes == 1 and record["aging_passes"] == 1
    greedy = Manager(config.replace(aging_passes=None))
    with pytest.raises((AssertionError, ProtocolError)):
        for txn, events in pairs:
            assert greedy.apply(txn) == events
    return config, pairs


def test_real_trace_run_with_aging_matches_the_rtl(tmp_path):
    config, pairs = _aging_run(4, 4)
    report = coverify(config, pairs, source="test", stall=0.2, seed=3, txlog=tmp_path / "aging.jsonl")
    assert report.ok, report.mismatch
    assert report.compared == len(pairs) > 500
    assert main(["manager", "replay", str(tmp_path / "aging.jsonl")]) == 0    # K travels in the log


@pytest.mark.slow
def test_real_trace_run_with_aging_on_verilator(tmp_path):
    """The exported Verilog of the Manager built with aging, its selector combinational: the
    build of tests/hw/manager/test_manager_verilator.py's aging test (same name, one build)."""
    config, pairs = _aging_run(8, 16)
    report = coverify(config, pairs, source="test", txlog=tmp_path / "aging.jsonl", simulator="verilator", seed=5,
                      selector_stage_levels=0)
    assert report.ok, report.mismatch
    assert report.compared == len(pairs) > 2000
