"""Hardware/software co-verification: the Manager RTL against the Python model on the
transactions of a simulated decoding run.

``saddle hw coverify`` runs one Shared Pool system (``saddle`` by default) of the simulator on
a decoding trace (by default the real SmolLM2 trace in ``traces/data/``) with a Manager sized by
a config file (``configs/manager_coverify.yaml``: small enough for Amaranth's simulator),
records every transaction the simulator sent and the model's answer, writes them as a
transaction log (``sim/manager/txlog.py``) and replays the log on ``hw.manager.manager.Manager`` built
with the same configuration (``hw/flow/manager_replay.py``), comparing every event bit for bit. With
``--log FILE`` it replays an existing log instead (recorded outputs, or the model's when the
log has inputs only).

What this proves beyond the random tests: the RTL takes the model's decision on the
transaction mix a real run produces (long rounds of a confident draft model, bursts of
rejections, pools that fill while a verification is in flight, retirements and refills). The
report counts the functional-coverage corners the sequence reached
(``hw.flow.manager_random.CORNERS``).

At the shipped size (``configs/manager.yaml``: 128 requests, 512 + 512 pool entries) only
Verilator is fast enough; ``SHIPPED_RUNS`` are the two runs that size is checked on (every
request of the real trace (64) at batch 64, and 128 requests of the pair's synthetic trace at batch
128, which fills both 512-entry pools and uses all 128 request slots). CI
(tests/hw/flow/test_coverify.py) replays the first ``SHIPPED_CI_TRANSACTIONS`` of each on one
Verilator build; `saddle hw report` replays them whole.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from sim.manager.config import ManagerConfig


@dataclass
class CoverifyReport:
    source: str                       # what was replayed: the run, or the log file
    config: ManagerConfig
    transactions: int                 # in the sequence
    compared: int                     # matched on the RTL before the first mismatch (all if none)
    cycles: int                       # RTL clock edges over the compared transactions
    mismatch: str | None
    inputs: dict = field(default_factory=dict)    # transaction type -> count
    coverage: dict = field(default_factory=dict)  # corner (manager_random.CORNERS) -> count
    txlog: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.mismatch is None and self.compared == self.transactions

    def as_dict(self) -> dict:
        return {"source": self.source, "config": self.config.to_dict(), "transactions": self.transactions,
                "compared": self.compared, "cycles": self.cycles, "ok": self.ok, "mismatch": self.mismatch,
                "inputs": self.inputs, "coverage": self.coverage, "txlog": self.txlog,
                "seconds": round(self.seconds, 1)}


def record_run(params) -> tuple[ManagerConfig, list[tuple[object, list]], dict]:
    """Simulate ``params`` (``sim.systems.run.RunParams`` of a Shared Pool system) recording the
    Manager's transactions; returns the run's Manager config, the (input, events) pairs and
    the run's result record."""
    from sim.systems.run import simulate

    metrics, run = simulate(params, record=True)
    return run.manager.config, list(run.events), metrics.to_dict()


SIMULATORS = ("amaranth", "verilator")
REAL_TRACE = "smollm2-135m.self24.real.jsonl.gz"         # in traces/data/
# Shipped-size runs: trace ("real": REAL_TRACE; "synthetic": the pair's), batch, requests (None: all).
SHIPPED_RUNS = {"real": ("real", 64, None), "synthetic": ("synthetic", 128, 128)}
# What CI replays of each (a prefix of a legal sequence is legal). The build of the shipped
# Manager takes about 140 s of CPU and a cycle about 1.6 ms of it (-O0; hw/README.md), so a few
# thousand transactions is what the test suite's budget holds. The real run's first 1400 have
# all 64 of its requests in flight and up to 152 tokens in each pool, and reach every corner
# the whole run reaches but the Unlock with nothing pooled (its last); the synthetic run's first
# 1300 use all 128 request slots and fill all eight 64-entry Eager Pools (refused drafts, released
# on a retry), with up to 465 tokens in the Shared Pool.
SHIPPED_CI_TRANSACTIONS = {"real": 1400, "synthetic": 1300}
SHIPPED_SEED = 7                  # the back-pressure pattern of the shipped-size replays


def shipped_params(kind: str, source: str = "shipped-size co-verification"):
    """``RunParams`` of the shipped-size run ``kind`` (``SHIPPED_RUNS``): saddle on
    opt-66b+opt-1.3b's costs with the Manager of configs/manager.yaml."""
    from common.paths import CONFIGS, TRACE_DATA
    from sim.systems.run import RunParams

    trace, batch, requests = SHIPPED_RUNS[kind]
    return RunParams(system="saddle", pair="opt-66b+opt-1.3b", batch=batch, split="all", requests=requests,
                     trace=str(TRACE_DATA / REAL_TRACE) if trace == "real" else None,
                     manager=str(CONFIGS / "manager.yaml"), source=source)


def shipped_design():
    """(name, factory) of the Verilator build the shipped-size runs replay on: the Manager of
    configs/manager.yaml with the idle softmax of every co-verification (the runs have no
    DraftLogits). `_on_verilator` builds the same design under the same name."""
    from common.paths import CONFIGS
    from hw.flow.manager_replay import IDLE_SOFTMAX
    from hw.manager.manager import Manager

    config = ManagerConfig.load(CONFIGS / "manager.yaml")
    return design_name(config, IDLE_SOFTMAX), lambda: Manager.from_config(config, IDLE_SOFTMAX)


def occupancy(config: ManagerConfig, pairs) -> dict:
    """How much of the Manager a sequence used (replayed on the model): distinct request ids, the
    highest request id, the most tokens the Shared Pool and the Eager Pools held at once."""
    from sim.manager.manager import Manager

    model, requests, shared, eager = Manager(config), set(), 0, 0
    for txn, _ in pairs:
        model.apply(txn)
        if getattr(txn, "request", None) is not None:
            requests.add(txn.request)
        pooled = sum(model.eager_pools.count(mb) for mb in range(config.micro_batches))
        shared, eager = max(shared, model.shared_pool.count), max(eager, pooled)
    return {"requests": len(requests), "max_request": max(requests, default=-1), "peak_shared": shared,
            "peak_eager": eager}


def corrupt_expected(pairs, index: int) -> tuple[list, int]:
    """A copy of ``pairs`` whose expected events are wrong in one bit: the first event of the
    first transaction from ``index`` on that has events gets its first integer field XOR 1.
    Returns (pairs, position of that transaction). The self-test that the comparison fails on a
    wrong expectation (tests/hw/flow/test_coverify.py; SADDLE_MGR_CORRUPT in the Verilator bench)."""
    import dataclasses

    out = list(pairs)
    for i in range(index, len(out)):
        txn, events = out[i]
        if isinstance(events, Exception) or not events:
            continue
        first = events[0]
        name = next(f.name for f in dataclasses.fields(first)
                    if isinstance(getattr(first, f.name), int) and not isinstance(getattr(first, f.name), bool))
        out[i] = (txn, [dataclasses.replace(first, **{name: getattr(first, name) ^ 1}), *events[1:]])
        return out, i
    raise ValueError(f"no transaction with events from {index} on")


def coverify(config: ManagerConfig, pairs, *, source: str, softmax=None, stall: float = 0.2, seed: int = 0,
             txlog: Path | None = None, simulator: str = "amaranth",
             selector_stage_levels: int | None = None, storage: str | None = None) -> CoverifyReport:
    """Replay ``pairs`` on the RTL sized by ``config`` (and ``softmax``, a ``SoftmaxParams``, if
    the sequence has DraftLogits) in ``simulator``: Amaranth's simulator on the design, or
    cocotb on Verilator on its exported Verilog (built once under build/cocotb/, which needs
    ``txlog``). With ``txlog`` the pairs are written there first. The Shared Pool selector is
    pipelined every ``selector_stage_levels`` tree levels (None: the shipped
    configs/hardware/manager_rtl.yaml; 0: combinational), the pools keep their records in
    ``storage`` (None: the shipped; "ff" or "sram")."""
    from hw.flow.manager_random import CORNERS, coverage
    from sim.manager.txlog import write_txlog

    if simulator not in SIMULATORS:
        raise ValueError(f"simulator: expected one of {SIMULATORS}, found {simulator!r}")
    if txlog is not None:
        txlog.parent.mkdir(parents=True, exist_ok=True)
        write_txlog(txlog, config, pairs, softmax)
    hits = coverage(pairs)
    report = CoverifyReport(source=source, config=config, transactions=len(pairs), compared=0, cycles=0,
                            mismatch=None, inputs=dict(Counter(type(txn).__name__ for txn, _ in pairs)),
                            coverage={corner: hits[corner] for corner in CORNERS},
                            txlog=str(txlog) if txlog else None)
    started = time.monotonic()
    if simulator == "amaranth":
        from hw.flow.manager_replay import replay

        result = replay(config, pairs, softmax=softmax, stall=stall, seed=seed, name="coverify",
                        selector_stage_levels=selector_stage_levels, storage=storage)
        report.compared, report.cycles, report.mismatch = result.transactions, result.total_cycles, result.mismatch
    else:
        if txlog is None:
            raise ValueError("the Verilator replay reads the pairs from a transaction log: give txlog")
        report.compared, report.cycles, report.mismatch = _on_verilator(config, softmax, txlog, stall, seed,
                                                                        selector_stage_levels, storage)
    report.seconds = time.monotonic() - started
    return report


def design_name(config: ManagerConfig, softmax, selector_stage_levels: int | None = None,
                storage: str | None = None) -> str:
    """Build folder name of a Manager design: the sizes its Verilog depends on (one Verilator
    build per distinct design, shared by coverify and the RTL tests); the selector's stage
    levels (None: the shipped ones) when it is pipelined; ``_sram`` for the pools' SRAM storage
    (None: the shipped storage); ``_plus`` for SADDLE+ (a configuration that uses it)."""
    from hw.manager.manager import uses_plus
    from hw.manager.sizes import pool_storage

    if selector_stage_levels is None:
        from hw.manager.sizes import selector_stage_levels as shipped
        selector_stage_levels = shipped()
    return (f"manager_r{config.max_requests}_s{config.shared_entries}_e{config.eager_entries}"
            f"_m{config.micro_batches}_l{softmax.lanes}_v{softmax.vocab}_x{softmax.exp_frac_bits}"
            + ("" if config.aging_passes is None else f"_a{config.aging_passes}")
            + (f"_k{selector_stage_levels}" if selector_stage_levels else "")
            + ("_sram" if (storage or pool_storage()) == "sram" else "")
            + ("_plus" if uses_plus(config) else ""))


def _on_verilator(config: ManagerConfig, softmax, txlog: Path, stall: float, seed: int,
                  selector_stage_levels: int | None = None, storage: str | None = None):
    import json

    from hw.flow.manager_replay import IDLE_SOFTMAX
    from hw.flow.verilator_runner import built
    from hw.manager.manager import Manager

    unit = softmax or IDLE_SOFTMAX
    design = built(design_name(config, unit, selector_stage_levels, storage),
                   lambda: Manager.from_config(config, unit, selector_stage_levels=selector_stage_levels,
                                               storage=storage))
    report_path = Path(txlog).with_suffix(".verilator.json")
    report_path.unlink(missing_ok=True)
    bench = Path(__file__).with_name("testbench") / "manager_txlog.py"
    try:
        design.run(bench, env={"SADDLE_MGR_TXLOG": str(Path(txlog).resolve()), "SADDLE_MGR_STALL": str(stall),
                               "SADDLE_SEED": str(seed), "SADDLE_MGR_REPORT": str(report_path.resolve())},
                   log_file=report_path.with_suffix(".log"))
    except AssertionError as exc:
        if not report_path.is_file():
            return 0, 0, str(exc)
    result = json.loads(report_path.read_text())
    return result["compared"], result["cycles"], (result["mismatches"] or [None])[0]


def log_pairs(path: Path):
    """A transaction log's config, softmax sizes (or None) and (input, expected events); the
    model fills in missing outputs and must agree with the recorded ones."""
    from common.errors import SaddleError
    from sim.manager.manager import Manager
    from sim.manager.txlog import read_txlog, replay

    log = read_txlog(path)
    model = Manager(log.config, log.softmax)
    pairs = []

    def apply(txn):
        events = model.apply(txn)
        pairs.append((txn, events))
        return events

    mismatch = replay(log, apply)
    if mismatch is not None:
        raise SaddleError(f"{path}: the model disagrees with the recorded outputs at {mismatch.describe()}")
    return log.config, log.softmax, pairs
