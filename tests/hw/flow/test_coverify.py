"""Co-verification on a real trace: the transactions of a simulated SADDLE run on the shipped
SmolLM2 trace, replayed on the Manager RTL (Amaranth's simulator, and the exported Verilog on
Verilator), every event equal to the model's; and `saddle hw coverify --log` on a recorded log."""
import json

import pytest

from common.errors import SaddleError
from common.paths import CONFIGS, TRACE_DATA
from hw.flow.coverify import coverify, record_run
from sim.cli import main
from sim.manager.random_txns import CORNERS, coverage
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


@pytest.mark.slow
def test_real_trace_run_on_verilator(tmp_path, verilator_design):
    """The exported Verilog on a longer real-trace run (the build is shared with
    test_manager_verilator.py: same sizes, same name)."""
    from hw.flow.coverify import design_name
    from hw.flow.manager_replay import IDLE_SOFTMAX
    from hw.manager.manager import Manager
    params = RunParams(system="saddle", pair="opt-66b+opt-1.3b", batch=8, trace=str(REAL), split="all",
                       requests=16, manager=str(CONFIGS / "manager_coverify.yaml"))
    config, pairs, _ = record_run(params)
    verilator_design(design_name(config, IDLE_SOFTMAX), lambda: Manager.from_config(config, IDLE_SOFTMAX))
    report = coverify(config, pairs, source="test", txlog=tmp_path / "run.jsonl", simulator="verilator", seed=5)
    assert report.ok, report.mismatch
    assert report.compared == len(pairs) > 2000


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
def test_real_trace_run_with_aging_on_verilator(tmp_path, verilator_design):
    """The exported Verilog of the Manager built with aging (its own build, ``_a1``)."""
    from hw.flow.coverify import design_name
    from hw.flow.manager_replay import IDLE_SOFTMAX
    from hw.manager.manager import Manager
    config, pairs = _aging_run(8, 16)
    verilator_design(design_name(config, IDLE_SOFTMAX), lambda: Manager.from_config(config, IDLE_SOFTMAX))
    report = coverify(config, pairs, source="test", txlog=tmp_path / "aging.jsonl", simulator="verilator", seed=5)
    assert report.ok, report.mismatch
    assert report.compared == len(pairs) > 2000
