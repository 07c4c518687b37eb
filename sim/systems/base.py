"""State shared by every simulated system: the event queue, the devices, the live requests of
the batch and the accounting that ``sim.metrics`` turns into results.

A run admits the first ``batch`` requests at time 0 (their prompts' KV caches are assumed
present: prefill is not modelled, identically for every system) and ends when the workload is
exhausted. Request slot s belongs to micro-batch s mod (number of devices): the micro-batch is
the set of requests whose drafts one device makes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from sim.engine.costs import CostAdapter, Priced
from sim.engine.devices import DeviceSet, IntervalLog
from sim.engine.events import EventQueue
from sim.manager.transactions import DiscardReason
from sim.metrics import PS_PER_S, RunMetrics, TokenCounts, latency_breakdown
from sim.systems.registry import StopRule
from sim.systems.spec import ManagerTiming, SystemSpec
from sim.workload import BatchFormer, Workload
from traces.format import RequestTrace


# Discard reasons as TokenCounts books them, read for every verified request.
REJECTED_PREFIX = DiscardReason.REJECTED_PREFIX.value
SHARED_AFTER_REJECT = DiscardReason.SHARED_AFTER_REJECT.value
EAGER_AFTER_REJECT = DiscardReason.EAGER_AFTER_REJECT.value


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
    manager_config: object | None = None   # sim.manager.config.ManagerConfig for pool systems
    draft_length: int | None = None


@dataclass
class Live:
    """A request in the batch. ``t``: output tokens committed (the target's prefix length; a
    lock-step run without the Controller plans every round when the request enters and sets
    it only when the request finishes)."""
    slot: int
    mb: int
    trace: RequestTrace
    out_len: int
    admitted_ps: int
    prompt: int
    t: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def remaining(self) -> int:
        return self.out_len - self.t

    def context(self, ahead: int) -> int:
        """KV entries a step attends to when it processes the token ``ahead`` positions past
        the committed prefix (0 = the last committed token)."""
        return self.prompt + self.t + ahead


class BaseRun:
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
        self.window: tuple[int, int, float] | None = None   # (time, generated, energy) at its end
        self._window_due = False
        self.live: dict[int, Live] = {}
        self.by_mb: list[dict[int, Live]] = [{} for _ in range(self.n_devices)]
        self._free_slots = list(range(setup.batch))
        self._monitor_ps: dict[int, int] = {}
        # Named at every prediction step: each micro-batch's DLM and monitoring lanes, built once.
        self.dlm_lanes = [f"DLM/mb{mb}" for mb in range(self.n_devices)]
        self.monitor_lanes = [f"monitor/mb{mb}" for mb in range(self.n_devices)]
        self.monitored = bool(self.spec.manager_hardware and setup.timing is not None)

    # -- requests ------------------------------------------------------------------------
    def admit(self, traces: list[RequestTrace]) -> list[Live]:
        out = []
        for trace in traces:
            slot = self._free_slots.pop(0)
            live = Live(slot, slot % self.n_devices, trace, trace.output_len, self.queue.now,
                        trace.prompt_len)
            self.live[slot] = live
            self.by_mb[live.mb][slot] = live
            out.append(live)
        self._free_slots.sort()
        return out

    def commit(self, live: Live, drafted: int, accepted: int) -> bool:
        """Book a verification of ``drafted`` draft tokens of which the first ``accepted``
        matched (the tokens after the first mismatch are booked as discarded by the caller); the TLM adds its own token (correction or bonus) if the output is not complete.
        Returns True when the request finished (it is then removed from the batch)."""
        tokens = self.tokens      # once per request per pass: locals, not attribute chains
        tokens.accepted += accepted
        tokens.rejected += accepted < drafted
        t = live.t + accepted
        if t < live.out_len:
            t += 1
            tokens.tlm_tokens += 1
            tokens.generated += accepted + 1
        else:
            tokens.generated += accepted
        live.t = t
        if t >= live.out_len:
            self.release(live)
            return True
        return False

    def add_tokens(self, counts: TokenCounts) -> None:
        """Book a request's token counts at once (every field but ``generated``, which the
        caller books as each pass commits: the measurement window reads it)."""
        tokens = self.tokens
        tokens.drafted += counts.drafted
        tokens.accepted += counts.accepted
        tokens.rejected += counts.rejected
        tokens.tlm_tokens += counts.tlm_tokens
        for reason, n in counts.discard_reasons.items():
            tokens.discard(reason, n)

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

    def release(self, live: Live) -> None:
        """The request finished: record its latency and free its slot."""
        self.latencies.append(self.queue.now - live.admitted_ps)
        self.request_tokens.append(live.out_len)
        del self.live[live.slot]
        del self.by_mb[live.mb][live.slot]
        self._free_slots.append(live.slot)
        self._free_slots.sort()

    def members(self, mb: int) -> list[Live]:
        """Requests of micro-batch ``mb`` in slot order."""
        group = self.by_mb[mb]
        return [group[s] for s in sorted(group)]

    def book(self, priced: Priced) -> None:
        self.energy_fj += priced.energy_fj
        self.flops += priced.flops
        self.pim_flops += priced.pim_flops

    def price_dlm(self, contexts: tuple[int, ...], fc: str | None = None) -> Priced:
        """A DLM prediction step of one micro-batch: one query per request, at ``contexts``."""
        m = self.setup.mapping
        priced = self.costs.price_draft(contexts, fc or m["dlm_fc"], m["dlm_attention"])
        self.book(priced)
        return priced

    def price_tlm(self, requests: list[tuple[int, int]], attention: str | None = None) -> Priced:
        m = self.setup.mapping
        priced = self.costs.price("tlm", tuple(requests), m["tlm_fc"],
                                  attention or m["tlm_attention"], self.n_devices)
        self.book_tlm(priced)
        return priced

    def book_tlm(self, priced: Priced) -> Priced:
        """Book a TLM pass priced by the caller."""
        self.book(priced)
        self.verify_ps += priced.work.time_ps
        self.verify_comm_ps += priced.comm_ps
        self.passes += 1
        return priced

    def monitoring(self, mb: int, n_requests: int, at: int | None = None) -> int:
        """Controller latency after a prediction step that ends ``at`` (default: now); 0
        without Manager hardware."""
        if not self.monitored or n_requests == 0:
            return 0
        ps = self._monitor_ps.get(n_requests)
        if ps is None:   # a pure function of the count, asked after every prediction step
            ps = self._monitor_ps[n_requests] = self.setup.timing.monitoring_ps(
                n_requests, self.costs.dlm.vocab)
        at = self.queue.now if at is None else at
        self.log.add(self.monitor_lanes[mb], at, at + ps)
        return ps

    def decision(self, n_selected: int) -> int:
        if not self.spec.manager_hardware or self.setup.timing is None:
            return 0
        ps = self.setup.timing.decision_ps(n_selected)
        self.log.add("decide", self.queue.now, self.queue.now + ps)
        return ps

    # -- running -------------------------------------------------------------------------
    def start(self) -> None:
        raise NotImplementedError

    def execute(self) -> RunMetrics:
        self.start()
        end = self.queue.run()
        if self.live or not self.batcher.done:
            raise RuntimeError(f"{self.spec.name}: simulation stalled at {end} ps with "
                               f"{len(self.live)} requests unfinished")
        self.finish_checks()
        self.tokens.check(self.setup.workload.total_output)
        window = self.window or (end, self.tokens.generated, self.energy_fj)
        return RunMetrics(
            system=self.spec.name, pair=self.setup.pair, batch=self.setup.batch,
            draft_length=self.setup.draft_length, time_ps=end,
            energy_fj=self.energy_fj + self.costs.static_energy_fj(end), tokens=self.tokens,
            breakdown_ps=latency_breakdown(self.log, end),
            gpu_busy_ps=self.devices.gpu_busy_ps, pim_busy_ps=self.devices.pim_busy_ps,
            n_devices=self.n_devices, pim_ops=self.pim_flops, total_ops=self.flops,
            request_latency_ps=self.latencies, request_tokens=self.request_tokens,
            window_ps=window[0], window_tokens=window[1],
            window_energy_fj=window[2] + self.costs.static_energy_fj(window[0]),
            extra={"verification_comm_share": self.verify_comm_ps / self.verify_ps
                   if self.verify_ps else 0.0,
                   "verification_s": self.verify_ps / PS_PER_S,
                   "verification_comm_s": self.verify_comm_ps / PS_PER_S,
                   "verification_compute_s": (self.verify_ps - self.verify_comm_ps) / PS_PER_S,
                   "verification_passes": self.passes,
                   "mapping": dict(self.setup.mapping)})

    def finish_checks(self) -> None:
        """Per-system end-of-run invariants (the Manager's own conservation check)."""
