"""What every simulated system shares: the run protocol, the event queue, the devices, the
live requests of the batch and the accounting that becomes the run's ``RunRecord``.

A system is a ``BaseRun`` subclass (registered in ``sim/systems/catalog.py``) built from a
``RunSetup``; it implements ``enter`` (requests joined the batch) and ``proceed`` (the batch
starts or goes on deciding what to run), and commits verified tokens through ``commit``.

A run admits the first ``batch`` requests at time 0 (their prompts' KV caches are assumed
present: prefill is not modelled, identically for every system) and ends when the workload is
exhausted. Request slot s belongs to micro-batch s mod (number of devices): the micro-batch is
the set of requests whose drafts one device makes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sim.cost.step import StepPrice, Work
from sim.engine.costs import CostAdapter
from sim.engine.devices import DeviceSet, IntervalLog
from sim.engine.events import EventQueue
from sim.manager.config import ManagerConfig
from sim.manager.timing import ManagerTiming
from sim.manager.transactions import DiscardReason
from sim.metrics import Measured, RunRecord, TokenCounts, latency_breakdown, run_record
from sim.systems.registry import StopRule
from sim.systems.spec import IssueRule, SystemSpec
from sim.workload import BatchFormer, Workload
from traces.format import RequestTrace


@dataclass
class RunSetup:
    spec: SystemSpec
    pair: str
    workload: Workload
    batch: int
    batching: str
    costs: CostAdapter
    stop: StopRule | None
    mapping: dict[str, str]            # operator -> gpu|pim (initial mapping for dynamic)
    timing: ManagerTiming | None
    manager_config: ManagerConfig
    draft_length: int | None = None
    capacity: int = 0                  # shared_pool: tokens one TLM pass verifies at most
    issue_rule: IssueRule = IssueRule.DRAINED   # eager: when a pass below capacity may start
    record: bool = False               # shared_pool: keep every Manager transaction (run.events)


@dataclass(slots=True)
class Live:
    """A request in the batch. ``t``: output tokens committed (the target's prefix length)."""
    slot: int
    mb: int
    trace: RequestTrace
    out_len: int
    admitted_ps: int
    prompt: int
    t: int = 0

    @property
    def remaining(self) -> int:
        return self.out_len - self.t

    def context(self, ahead: int) -> int:
        """KV entries a step attends to when it processes the token ``ahead`` positions past
        the committed prefix (0 = the last committed token)."""
        return self.prompt + self.t + ahead


class BaseRun:
    live_type: ClassVar[type[Live]] = Live     # the system's per-request state

    def __init__(self, setup: RunSetup) -> None:
        self.setup = setup
        self.spec = setup.spec
        self.costs = setup.costs
        self.n_devices = setup.costs.n_devices
        self.queue = EventQueue()
        self.log = IntervalLog()
        self.devices = DeviceSet(self.queue, self.n_devices, self.log)
        self.tokens = TokenCounts()
        self.energy_fj = 0
        self.flops = 0
        self.pim_flops = 0
        self.verify_ps = 0
        self.verify_comm_ps = 0
        self.passes = 0
        self.latencies: list[int] = []
        self.request_tokens: list[int] = []      # output length of each finished request
        self.batcher = BatchFormer(setup.workload, setup.batch, setup.batching)
        self.window: tuple[int, int, int] | None = None   # (time, generated, energy) at its end
        self._window_due = False
        self.live: dict[int, Live] = {}
        self.by_mb: list[dict[int, Live]] = [{} for _ in range(self.n_devices)]
        self._free_slots = list(range(setup.batch))
        self._monitor_ps: dict[int, int] = {}
        self.dlm_lanes = [f"DLM/mb{mb}" for mb in range(self.n_devices)]
        self.monitor_lanes = [f"monitor/mb{mb}" for mb in range(self.n_devices)]
        self.timing = setup.timing if self.spec.manager_hardware else None

    # -- the protocol a system implements --------------------------------------------------
    def enter(self, lives: list[Live]) -> None:
        """``lives`` joined the batch."""

    def proceed(self) -> None:
        """Start the work of the batch (at the start, and after each pass of a lock-step system)."""
        raise NotImplementedError

    def on_finish(self, live: Live) -> None:
        """``live``'s output is complete (called before its slot is freed)."""

    def finish_checks(self) -> None:
        """Per-system end-of-run invariants."""

    # -- requests ------------------------------------------------------------------------
    def admit(self, traces: list[RequestTrace]) -> list[Live]:
        out = []
        for trace in traces:
            slot = self._free_slots.pop(0)
            live = self.live_type(slot, slot % self.n_devices, trace, trace.output_len,
                                  self.queue.now, trace.prompt_len)
            self.live[slot] = live
            self.by_mb[live.mb][slot] = live
            out.append(live)
        self._free_slots.sort()
        return out

    def join(self, traces: list[RequestTrace]) -> None:
        self.enter(self.admit(traces))

    def commit(self, live: Live, accepted: int, tlm_tokens: int) -> bool:
        """Commit ``accepted`` verified draft tokens and ``tlm_tokens`` of the TLM's own (its
        correction or bonus token, one per pass; none past the output's end). True when the
        request finished: it has then left the batch."""
        tokens = self.tokens
        t = live.t + accepted
        tlm = min(tlm_tokens, live.out_len - t)
        tokens.accepted += accepted
        tokens.tlm_tokens += tlm
        tokens.generated += accepted + tlm
        live.t = t = t + tlm
        if t < live.out_len:
            return False
        self.on_finish(live)
        self.latencies.append(self.queue.now - live.admitted_ps)
        self.request_tokens.append(live.out_len)
        del self.live[live.slot]
        del self.by_mb[live.mb][live.slot]
        self._free_slots.append(live.slot)
        self._free_slots.sort()
        return True

    def reject(self, verified: int, accepted: int) -> None:
        """A verification of ``verified`` draft tokens accepted fewer: the first mismatch is
        rejected, the tokens after it were computed for nothing (as the Manager counts them)."""
        self.tokens.rejected += 1
        if verified - accepted > 1:
            self.tokens.discard(DiscardReason.REJECTED_PREFIX, verified - accepted - 1)

    def refill(self) -> list[RequestTrace]:
        """A request finished: the requests entering the batch now. The first time none is
        left to enter, the full-batch measurement window closes (see sim/metrics.py)."""
        entering = self.batcher.on_finish()
        if not entering and self.window is None and self.batcher.exhausted:
            self._window_due = True
        return entering

    def settle_window(self) -> None:
        """Close the window after every commit of the current pass is booked."""
        if self._window_due and self.window is None:
            self.window = (self.queue.now, self.tokens.generated, self.energy_fj)

    # -- pricing and booking ---------------------------------------------------------------
    def book(self, price: StepPrice) -> Work:
        self.energy_fj += price.energy_fj
        self.flops += price.flops
        self.pim_flops += price.pim_flops
        return price.work

    def price_dlm(self, contexts: tuple[int, ...], fc: str | None = None) -> Work:
        """A DLM prediction step of one micro-batch: one query per request, at ``contexts``."""
        m = self.setup.mapping
        return self.book(self.costs.price_draft(contexts, fc or m["dlm_fc"], m["dlm_attention"]))

    def price_tlm(self, requests: list[tuple[int, int]], attention: str | None = None) -> Work:
        m = self.setup.mapping
        return self.book_tlm(self.costs.price("tlm", tuple(requests), m["tlm_fc"],
                                              attention or m["tlm_attention"], self.n_devices))

    def book_tlm(self, price: StepPrice) -> Work:
        """Book a TLM pass priced by the caller."""
        self.verify_ps += price.work.time_ps
        self.verify_comm_ps += price.cost.comm_ps
        self.passes += 1
        return self.book(price)

    def monitoring(self, mb: int, n_requests: int, at: int | None = None) -> int:
        """Controller latency after a prediction step that ends ``at`` (default: now); 0
        without Manager hardware."""
        if self.timing is None or n_requests == 0:
            return 0
        ps = self._monitor_ps.get(n_requests)
        if ps is None:
            vocab = self.costs.dlm.vocab if self.costs.dlm else 0
            ps = self._monitor_ps[n_requests] = self.timing.monitoring_ps(n_requests, vocab)
        at = self.queue.now if at is None else at
        self.log.add(self.monitor_lanes[mb], at, at + ps)
        return ps

    def decision(self, n_selected: int) -> int:
        if self.timing is None:
            return 0
        ps = self.timing.decision_ps(n_selected)
        self.log.add("decide", self.queue.now, self.queue.now + ps)
        return ps

    # -- running -------------------------------------------------------------------------
    def execute(self) -> RunRecord:
        self.join(self.batcher.initial())
        self.proceed()
        end = self.queue.run()
        if self.live or not self.batcher.done:
            raise RuntimeError(f"{self.spec.name}: simulation stalled at {end} ps with "
                               f"{len(self.live)} requests unfinished")
        self.finish_checks()
        self.tokens.check(self.setup.workload.total_output)
        window = self.window or (end, self.tokens.generated, self.energy_fj)
        static = self.costs.static_energy_fj
        measured = self.measured = Measured(
            time_ps=end, energy_fj=self.energy_fj + static(end), tokens=self.tokens,
            breakdown_ps=latency_breakdown(self.log, end), gpu_busy_ps=self.devices.gpu_busy_ps,
            pim_busy_ps=self.devices.pim_busy_ps, n_devices=self.n_devices,
            pim_ops=self.pim_flops, total_ops=self.flops, request_latency_ps=self.latencies,
            request_tokens=self.request_tokens, window_ps=window[0], window_tokens=window[1],
            window_energy_fj=window[2] + static(window[0]), verify_ps=self.verify_ps,
            verify_comm_ps=self.verify_comm_ps, passes=self.passes)
        return run_record(self.spec.name, self.setup.pair, self.setup.batch,
                          self.setup.draft_length, self.setup.mapping, measured)
