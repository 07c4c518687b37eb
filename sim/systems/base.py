"""What every simulated system shares: the run protocol, the event queue, the devices, the
live requests of the batch and the accounting that becomes the run's ``RunRecord``.

A system is a ``BaseRun`` subclass (``sim/systems/catalog.py``) built from a ``RunSetup``; it
implements ``enter`` (requests joined the batch) and ``proceed`` (the batch starts or goes on),
and commits verified tokens through ``commit``. A run admits the first ``batch`` requests at
time 0 (prefill is not modelled, for any system) and ends when the workload is exhausted.
Request slot s belongs to micro-batch s mod (number of devices), whose drafts one device makes.
"""
from __future__ import annotations

from dataclasses import dataclass
from heapq import heappop, heappush
from typing import ClassVar

from mypy_extensions import mypyc_attr

from sim.cost.step import StepPrice, Work
from sim.engine.devices import DeviceSet, IntervalLog
from sim.engine.events import EventQueue
from sim.manager.transactions import DiscardReason
from sim.metrics import Measured, RunRecord, TokenCounts, latency_breakdown, run_record
from sim.systems.resolve import RunSetup
from sim.workload import BatchFormer
from traces.format import RequestTrace


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


@mypyc_attr(allow_interpreted_subclasses=True)    # new systems subclass the run classes
class BaseRun:
    live_type: ClassVar[type[Live]] = Live     # the system's per-request state

    def __init__(self, setup: RunSetup) -> None:
        self.setup = setup
        self.mapping: dict[str, str] = setup.mapping     # read per step: not through setup
        self.spec = setup.spec
        self.costs = setup.costs
        self.n_devices = setup.costs.n_devices
        self.queue = EventQueue()
        self.log = IntervalLog()
        self.devices = DeviceSet(self.queue, self.n_devices, self.log)
        self.tokens = TokenCounts()
        self.energy_fj = self.flops = self.pim_flops = 0      # booked by ``book``
        self.verify_ps = self.verify_comm_ps = self.verify_allreduce_ps = self.passes = 0   # ``book_tlm``
        self.latencies: list[int] = []
        self.request_tokens: list[int] = []      # output length of each finished request
        self.batcher = BatchFormer(setup.workload, setup.params.batch, setup.params.batching)
        self.window: tuple[int, int, int] | None = None   # (time, generated, energy) at its end
        self._window_due = False
        self.live: dict[int, Live] = {}
        self._free_slots = list(range(setup.params.batch))     # a heap
        self._monitor_ps: dict[int, int] = {}
        self.dlm_lanes = [f"DLM/mb{mb}" for mb in range(self.n_devices)]
        self.monitor_lanes = [f"monitor/mb{mb}" for mb in range(self.n_devices)]
        self.timing = setup.timing      # None: no Manager hardware latency

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
    def join(self, traces: list[RequestTrace]) -> None:
        """``traces`` enter the batch, each in the lowest free slot."""
        lives = []
        for trace in traces:
            slot = heappop(self._free_slots)
            lives.append(self.live_type(slot, slot % self.n_devices, trace, trace.output_len,
                                        self.queue.now, trace.prompt_len))
            self.live[slot] = lives[-1]
        self.enter(lives)

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
        heappush(self._free_slots, live.slot)
        return True

    def reject(self, rejections: int, wasted: int) -> None:
        """``rejections`` verifications accepted fewer draft tokens than they verified: each
        first mismatch is rejected, and the ``wasted`` verified tokens after them were computed
        for nothing (as the Manager counts them)."""
        self.tokens.rejected += rejections
        if wasted:
            self.tokens.discard(DiscardReason.REJECTED_PREFIX, wasted)

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
        m = self.mapping
        return self.book(self.costs.price_draft(contexts, fc or m["dlm_fc"], m["dlm_attention"]))

    def price_tlm(self, requests: list[tuple[int, int]], attention: str | None = None) -> Work:
        m = self.mapping
        return self.book_tlm(self.costs.price("tlm", tuple(requests), m["tlm_fc"],
                                              attention or m["tlm_attention"], self.n_devices))

    def book_tlm(self, price: StepPrice) -> Work:
        """Book a TLM pass priced by the caller."""
        self.verify_ps += price.work.time_ps
        self.verify_comm_ps += price.cost.comm_ps
        self.verify_allreduce_ps += price.cost.allreduce_ps
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
        static, window_static = (self.costs.static_energy_fj(t) for t in (end, window[0]))
        measured = self.measured = Measured(
            time_ps=end, energy_fj=self.energy_fj + static, static_fj=static, tokens=self.tokens,
            breakdown_ps=latency_breakdown(self.log, end), gpu_busy_ps=self.devices.gpu_busy_ps,
            pim_busy_ps=self.devices.pim_busy_ps, n_devices=self.n_devices,
            pim_ops=self.pim_flops, total_ops=self.flops, request_latency_ps=self.latencies,
            request_tokens=self.request_tokens, window_ps=window[0], window_tokens=window[1],
            window_energy_fj=window[2] + window_static, window_static_fj=window_static,
            verify_ps=self.verify_ps,
            verify_comm_ps=self.verify_comm_ps, verify_allreduce_ps=self.verify_allreduce_ps,
            passes=self.passes)
        return run_record(self.spec.name, self.setup.params.pair, self.setup.params.batch,
                          self.setup.draft_length, self.setup.mapping, measured)
