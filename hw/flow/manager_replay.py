"""Replay a Manager transaction sequence on the RTL (Amaranth's simulator) and compare every
transaction's events with the model's, bit for bit.

The sequence is a list of ``(transaction, expected events)`` pairs: from
``hw.flow.manager_random.generate_with_events``, from a simulator run
(``sim.systems.run.simulate(..., record=True)``) or from a transaction log
(``sim.manager.txlog.read_txlog``). The design is ``hw.manager.manager.Manager`` built with the
sequence's ``ManagerConfig`` and softmax sizes. Each transaction is driven on ``cmd`` as soon as
the Manager is ready; ``event.ready`` is held low in a cycle with probability ``stall`` (with
``long_stalls`` 5 % of those stalls last 40 cycles), so back-pressure is exercised too. The
replay stops at the first mismatching transaction: past it the two states differ. A transaction
without its DONE beat within ``TXN_CYCLE_LIMIT`` clock edges is a mismatch too (a faulty design,
``fault``, may hang: hw/flow/mutate.py).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from hw.flow.amaranth_sim import run, send
from hw.flow.manager_codec import (
    acceptance_writes,
    config_ports,
    decode,
    encode,
    from_view,
    logits_beats,
)
from hw.manager.manager import Manager
from sim.manager.softmax import SoftmaxParams
from sim.manager.transactions import DraftLogits

# Sizes of the softmax unit when a sequence has no DraftLogits (the unit is then never used).
IDLE_SOFTMAX = SoftmaxParams(lanes=2, vocab=16, exp_frac_bits=12)
# Far above any transaction of the shipped Manager (an Unlock that moves 512 tokens under 20 %
# random and 40-cycle stalls takes about a thousand edges).
TXN_CYCLE_LIMIT = 20_000


@dataclass
class ReplayResult:
    transactions: int = 0                     # transactions compared (all, unless a mismatch)
    cycles: list[tuple[str, int, int]] = field(default_factory=list)
    """Per transaction: input type, clock edges from its cmd transfer to its DONE transfer (both
    included), tokens it selected (VerifyIssue)."""
    mismatch: str | None = None               # the first mismatching transaction, RTL vs model
    illegal: int = 0                          # illegal transactions the RTL counted, as expected

    @property
    def total_cycles(self) -> int:
        return sum(n for _, n, _ in self.cycles)


def replay(config, pairs, *, softmax: SoftmaxParams | None = None, stall: float = 0.0, seed: int = 0,
           long_stalls: bool = False, name: str = "manager_replay", fault: str | None = None,
           selector_stage_levels: int | None = None, storage: str | None = None,
           plus: bool | None = None) -> ReplayResult:
    """Drive ``pairs`` through a ``Manager`` sized by ``config`` (``ManagerConfig``) and carrying
    ``fault`` (None: the shipped design), its Shared Pool selector pipelined every
    ``selector_stage_levels`` levels and its pools' ``storage`` (None: configs/hardware/manager_rtl.yaml),
    built with SADDLE+ (``plus``; None: if ``config`` uses it), and compare. ``name`` names the waveform (``SADDLE_WAVES=1``: ``build/waves/<name>.vcd``)."""
    uses_logits = any(isinstance(txn, DraftLogits) for txn, _ in pairs)
    if uses_logits and softmax is None:
        raise ValueError("the sequence has DraftLogits: give the softmax unit's SoftmaxParams")
    unit = softmax or IDLE_SOFTMAX
    dut = Manager.from_config(config, unit, fault, selector_stage_levels=selector_stage_levels, storage=storage,
                              plus=plus)
    rng = random.Random(seed)
    result = ReplayResult()

    async def bench(ctx):
        for port, value in config_ports(config, dut.plus).items():
            ctx.set(getattr(dut, port), value)
        for entry, value in acceptance_writes(config):
            ctx.set(dut.acceptance_write.en, 1)
            ctx.set(dut.acceptance_write.addr, entry)
            ctx.set(dut.acceptance_write.data, value)
            await ctx.tick()
        ctx.set(dut.acceptance_write.en, 0)
        for i, (txn, expected) in enumerate(pairs):
            ctx.set(dut.cmd.valid, 1)
            ctx.set(dut.cmd.payload, encode(txn))
            await ctx.tick().until(dut.cmd.ready)
            ctx.set(dut.cmd.valid, 0)
            beats, n = [], 1
            while not beats or beats[-1]["kind"].name != "DONE":
                if n > TXN_CYCLE_LIMIT:
                    result.mismatch = f"transaction #{i} {txn}: no DONE within {TXN_CYCLE_LIMIT} cycles"
                    return
                hold = rng.random() < stall
                if hold and long_stalls and rng.random() < 0.05:
                    for _ in range(40):
                        ctx.set(dut.event.ready, 0)
                        await ctx.tick()
                        n += 1
                ctx.set(dut.event.ready, 0 if hold else 1)
                valid = ctx.get(dut.event.valid)
                payload = from_view(ctx.get(dut.event.payload)) if valid else None
                await ctx.tick()
                n += 1
                if valid and not hold:
                    beats.append(payload)
            got = decode(beats)
            # An illegal transaction (the model's ProtocolError): no event, one more error.
            illegal = isinstance(expected, Exception)
            errors = ctx.get(dut.errors)
            if illegal:
                expected = []
            if illegal and ctx.get(dut.error_kind) != encode(txn)["kind"]:
                result.mismatch = f"transaction #{i} {txn}: illegal, but error_kind is {ctx.get(dut.error_kind)}"
                return
            if got != list(expected) or errors != min(255, result.illegal + illegal):
                result.mismatch = (f"transaction #{i} {txn}:\n RTL   {got}, {errors} errors\n model "
                                   f"{list(expected)}, {result.illegal + illegal} errors")
                return
            result.illegal += illegal
            result.transactions += 1
            result.cycles.append((type(txn).__name__, n, sum(len(getattr(e, "tokens", ())) for e in expected)))

    async def feeder(ctx):
        # The logits of every DraftLogits, in order (a refused one is sent again by its retry).
        for txn, _ in pairs:
            if isinstance(txn, DraftLogits):
                for beat in logits_beats(txn.logits, unit.lanes):
                    await send(ctx, dut.logits, beat)

    # The feeder runs in the background: after a mismatch the Manager may never take the rest.
    run(dut, bench, name=name, background=[feeder] if uses_logits else [])
    return result
