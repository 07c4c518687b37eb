"""The cycle costs the simulator charges for the Manager and the bank PE, measured on the RTL
(Amaranth's simulator): ``saddle hw cycles [--write]``.

What is measured, and how it enters the simulator:

* Monitoring (``sim.manager.timing.ManagerTiming.monitoring_cycles``): a Manager at the test
  sizes (``SMALL``) with the shipped softmax unit's lanes and fraction bits, n requests admitted,
  then n DraftLogits, their vectors streamed back to back on ``logits`` from the same clock edge
  as the first DRAFT command: the clock edges from the first beat's transfer to the last DONE
  transfer, both included, for several n and vector lengths. They must fit
  n x (ceil(V / lanes) + ``softmax_vector_cycles``) + ``decide_cycles`` exactly; the two
  constants are read off the fit. The softmax's cycles do not depend on the vocabulary beyond
  its beats (the vocabulary only sizes the running sum), so a short vector measures the shipped
  unit's constants.
* Decision (``decision_cycles``): VerifyIssues of k = 1 and 5 tokens on the shipped Shared Pool
  selector (the pipelined one's latency is hidden in the Issue); they must fit
  ``select_token_cycles`` x k + ``select_fixed_cycles``.
* SADDLE+'s planner (``plus``, not charged by the simulator: printed, not written): an Issue
  through the planner walks w waiting entries before it selects k of them; VerifyIssues of
  (w, k) = (1, 1), (5, 1), (5, 5) must fit ``select_token_cycles`` x k + ``select_fixed_cycles``
  + ``plan_walk_cycles`` x w + ``plan_fixed_cycles``.
* The bank PE's ``pipeline_latency_cycles`` and ``drain_latency_cycles``
  (configs/hardware/bank_pe.yaml, read by the PIM cost model): a START, one MAC and two DRAINs
  back to back.

``configs/timing/manager.yaml`` is generated from these (its ``clock_ghz`` is kept: the clock is
a parameter, the cycle counts are the RTL's); ``tests/hw/flow/test_cycles.py`` fails when either
file and the RTL disagree.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from common.config import config_path, load_yaml
from hw.flow.amaranth_sim import run
from hw.flow.manager_codec import config_ports, encode, from_view, logits_beats

# Vectors of the monitoring measurement: (requests, vector length in lanes, extra logits).
MONITOR_POINTS = ((1, 4, 0), (2, 4, 0), (3, 4, 0), (2, 7, 3))
ISSUE_SIZES = (1, 5)


@dataclass(frozen=True)
class Cycles:
    manager: dict[str, int]      # the measured keys of configs/timing/manager.yaml
    pe: dict[str, int]           # pipeline_latency_cycles, drain_latency_cycles
    plus: dict[str, int]         # SADDLE+'s planner: plan_walk_cycles, plan_fixed_cycles


def monitoring_run(n_requests: int, vector: int, lanes: int, exp_frac_bits: int, storage: str | None = None) -> int:
    """Clock edges from the first logit beat's transfer to the DONE transfer of the last of
    ``n_requests`` DraftLogits of ``vector`` logits each (the pools' ``storage``: None, the shipped)."""
    from hw.flow.manager_stimulus import SMALL
    from hw.manager.manager import Manager
    from sim.manager.softmax import SoftmaxParams
    from sim.manager.transactions import Admit, DraftLogits

    if n_requests > SMALL.max_requests:
        raise ValueError(f"at most {SMALL.max_requests} requests")
    unit = SoftmaxParams(lanes=lanes, vocab=vector, exp_frac_bits=exp_frac_bits)
    dut = Manager.from_config(SMALL, unit, storage=storage)
    logits = tuple((7 * i) % 23 - 11 for i in range(vector))
    drafts = [DraftLogits(request=r, microbatch=0, position=1, logits=logits) for r in range(n_requests)]
    state = {"go": False, "edges": 0}

    async def transact(ctx, txn, count: bool) -> None:
        ctx.set(dut.cmd.valid, 1)
        ctx.set(dut.cmd.payload, encode(txn))
        while True:
            *_, ready = await ctx.tick().sample(dut.cmd.ready)
            state["edges"] += count
            if ready:
                break
        ctx.set(dut.cmd.valid, 0)
        ctx.set(dut.event.ready, 1)
        while True:
            *_, valid, payload = await ctx.tick().sample(dut.event.valid, dut.event.payload)
            state["edges"] += count
            if valid and from_view(payload)["kind"].name == "DONE":
                break

    async def bench(ctx):
        for port, value in config_ports(SMALL).items():
            ctx.set(getattr(dut, port), value)
        for r in range(n_requests):
            await transact(ctx, Admit(request=r, microbatch=0), count=False)
        state["go"] = True
        for txn in drafts:
            await transact(ctx, txn, count=True)

    async def feeder(ctx):
        while not state["go"]:
            await ctx.tick()
        for txn in drafts:
            for beat in logits_beats(txn.logits, lanes):
                ctx.set(dut.logits.valid, 1)
                ctx.set(dut.logits.payload, beat)
                await ctx.tick().until(dut.logits.ready)
        ctx.set(dut.logits.valid, 0)

    run(dut, bench, name="cycles_monitoring", background=[feeder])
    return state["edges"]


def measure_monitoring(lanes: int, exp_frac_bits: int, storage: str | None = None) -> dict[str, int]:
    points = [(n, vec * lanes + extra, monitoring_run(n, vec * lanes + extra, lanes, exp_frac_bits, storage))
              for n, vec, extra in MONITOR_POINTS]
    (n1, v1, t1), (n2, _, t2) = points[0], points[1]
    beats = -(-v1 // lanes)
    per_vector = (t2 - t1) // (n2 - n1)
    fit = {"softmax_vector_cycles": per_vector - beats, "decide_cycles": t1 - n1 * per_vector}
    for n, v, t in points:
        model = n * (-(-v // lanes) + fit["softmax_vector_cycles"]) + fit["decide_cycles"]
        if model != t:
            raise AssertionError(f"monitoring: {n} requests of {v} logits took {t} cycles, the fit says {model}")
    return fit


def issue_cycles(k: int, storage: str | None = None, *, pooled: int | None = None, config=None) -> int:
    """Clock edges of a VerifyIssue that selects ``k`` tokens (cmd transfer to DONE transfer)
    of ``pooled`` (default ``k``), one per request, on ``config`` (default ``SMALL``)."""
    from hw.flow.manager_replay import replay
    from hw.flow.manager_stimulus import SMALL
    from sim.manager.manager import Manager as Model
    from sim.manager.transactions import Admit, DraftToken, VerifyIssue

    config = config or SMALL
    pooled = k if pooled is None else pooled
    txns = [Admit(request=r, microbatch=0) for r in range(pooled)]
    txns += [DraftToken(request=r, microbatch=0, position=1, token=r, prob=65536) for r in range(pooled)]
    txns.append(VerifyIssue(tlm_idle=True, capacity=pooled))
    model = Model(config)
    pairs = [(txn, model.apply(txn)) for txn in txns]
    result = replay(config, pairs, name=f"cycles_issue_{k}_of_{pooled}", storage=storage)
    if result.mismatch:
        raise AssertionError(result.mismatch)
    kind, n, selected = result.cycles[-1]
    if kind != "VerifyIssue" or selected != k:
        raise AssertionError(f"the Issue selected {selected} tokens, expected {k}")
    return n


def measure_decision(storage: str | None = None) -> dict[str, int]:
    (k1, k2) = ISSUE_SIZES
    n1, n2 = issue_cycles(k1, storage), issue_cycles(k2, storage)
    per_token = (n2 - n1) // (k2 - k1)
    if per_token * (k2 - k1) != n2 - n1:
        raise AssertionError(f"Issue cycles {n1} (k={k1}) and {n2} (k={k2}) are not linear in k")
    return {"select_token_cycles": per_token, "select_fixed_cycles": n1 - per_token * k1}


def measure_plan(decision: dict[str, int], storage: str | None = None) -> dict[str, int]:
    """SADDLE+: the planner's cycles beside ``decision`` (``measure_decision``'s). Every pooled
    token is worth 256 (H = 1.0 throughout); with one cost for every prefix the best is all of
    them, with a cost per request (one token each) the first alone."""
    from hw.flow.manager_stimulus import SMALL
    from sim.manager.planner import PassCosts

    every = SMALL.replace(pass_costs=PassCosts(fc=(0, 1), per_request=0, wait_bound=0, issue=False))
    first = SMALL.replace(pass_costs=PassCosts(fc=(0, 0), per_request=1, wait_bound=0, issue=False))
    n11, n51 = issue_cycles(1, storage, config=every), issue_cycles(1, storage, pooled=5, config=first)
    n55 = issue_cycles(5, storage, config=every)
    walk = (n51 - n11) // 4
    if 4 * decision["select_token_cycles"] != n55 - n51 or 4 * walk != n51 - n11:
        raise AssertionError(f"planned Issue cycles {n11} (1 of 1), {n51} (1 of 5), {n55} (5 of 5) are not linear")
    return {"plan_walk_cycles": walk,
            "plan_fixed_cycles": n11 - decision["select_token_cycles"] - decision["select_fixed_cycles"] - walk}


def measure_pe() -> dict[str, int]:
    """The bank PE's latencies: MAC in cycle 1, the earliest DRAIN in cycle 2 (as
    tests/hw/pe/test_pe_config.py)."""
    from hw.flow.pe_replay import run_program
    from hw.flow.testbench.pe_vectors import Command
    from hw.pe.reference import Mode, Op, load_params

    lanes = load_params().lanes
    one = (0x3C00,) * lanes    # binary16 1.0
    program = [Command(Op.START, Mode.DOT), Command(Op.MAC, row=one, operand=one),
               Command(Op.DRAIN), Command(Op.DRAIN)]
    first = min(run_program(program, lanes))
    return {"pipeline_latency_cycles": first - 1, "drain_latency_cycles": first - 2}


def measure(storage: str | None = None) -> Cycles:
    """Every measured cycle count, on a Manager whose pools keep their records in ``storage``
    (None: the shipped storage, what configs/timing/manager.yaml holds)."""
    from hw.manager.sizes import softmax_params

    unit = softmax_params()
    decision = measure_decision(storage)
    manager = {"softmax_lanes": unit.lanes, **measure_monitoring(unit.lanes, unit.exp_frac_bits, storage),
               **decision}
    return Cycles(manager=manager, pe=measure_pe(), plus=measure_plan(decision, storage))


HEADER = """\
# GENERATED by `saddle hw cycles --write` (hw/flow/cycles.py) from a simulation of the RTL
# (hw/manager/, Amaranth's simulator): do not edit the cycle counts by hand, change the RTL and
# run the command again. tests/hw/flow/test_cycles.py fails when this file and the RTL disagree.
#
# Latency of the SADDLE Manager as the simulator charges it (sim/manager/timing.py):
# monitoring of n drafting requests over a vocabulary of V words takes
#   n x (ceil(V / softmax_lanes) + softmax_vector_cycles) + decide_cycles
# cycles (the softmax unit streams one request's logits after the other: softmax_lanes logits per
# cycle, then its pipeline and the divider's normalization; the last DraftLogits's multiply,
# compare and event beats), an Issue of k tokens select_token_cycles x k + select_fixed_cycles.
# clock_ghz is the one parameter: the cycle counts do not depend on it, and `saddle hw timing`
# checks the RTL against the same clock.
"""


def manager_yaml(cycles: Cycles, clock_ghz: float) -> str:
    from sim.manager.timing import MEASURED_KEYS

    lines = [f"clock_ghz: {clock_ghz}"] + [f"{k}: {cycles.manager[k]}" for k in MEASURED_KEYS]
    return HEADER + "\n".join(lines) + "\n"


def write(cycles: Cycles, timing_path: Path | None = None, pe_path: Path | None = None) -> list[Path]:
    """Write configs/timing/manager.yaml (keeping its clock) and the PE's two latencies in
    configs/hardware/bank_pe.yaml (in place: that file holds more than cycles); the files that
    changed."""
    timing_path = timing_path or config_path("timing", "manager")
    pe_path = pe_path or config_path("hardware", "bank_pe")
    changed = []
    text = manager_yaml(cycles, float(load_yaml(timing_path)["clock_ghz"]))
    if timing_path.read_text() != text:
        timing_path.write_text(text)
        changed.append(timing_path)
    pe_text = original = pe_path.read_text()
    for key, value in cycles.pe.items():
        pe_text, n = re.subn(rf"^({key}:\s*)\d+", rf"\g<1>{value}", pe_text, flags=re.M)
        if n != 1:
            raise ValueError(f"{pe_path}: expected one line '{key}: N'")
    if pe_text != original:
        pe_path.write_text(pe_text)
        changed.append(pe_path)
    return changed


def differences(cycles: Cycles) -> list[str]:
    """Where the config files disagree with the measured cycles (empty: they agree)."""
    from hw.pe.reference import load_params
    from sim.manager.timing import load_manager_timing

    out = []
    config = load_manager_timing().measured()
    for k, v in cycles.manager.items():
        if config[k] != v:
            out.append(f"configs/timing/manager.yaml {k}: {config[k]}, the RTL takes {v}")
    params = load_params()
    for k, v in cycles.pe.items():
        if getattr(params, k) != v:
            out.append(f"configs/hardware/bank_pe.yaml {k}: {getattr(params, k)}, the RTL takes {v}")
    return out
