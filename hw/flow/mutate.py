"""Mutation testing of the Manager and bank PE RTL (`saddle hw mutate`): would the checks fail
if the RTL were wrong?

A mutant is the shipped design elaborated with one fault (hw/common/fault.py): every fault the
blocks implement in their ``FAULTS`` is one mutant (``mutants``). Each mutant runs the checks
of its block in order, cheapest first, until one fails (the mutant is killed, and the report
says by which check and how far into it) or all pass (it survives):

- ``manager`` (Amaranth simulator; the stimulus of tests/hw/manager/test_manager.py and of
  ``saddle hw coverify``): the hand-worked round, the directed corner sequence
  (hw/flow/manager_stimulus.py), the two random sequences (700 transactions each, DraftLogits
  through the softmax, random and 40-cycle event stalls), then co-verification on the real
  trace: the transactions of ``saddle hw coverify``'s default run (``saddle``, batch 16, 24
  requests of the SmolLM2 trace, configs/manager_coverify.yaml) with 20 % event stalls; then the
  options the shipped configuration leaves off (calibrated rule, aging, pipelined selector, SRAM
  storage), each on its own Manager; last SADDLE+ (``plus``): its two sequences worked out by
  hand, two random configurations and sequences (``plus_pairs``), a saddle-plus run of the real
  trace (``PLUS_RUN``).
  Distance: the failing transaction (1-based) and the clock edges before it.
- ``pe`` (Amaranth simulator; the programs of tests/hw/pe/test_pe.py): the corner cases on 4
  and 16 lanes, three random back-to-back programs, the two 300-MAC accumulations. Distance:
  the first cycle at which ``out`` differs from the model.

With ``every_check`` (``--every-check``) each mutant runs every check, so the report also shows
which checks on their own would kill it (``kills``), e.g. the real trace alone.

The clean design runs the same checks first: a check failing on it would kill every mutant.
Mutants argued equivalent (``EQUIVALENT``: behaviour identical on every legal input) run
too and must survive. Verilator is not used: one build per mutant would cost minutes each,
and the exported Verilog equals the Amaranth design (the Verilator tests show it on the
shipped design).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from hw.common.fault import known_faults

BLOCKS = ("manager", "pe")

EQUIVALENT = {
    "argmax_prefers_b":
        "Keys are {waiting, H, ~request, ~position}. Two waiting entries have equal keys only if "
        "they hold the same position of the same request, which the Manager never pools twice; a "
        "waiting and a non-waiting key differ in the top bit. So whenever an entry waits, the "
        "largest key is unique and every node passes the same winner up whichever input it "
        "prefers on a tie: best_* and the selected index are the same. Ties decide only among "
        "non-waiting entries, and then best_valid is low: SELECT changes nothing and the "
        "sequencer ends the selection without using best_*.",
    "start_mode_from_register":
        "The stage-1 mode reaches only two places, both taken for MAC commands alone: whether "
        "lanes 1.. enter lane 0's carry-save tree (and its special flags) and whether lanes 1.. "
        "accumulate. For a MAC the shipped "
        "Mux(op == START, cmd.mode, mode) already selects the register, and the register holds "
        "the mode of the latest START (it is written at the START's clock edge, before any later "
        "MAC is in stage 1). A START's own stage-1 mode is read by nothing: START clears every "
        "lane whatever the mode, DRAIN only shows the accumulators.",
}


def mutants(block: str) -> dict[str, str]:
    """The faults of ``block`` (``manager`` or ``pe``), name -> description."""
    if block == "manager":
        from hw.manager.manager import Manager
        return known_faults(Manager, *Manager.BLOCKS)
    if block == "pe":
        from hw.pe.bank_pe import BankPE
        return known_faults(BankPE, *BankPE.UNITS)
    raise ValueError(f"unknown block {block!r}; known: {', '.join(BLOCKS)}")


@dataclass(frozen=True)
class Check:
    """One stimulus with its reference. ``run(fault)`` -> (where it first fails, or None; clock
    edges before that point, or of the whole run); ``unit`` names what the position counts."""
    name: str
    unit: str
    run: Callable[[str | None], tuple[int | None, int]]


def replay_check(name: str, config, pairs, **kw) -> Check:
    """A Manager check: ``pairs`` (input, the model's events) replayed on the Manager sized by
    ``config``; ``kw`` as `hw.flow.manager_replay.replay` (softmax, stalls)."""
    from hw.flow import manager_replay

    def run(fault):
        result = manager_replay.replay(config, pairs, fault=fault, name="mutant", **kw)
        return (None if result.mismatch is None else result.transactions + 1), result.total_cycles
    return Check(name, "transaction", run)


def program_check(name: str, program, lanes: int) -> Check:
    """A PE check: a `hw/flow/testbench/pe_vectors.py` program on a PE of ``lanes`` lanes."""
    from hw.flow.pe_replay import first_mismatch
    from hw.flow.testbench.pe_vectors import program_cycles

    return Check(name, "cycle", lambda fault: (first_mismatch(program, lanes, fault), program_cycles(program)))


def manager_checks() -> list[Check]:
    from common.paths import CONFIGS, TRACE_DATA
    from hw.flow.coverify import record_run
    from hw.flow.manager_stimulus import (
        PLAN_BY_HAND,
        PLAN_SMALL,
        PLUS_SEEDS,
        RANDOM_SEEDS,
        ROUND_BY_HAND,
        SMALL,
        SOFTMAX,
        TAU_BY_HAND,
        TAU_SMALL,
        aging_pairs,
        calibrated_pairs,
        corner_pairs,
        plus_pairs,
        plus_run,
        random_pairs,
    )
    from sim.systems.run import RunParams

    real = RunParams(system="saddle", pair="opt-66b+opt-1.3b", batch=16, requests=24, split="all",
                     trace=str(TRACE_DATA / "smollm2-135m.self24.real.jsonl.gz"),
                     manager=str(CONFIGS / "manager_coverify.yaml"), source="saddle hw mutate")
    real_config, real_pairs, _ = record_run(real)
    return [
        replay_check("round by hand", SMALL, ROUND_BY_HAND, softmax=SOFTMAX, stall=0.5, seed=4),
        replay_check("directed corners", SMALL, corner_pairs(), softmax=SOFTMAX, stall=0.3, seed=5),
        *(replay_check(f"random seed {seed}", SMALL, random_pairs(seed)[0], softmax=SOFTMAX, stall=0.3,
                       seed=seed, long_stalls=True) for seed in RANDOM_SEEDS),
        replay_check(f"coverify real trace ({len(real_pairs)} transactions)", real_config, real_pairs,
                     stall=0.2, seed=0),
        # The options the shipped configuration leaves off, each on its own Manager.
        replay_check("calibrated rule, random", *calibrated_pairs(), softmax=SOFTMAX, stall=0.3, seed=1),
        *(replay_check(f"aging K = {k}, random", *aging_pairs(k), softmax=SOFTMAX, stall=0.3, seed=k)
          for k in (1, 3)),
        replay_check("pipelined selector (k = 2), random", SMALL, random_pairs(RANDOM_SEEDS[0])[0], softmax=SOFTMAX,
                     stall=0.3, seed=7, selector_stage_levels=2),
        replay_check("SRAM storage, random", SMALL, random_pairs(RANDOM_SEEDS[1])[0], softmax=SOFTMAX,
                     stall=0.3, seed=8, long_stalls=True, storage="sram"),
        # SADDLE+ (the plus option).
        replay_check("SADDLE+ planner by hand", PLAN_SMALL, PLAN_BY_HAND, stall=0.3, seed=2),
        replay_check("SADDLE+ tau table and locked threshold by hand", TAU_SMALL, TAU_BY_HAND, stall=0.3, seed=2),
        *(replay_check(f"SADDLE+ random seed {seed}", *plus_pairs(seed), softmax=SOFTMAX, stall=0.3, seed=seed,
                       long_stalls=True) for seed in PLUS_SEEDS),
        replay_check("SADDLE+ coverify real trace (saddle-plus, 4 requests)", *plus_run(), stall=0.2, seed=3),
    ]


def pe_checks() -> list[Check]:
    from hw.flow.testbench.pe_vectors import corner_program, long_program, random_program
    from hw.pe.reference import Mode

    return [
        program_check("corner cases, 4 lanes", corner_program(4), 4),
        program_check("corner cases, 16 lanes", corner_program(16), 16),
        *(program_check(f"random seed {seed}", random_program(seed, 4, 25), 4) for seed in (1, 2, 3)),
        *(program_check(f"300 MACs {mode.name}", long_program(30 + int(mode), 4, 300, mode), 4)
          for mode in (Mode.DOT, Mode.AXPY)),
    ]


CHECKS = {"manager": manager_checks, "pe": pe_checks}


@dataclass
class MutantResult:
    fault: str
    description: str
    killed_by: str | None = None
    at: int | None = None          # the failing transaction or cycle of ``killed_by``
    unit: str = ""
    cycles: int = 0                # clock edges of ``killed_by`` before the failure
    seconds: float = 0.0
    kills: dict[str, int | None] = field(default_factory=dict)   # check run -> where it failed

    @property
    def equivalent(self) -> str | None:
        return EQUIVALENT.get(self.fault)

    @property
    def ok(self) -> bool:
        """Killed, or an equivalent mutant that survived as argued."""
        return (self.killed_by is None) == (self.equivalent is not None)

    @property
    def status(self) -> str:
        if self.killed_by is not None:
            return "killed" if self.equivalent is None else "KILLED, argued equivalent"
        return "equivalent" if self.equivalent is not None else "SURVIVED"

    def as_dict(self) -> dict:
        return {"fault": self.fault, "description": self.description, "status": self.status,
                "killed_by": self.killed_by, "at": self.at, "unit": self.unit or None,
                "cycles": self.cycles, "seconds": round(self.seconds, 1), "equivalent": self.equivalent,
                "kills": self.kills}


@dataclass
class BlockReport:
    block: str
    checks: list[str]
    clean_failures: list[str]      # checks the clean design fails (must be none)
    results: list[MutantResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def killed(self) -> int:
        return sum(r.killed_by is not None and r.equivalent is None for r in self.results)

    @property
    def killable(self) -> int:
        return sum(r.equivalent is None for r in self.results)

    @property
    def ok(self) -> bool:
        return not self.clean_failures and all(r.ok for r in self.results)

    def as_dict(self) -> dict:
        return {"block": self.block, "checks": self.checks, "clean_failures": self.clean_failures,
                "killed": self.killed, "killable": self.killable,
                "equivalent": len(self.results) - self.killable, "ok": self.ok,
                "seconds": round(self.seconds, 1), "mutants": [r.as_dict() for r in self.results]}


def mutate(block: str, faults: list[str] | None = None, checks: list[Check] | None = None,
           progress: Callable[[MutantResult], None] | None = None, every_check: bool = False) -> BlockReport:
    """Run the mutants ``faults`` of ``block`` (default: all) against ``checks`` (default: the
    block's checks), after the clean design, each until the first failing check (with
    ``every_check``: through all of them); ``progress`` sees each result as it comes."""
    started = time.monotonic()
    catalog = mutants(block)
    unknown = [f for f in faults or () if f not in catalog]
    if unknown:
        raise ValueError(f"{block}: unknown mutant {', '.join(unknown)}; known: {', '.join(catalog)}")
    checks = CHECKS[block]() if checks is None else checks
    report = BlockReport(block, [c.name for c in checks],
                         clean_failures=[c.name for c in checks if c.run(None)[0] is not None])
    for fault in faults or catalog:
        result = MutantResult(fault, catalog[fault])
        t0 = time.monotonic()
        for check in checks:
            at, cycles = check.run(fault)
            result.kills[check.name] = at
            if at is not None and result.killed_by is None:
                result.killed_by, result.at, result.unit, result.cycles = check.name, at, check.unit, cycles
            if result.killed_by is not None and not every_check:
                break
        result.seconds = time.monotonic() - t0
        report.results.append(result)
        if progress is not None:
            progress(result)
    report.seconds = time.monotonic() - started
    return report


def describe(result: MutantResult) -> str:
    """How the mutant was killed, or why it survived; with every check run, a second line says
    what each later check made of it."""
    if result.killed_by is None:
        why = "argued equivalent (hw/flow/mutate.py EQUIVALENT)" if result.equivalent else result.description
        return f"{result.fault:<30} {result.status}: {why}"
    where = f"{result.unit} {result.at}" + (f", after {result.cycles} cycles" if result.unit != "cycle" else "")
    line = f"{result.fault:<30} {result.status} by {result.killed_by} at {where} ({result.seconds:.1f} s)"
    names = list(result.kills)
    later = [f"{name} passes" if result.kills[name] is None else f"{name} at {result.unit} {result.kills[name]}"
             for name in names[names.index(result.killed_by) + 1:]]
    return line + ("\n" + " " * 33 + "then: " + "; ".join(later) if later else "")
