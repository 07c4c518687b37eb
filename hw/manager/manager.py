"""The SADDLE Manager top: Controller, Shared Pool, Eager Pools and Scheduler behind the
transaction interface of the model (``sim.manager.manager.Manager``), bit for bit.

Interface (``lib.wiring`` Component):

- configuration (held stable): ``tau``, ``max_draft_len``, ``calibrated`` (the calibrated stop
  rule, hw/manager/controller.py), ``dynamic``, ``dlm_fc_threshold``,
  ``tlm_attention_threshold``, ``static_dlm_fc_gpu``, ``static_tlm_attention_gpu``.
- ``acceptance_write`` (in, ``acceptance_write_signature``): the register-write port of the
  calibrated rule's 16-entry acceptance table: with ``en`` high, entry ``addr`` takes ``data``
  (UQ1.16) at the clock edge; the next decision reads it. Written at configuration; reset
  clears the table.
- ``errors`` (out): illegal transactions seen since reset (saturating at 255); ``error_kind``
  the ``TxnKind`` of the latest. An illegal transaction (the model's ``ProtocolError`` that the
  port encoding can express, ``ILLEGAL_CHECKS``) is answered with the ``DONE`` beat alone and
  changes no state but these two outputs, as the model leaves its state unchanged.
- ``cmd`` (in stream, ``command_layout``): one input transaction per transfer, ``kind``
  (``TxnKind``) and the fields of every kind (unused ones are ignored).
- ``event`` (out stream, ``event_layout``): the transaction's output events, one beat each, in
  the model's order, then one ``DONE`` beat. List-valued events are serialized: ``Issued`` as
  one ``ISSUED_TOKEN`` beat per token then an ``ISSUED`` beat; ``Discarded`` and ``Moved`` as one
  beat per position (consecutive beats of one request and reason form one model event).
  ``hw/flow/manager_codec.py`` converts both ways.
- ``logits`` (in stream): the Controller's softmax unit; a ``DRAFT`` with ``use_logits`` (the
  model's DraftLogits) takes its token and probability from there instead of ``token`` and
  ``prob``, waiting for the softmax result; a refused one drops the result.

Behaviour: the model's, on legal transaction sequences; illegal ones are checked in the
accepting cycle, from the command and the state the Controller and pools read out for its
request (no cycle added to a legal transaction; an illegal one costs 3 cycles as counted below,
the ``DONE`` beat alone; an illegal DraftLogits waits for its softmax result, to drop it). A full pool answers ``REFUSED``
(back-pressure at the transaction level); a stalled ``event.ready`` holds the current beat and stops the machine,
``cmd.ready`` is high only between transactions, so no input and no event is ever lost.

Where positions come from: the tokens of a request that are still in the Manager are always
the last ``fly + wait + eager`` of its round, in that order (tokens leave a round only from its
front, by acceptance, or all at once), so with the Controller's t every position range of
``Verified``, ``Discarded`` and ``Moved`` follows from the per-request counts of the pools.

SADDLE+ (``plus``, off by default: then nothing below is built and the Verilog is SADDLE's):
the model's three optional pieces (sim/manager/README.md, "SADDLE+"). Configuration ports
instead of ``tau``: ``tau_table`` (8 UQ1.16 entries, the Controller's tau by the admitted
requests), ``dlm_fc_threshold_locked`` (the Scheduler's DLM FC threshold while the pool is
locked), ``pass_fc`` (the FC cost table, ``fc_entries`` x 22 bits), ``per_request``,
``wait_bound``, ``plan_select``, ``plan_issue`` (the ``PassCosts`` fields; both low: no planner,
SADDLE's Issue). ``hw/flow/manager_codec.py`` (``config_ports``) maps a ``ManagerConfig`` onto
them (no tau table: tau in every entry; no locked threshold: the other one). The pool entries
carry ``h_prev`` and ``last``. An Issue that passes the checks with a planner walks the waiting
entries in selection order (``PLAN``: the Shared Pool PEEKs its winner, one per cycle, at most
``capacity`` of them without ``plan_select``) into the ``Planner`` (hw/manager/planner.py), clears
the peeks and waits for its result (``PLAN_END``); then it answers ``NOT_ISSUED`` (below
capacity: the planner's wait, the pool held fewer than ``capacity`` tokens) or selects the best
prefix. Cycle cost of such an Issue of k tokens with w entries walked: k + 8 + w + 5 (the
walk's end and the planner's ``LATENCY``, its answer in the last), a wait w + 9.

Mutation testing: ``fault`` names one fault of ``Manager.FAULTS`` or of a block's ``FAULTS``
(hw/common/fault.py, ``saddle hw mutate``); None, the default, is the shipped design.

Timing structure (what keeps the clock short): a DRAFT's request is given to the Controller
while the command is accepted (``pre_req``), so its H is in a register when the decision cycle
starts; during a selection the Shared Pool's winner goes only to the pool itself and to the event
register, and the pass's bookkeeping (requests in the pass, distinct requests) runs a cycle later
on the registered winner (``sel_req``), so the selector's output drives no request lookup. The
walks over requests (rejected, holding eager tokens, in the pass) address the blocks from
registered scans (``lowest``): a walk step that changes its vector waits one cycle for the scan
to see the change. ``cur``, the request every block is addressed by, is itself a register
(``cur_r``, loaded with the request the next state reads, from the next values of those
registers) or, in IDLE, the incoming command's request: no state decoding before the blocks'
128-way reads. The Controller's operands come straight from the command register; decisions
that only ask whether a request holds no token test its three counts for zero (no adder);
SELECT's pool command does not wait for the winner (a SELECT without one is a no-op).

Cycle cost (clock edges from the ``cmd`` transfer to the ``DONE`` transfer, both included,
without back-pressure): one to accept, one per event beat, one more for the ``DONE`` transfer,
plus one per step that emits nothing (Issue's checks and end of selection, requests visited
by the Unlock walks without an event, the walks' waits for their registered scans). A
``DRAFT`` takes 4 (its ``DRAFTED`` is valid one cycle after the transfer: the decision
latency), an Issue of k tokens k + 8: one selected token per cycle
(``tests/hw/manager/test_manager.py`` and ``saddle hw cycles`` measure both). The same with a
pipelined Shared Pool selector (``selector_stage_levels``): its latency (at most ``SELECT_GAP`` cycles, checked
at construction) passes between a pool write and the next Issue's first SELECT.

Storage (``storage``, hw/manager/sram.py): with ``"sram"`` both pools keep their token records in
an SRAM macro model, read with one cycle of latency. The Shared Pool's: the ISSUED_TOKEN beat
takes its token from the macro's read data (``sp.sel_token``) in the cycle it is on ``event``,
the SELECT's read filling the beat as the event register would, so an Issue still takes
k + 8. The Eager Pools': the Unlock and Retire drain looks up a request's first eager token one
cycle before its first MOVE (``primed``), then each MOVE takes the looked-up token and looks up
the next: one cycle more per request drained, one token per cycle as before.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from hw.common.fault import checked_fault, fault_for
from hw.common.priority_encoder import first_one_hot, one_hot_index
from hw.manager.controller import Controller, CtlOp, SlotState
from hw.manager.eager_pool import EagerOp, EagerPools
from hw.manager.planner import COST_BITS, LATENCY, Planner, fc_entries
from hw.manager.scheduler import Scheduler
from hw.manager.shared_pool import ArgmaxNode, PoolOp, SharedPool, tree_stages
from hw.manager.sizes import pool_storage as shipped_storage
from hw.manager.sizes import selector_stage_levels as shipped_selector_stage_levels
from hw.manager.softmax import Softmax, logits_layout
from sim.manager.controller import ACCEPTANCE_BINS, TAU_BUCKETS
from sim.manager.formats import (
    AGE,
    CUM_PROB,
    MICROBATCH_ID,
    POOL_COUNT,
    POSITION,
    PROB,
    PROB_ONE,
    REQUEST_ID,
    TAU,
    THRESHOLD,
    TOKEN_ID,
    VERIFY_ID,
)
from sim.manager.softmax import SoftmaxParams


class TxnKind(enum.Enum, shape=3):
    ADMIT = 0
    DRAFT = 1
    ISSUE = 2
    RESULT = 3
    UNLOCK = 4
    QUERY = 5
    END_ROUND = 6
    RETIRE = 7


class EventKind(enum.Enum, shape=4):
    ADMITTED = 0
    DRAFTED = 1
    REFUSED = 2
    ROUND_ENDED = 3
    NOT_ISSUED = 4
    ISSUED_TOKEN = 5
    ISSUED = 6
    LOCKED = 7
    MAPPING = 8
    VERIFIED = 9
    DISCARDED = 10
    UNLOCKED = 11
    MOVED = 12
    RESUMED = 13
    RETIRED = 14
    DONE = 15


# What the RTL checks (the model's ProtocolError for the same transaction): kind -> conditions.
ILLEGAL_CHECKS = {
    "Admit": "request beyond the slots, already admitted, micro-batch beyond the pools",
    "DraftToken/DraftLogits": "not admitted, another micro-batch, not drafting, position != t + 1, prob > 1.0",
    "VerifyIssue": "capacity 0",
    "VerifyResult": "no token in the current verification, a second result, accepted > tokens in flight",
    "Unlock": "not locked, a request of the verification without its result",
    "SchedulerQuery": "micro-batch beyond the pools",
    "EndRound": "not admitted, not drafting, no draft token in the round",
    "Retire": "not admitted, in the current verification",
}

acceptance_write_signature = wiring.Signature({
    "en": Out(1), "addr": Out(range(ACCEPTANCE_BINS)), "data": Out(PROB.bits)})


class _State(enum.Enum, shape=5):
    """States of the Manager's sequencer (one per transaction kind, then the walks)."""
    IDLE = 0
    ADMIT = 1
    DRAFT = 2
    ISSUE = 3
    SELECT = 4
    ISSUED = 5
    LOCKED = 6
    MAP_TLM = 7
    RESULT = 8
    DISCARD = 9
    UNLOCK = 10
    UNLOCK_REJECTED = 11
    DRAIN = 12
    MOVE = 13
    RESUME = 14
    QUERY = 15
    END_ROUND = 16
    END_RESUME = 17
    RETIRE = 18
    RETIRED = 19
    DONE = 20
    DROP_LOGITS = 21    # an illegal DraftLogits: its softmax result is dropped


def uses_plus(config) -> bool:
    """Whether a ``ManagerConfig`` uses one of SADDLE+'s pieces (the RTL then needs ``plus``)."""
    return any(x is not None for x in (config.pass_costs, config.tau_table, config.dlm_fc_threshold_locked))


def _with_states(base, name: str, **more):
    """``base`` and the states ``more`` (name = value), as a new enum of the same shape: SADDLE+'s
    sequencer, kept apart so that SADDLE's Verilog (whose state register names its enum's
    members) does not change."""
    members = enum.EnumType.__prepare__(name, (enum.Enum,), shape=5)
    for state in base:
        members[state.name] = state.value
    for key, value in more.items():
        members[key] = value
    return enum.EnumType(name, (enum.Enum,), members, shape=5)


# SADDLE+: the planner's walk (PLAN) and the cycles until its answer (PLAN_END).
_PlusState = _with_states(_State, "_PlusState", PLAN=22, PLAN_END=23)


# ``code`` of NOT_ISSUED beats and of DISCARDED beats (the model's enums, in this order).
NOT_ISSUED_CODES = ("locked", "empty", "below_capacity")
DISCARD_CODES = ("rejected_prefix", "shared_after_reject", "eager_after_reject", "request_retired")

command_layout = data.StructLayout({
    "kind": TxnKind, "request": REQUEST_ID.bits, "microbatch": MICROBATCH_ID.bits,
    "position": POSITION.bits, "token": TOKEN_ID.bits, "prob": PROB.bits, "use_logits": 1,
    "tlm_idle": 1, "capacity": POOL_COUNT.bits, "accepted": POSITION.bits,
})

event_layout = data.StructLayout({
    "kind": EventKind, "request": REQUEST_ID.bits, "microbatch": MICROBATCH_ID.bits,
    "position": POSITION.bits, "token": TOKEN_ID.bits, "h": CUM_PROB.bits,
    "flag": 1,          # Drafted.stop, Verified.rejected, Resumed.after_reject
    "pool": 1,          # 0 shared, 1 eager
    "code": 2,          # NOT_ISSUED_CODES / DISCARD_CODES
    "gpu": 1, "tlm": 1,  # Mapping: device, op (1 = TLM attention, 0 = DLM FC)
    "numerator": POOL_COUNT.bits, "denominator": POOL_COUNT.bits,   # also NotIssued.available
    "verification": VERIFY_ID.bits, "accepted": POSITION.bits,
})


class Manager(wiring.Component):
    FAULTS = {
        "shared_full_ignored": "manager: a draft for the Shared Pool is taken although the pool is full",
        "eager_full_ignored": "manager: a draft for an Eager Pool is taken although the pool is full",
        "eager_moved_on_reject": "manager: Unlock moves a rejected request's eager tokens instead of "
                                 "discarding them",
        "move_ignores_full": "manager: the Unlock drain moves a request's eager tokens on into a full Shared Pool",
        "retire_drains_while_locked": "manager: Retire during a verification drains the Eager Pools",
        "wait_cleared_on_accept": "manager: a fully accepted result also clears the request's waiting tokens",
        "refused_draft_updates_h": "manager: a refused draft still updates the request's H and t",
        "cur_register_stale": "manager: the blocks' request register takes this cycle's request, not the one "
                              "the next state reads",
        "distinct_after_count": "manager: a selected token's request counts as new in the pass when its in-flight "
                                "count is 1 (as if the Shared Pool counted a SELECT in the next cycle)",
        "query_mask_stale": "manager: a SchedulerQuery's drafting mask is taken for the previous command's "
                            "micro-batch (the command register's while the query is accepted)",
        "sram_move_unprimed": "manager, SRAM storage: the drain moves a token in its first cycle, before the "
                              "Eager Pools have looked it up (the previous look-up's token is moved)",
    }
    BLOCKS = (Controller, Softmax, SharedPool, ArgmaxNode, EagerPools, Scheduler, Planner)   # a fault's blocks

    # Cycles from a pool write to an Issue's first SELECT at the earliest: the write's DONE
    # beat, the next transaction's accept, the Issue's checks (see the FSM below). A pipelined
    # selector whose latency fits in them costs no cycle.
    SELECT_GAP = 3

    def __init__(self, *, requests: int, shared_entries: int, eager_entries: int,
                 micro_batches: int, softmax: SoftmaxParams, aging_passes: int | None = None,
                 selector_stage_levels: int = 0, storage: str = "ff", plus: bool = False,
                 fault: str | None = None):
        self.requests, self.shared_entries, self.aging_passes = requests, shared_entries, aging_passes
        self.plus = plus
        self.storage = storage
        self.selector_stage_levels = selector_stage_levels
        latency = len(tree_stages(shared_entries, selector_stage_levels))
        if latency > self.SELECT_GAP:
            self._MustUse__silence = True   # never elaborated: no "created but never used" warning
            raise ValueError(f"Manager: a Shared Pool selector with registers every {selector_stage_levels} "
                             f"levels has latency {latency} > {self.SELECT_GAP} cycles, the gap between a "
                             "pool write and the next SELECT: use more levels per stage")
        self.eager_entries, self.micro_batches = eager_entries, micro_batches
        self.softmax_params = softmax
        self.fault = checked_fault(fault, Manager, *self.BLOCKS)
        tau = {"tau": In(PROB.bits)}
        if plus:
            tau = {"tau_table": In(TAU_BUCKETS * TAU.bits), "dlm_fc_threshold_locked": In(THRESHOLD.bits),
                   "pass_fc": In(fc_entries(shared_entries) * COST_BITS), "per_request": In(COST_BITS),
                   "wait_bound": In(AGE.bits), "plan_select": In(1), "plan_issue": In(1)}
        super().__init__({
            **tau, "max_draft_len": In(POSITION.bits),
            "calibrated": In(1), "acceptance_write": In(acceptance_write_signature),
            "errors": Out(8), "error_kind": Out(TxnKind),
            "dynamic": In(1), "dlm_fc_threshold": In(THRESHOLD.bits),
            "tlm_attention_threshold": In(THRESHOLD.bits),
            "static_dlm_fc_gpu": In(1), "static_tlm_attention_gpu": In(1),
            "cmd": In(stream.Signature(command_layout)),
            "event": Out(stream.Signature(event_layout)),
            "logits": In(stream.Signature(logits_layout(softmax))),
        })

    @classmethod
    def from_config(cls, config, softmax: SoftmaxParams, fault: str | None = None, *,
                    selector_stage_levels: int | None = None, storage: str | None = None,
                    plus: bool | None = None) -> Manager:
        """Sized like a ``sim.manager.config.ManagerConfig``; the selector and the pools' storage
        of configs/hardware/manager_rtl.yaml unless ``selector_stage_levels``, ``storage`` are given;
        SADDLE+ (``plus``) when the configuration uses one of its pieces, unless ``plus`` is given."""
        if selector_stage_levels is None:
            selector_stage_levels = shipped_selector_stage_levels()
        return cls(requests=config.max_requests, shared_entries=config.shared_entries,
                   eager_entries=config.eager_entries, micro_batches=config.micro_batches,
                   softmax=softmax, aging_passes=config.aging_passes,
                   selector_stage_levels=selector_stage_levels, storage=storage or shipped_storage(),
                   plus=uses_plus(config) if plus is None else plus, fault=fault)

    def elaborate(self, platform):
        m = Module()
        fault, plus = self.fault, self.plus
        S = _PlusState if plus else _State
        m.submodules.ctl = ctl = Controller(self.requests, self.softmax_params, plus=plus,
                                            fault=fault_for(fault, Controller, Softmax))
        sram = self.storage == "sram"
        m.submodules.sp = sp = SharedPool(self.shared_entries, self.requests, self.aging_passes,
                                          stage_levels=self.selector_stage_levels, storage=self.storage,
                                          plus=plus, fault=fault_for(fault, SharedPool, ArgmaxNode))
        m.submodules.ep = ep = EagerPools(self.micro_batches, self.eager_entries, self.requests,
                                          storage=self.storage, plus=plus, fault=fault_for(fault, EagerPools))
        m.submodules.sched = sched = Scheduler(self.requests, POOL_COUNT.max_raw, plus=plus,
                                               fault=fault_for(fault, Scheduler))
        wiring.connect(m, wiring.flipped(self.logits), ctl.logits)
        m.d.comb += [
            *([] if plus else [ctl.tau.eq(self.tau)]), ctl.max_draft_len.eq(self.max_draft_len),
            ctl.calibrated.eq(self.calibrated),
            sched.dynamic.eq(self.dynamic), sched.dlm_fc_threshold.eq(self.dlm_fc_threshold),
            sched.tlm_attention_threshold.eq(self.tlm_attention_threshold),
            sched.static_dlm_fc_gpu.eq(self.static_dlm_fc_gpu),
            sched.static_tlm_attention_gpu.eq(self.static_tlm_attention_gpu),
        ]

        state = Signal(S)
        table = [Signal(PROB.bits, name=f"acceptance{i}") for i in range(ACCEPTANCE_BINS)]
        aw = self.acceptance_write
        for i, entry in enumerate(table):
            with m.If(aw.en & (aw.addr == i)):
                m.d.sync += entry.eq(aw.data)
        m.d.comb += ctl.acceptance.eq(Cat(table))

        c = Signal(command_layout)              # the transaction being executed
        no_eager = Signal()                     # its request held no eager token when accepted
        reject_r = Signal()                     # a RESULT's accepted < in flight, when accepted
        first_r = Signal(POSITION.bits)         # t - tail + 1 of its request, when accepted
        locked = Signal()
        vid = Signal(VERIFY_ID.bits)
        in_pass = Signal(self.requests)
        resulted = Signal(self.requests)        # requests of the verification with their result
        rejected = Signal(self.requests)
        queries = Signal(POOL_COUNT.bits)       # tokens of the verification
        distinct = Signal(POOL_COUNT.bits)      # its requests
        left = Signal(POOL_COUNT.bits)          # tokens still to select
        # The request a walk is on, the position it emits and the last one it will emit.
        walk_req = Signal(REQUEST_ID.bits)
        walk_mb = Signal(MICROBATCH_ID.bits)
        pos = Signal(POSITION.bits)
        pos_end = Signal(POSITION.bits)
        code = Signal(2)
        wait_left = Signal(POSITION.bits)      # waiting tokens discarded after a rejected prefix

        primed = Signal() if sram else None    # SRAM storage: the drain's MOVE has looked up its position
        # The token SELECTed in the previous cycle, if any (the pass's bookkeeping, SELECT).
        sel_valid = Signal()
        sel_req = Signal(REQUEST_ID.bits)
        m.d.sync += sel_valid.eq(0)
        planner = self._plus(m, ctl, sp, ep, sched, locked) if plus else None
        gap = Signal(range(LATENCY)) if plus else None     # PLAN_END: cycles until the planner's answer

        # The sequencer's next state, and the next values of the registers ``cur`` is taken from.
        state_next = Signal(S)
        walk_req_next = Signal(REQUEST_ID.bits)
        sel_req_next = Signal(REQUEST_ID.bits)
        c_request_next = Signal(REQUEST_ID.bits)
        m.d.comb += [state_next.eq(state), walk_req_next.eq(walk_req), sel_req_next.eq(sel_req),
                     c_request_next.eq(c.request)]
        m.d.sync += state.eq(state_next)

        # Every block is addressed by one request and one micro-batch at a time. The request is
        # a register (``cur_r``, the next cycle's request, chosen by the next state) or, in
        # IDLE, the incoming command's: the blocks' reads start at a flip-flop or a port.
        cur = Signal(REQUEST_ID.bits)
        cur_r = Signal(REQUEST_ID.bits)
        idle_r = Signal(init=1)
        cur_mb = Signal(MICROBATCH_ID.bits)
        m.d.comb += [cur.eq(Mux(idle_r, self.cmd.payload.request, cur_r)), cur_mb.eq(c.microbatch)]
        # A DRAFT's request, a cycle ahead for the Controller's read of H: the command's
        # while it is accepted, then the transaction's own.
        m.d.comb += [ctl.pre_req.eq(Mux(idle_r, self.cmd.payload.request, c.request)),
                     ctl.pre_prob.eq(Mux(idle_r, self.cmd.payload.prob, c.prob))]
        # The draft's probability and source straight from the command register, whatever the
        # state: the Controller reads them only for DRAFT and SKIP (DROP_LOGITS is entered by a
        # DraftLogits, so use_logits is set there too).
        m.d.comb += [ctl.prob.eq(c.prob), ctl.use_logits.eq(c.use_logits)]
        m.d.comb += [ctl.req.eq(cur), ctl.mb.eq(cur_mb), sp.req.eq(cur), sp.q_req.eq(cur),
                     ep.req.eq(cur), ep.q_req.eq(cur), ep.mb.eq(cur_mb), ep.room_mb.eq(c.microbatch)]
        # The Scheduler is combinational and read in QUERY and MAP_TLM only: its inputs come
        # from registers whatever the state; the drafting mask of the micro-batch is taken while
        # the command is accepted (``drafting_r``; nothing changes it before QUERY reads it).
        drafting_r = Signal(self.requests)
        m.d.comb += [ctl.q_mb.eq(c.microbatch if fault == "query_mask_stale" else
                                 Mux(idle_r, self.cmd.payload.microbatch, c.microbatch)),
                     sched.drafting.eq(drafting_r),
                     sched.queries.eq(queries), sched.query_requests.eq(distinct)]
        m.d.sync += drafting_r.eq(ctl.drafting)
        t, fly, wait, eager = ctl.rd_t, sp.q_fly, sp.q_wait, ep.q_n
        tail = Signal(POSITION.bits + 2)        # tokens of the request still in the Manager
        none_left = Signal()                    # tail == 0, without the adder
        m.d.comb += [tail.eq(fly + wait + eager), none_left.eq((fly == 0) & (wait == 0) & (eager == 0))]

        ev = self.event
        out = ev.payload
        if sram:
            # The beat is a register but for an ISSUED_TOKEN's token: the Shared Pool's macro
            # read it at the SELECT's clock edge and holds it while the beat waits.
            out = Signal(event_layout, name="event_beat")
            token_from_pool = Signal()
            m.d.comb += [ev.payload.eq(out), ev.payload.token.eq(Mux(token_from_pool, sp.sel_token, out.token))]
        room = Signal()
        m.d.comb += room.eq(~ev.valid | ev.ready)
        with m.If(ev.valid & ev.ready):
            m.d.sync += ev.valid.eq(0)

        def emit(kind, **fields):
            m.d.sync += [ev.valid.eq(1), out.eq(0), out.kind.eq(kind)]
            m.d.sync += [getattr(out, k).eq(v) for k, v in fields.items()]
            if sram:
                m.d.sync += token_from_pool.eq(kind == EventKind.ISSUED_TOKEN)

        def select(tokens):
            """Issue: select ``tokens`` (at most) from the next cycle."""
            m.d.sync += [left.eq(tokens), queries.eq(0), distinct.eq(0)]
            m.d.comb += state_next.eq(S.SELECT)

        def one_hot(index, name):
            bits = Signal(self.requests, name=f"{name}_bit")
            m.d.comb += bits.eq(Cat(index == i for i in range(self.requests)))
            return bits

        def lowest(vector, name):
            """The lowest set bit of ``vector`` as registers: (any, index, index one-hot,
            fresh). The scan runs every cycle on the vector as it is and its result is
            registered, so a walk addresses the blocks from a flip-flop, not from a 128-bit
            scan; ``fresh`` (the registers saw the vector as it is now) is low for one cycle
            after the vector changes, and a walk waits for it."""
            first = first_one_hot(m, vector, name)
            found = Signal(name=f"{name}_any")
            index = Signal(REQUEST_ID.bits, name=f"{name}_idx")
            index_next = one_hot_index(m, first, name)
            seen = Signal(len(vector), name=f"{name}_seen")
            m.d.sync += [found.eq(first.any()), index.eq(index_next), seen.eq(vector)]
            fresh = Signal(name=f"{name}_fresh")
            m.d.comb += fresh.eq(~(seen ^ vector).any())
            return found, index, one_hot(index, f"{name}_r"), fresh, index_next

        pass_any, pass_idx, pass_bit, pass_fresh, pass_idx_next = lowest(in_pass, "pass")
        rej_any, rej_idx, rej_bit, rej_fresh, rej_idx_next = lowest(rejected, "rej")
        hold_any, hold_idx, _, hold_fresh, hold_idx_next = lowest(ep.holding, "hold")
        # The request the blocks are addressed by in the next cycle: what each state reads.
        cur_next = Signal(REQUEST_ID.bits)
        with m.Switch(state_next):
            with m.Case(S.SELECT):
                m.d.comb += cur_next.eq(sel_req_next)
            with m.Case(S.DISCARD, S.MOVE):
                m.d.comb += cur_next.eq(walk_req_next)
            with m.Case(S.UNLOCK_REJECTED):
                m.d.comb += cur_next.eq(rej_idx_next)
            with m.Case(S.DRAIN):
                m.d.comb += cur_next.eq(hold_idx_next)
            with m.Case(S.RESUME):
                m.d.comb += cur_next.eq(pass_idx_next)
            with m.Default():
                m.d.comb += cur_next.eq(c_request_next)
        m.d.sync += [cur_r.eq(cur if fault == "cur_register_stale" else cur_next),
                     idle_r.eq(state_next == S.IDLE)]
        shared_full = Signal()
        m.d.comb += shared_full.eq(sp.count == self.shared_entries)

        with m.Switch(state):
            with m.Case(S.IDLE):
                # The blocks are addressed by the incoming command's request: the checks read
                # them in the accepting cycle, and a DRAFT's pool choice (its request's eager
                # tokens) is a register in the next cycle.
                m.d.comb += self.cmd.ready.eq(1)
                cmd = self.cmd.payload
                illegal = self._illegal(m, cmd, ctl, locked, in_pass, resulted, fly, t)
                with m.If(self.cmd.valid):
                    m.d.sync += [c.eq(cmd), no_eager.eq(eager == 0), reject_r.eq(cmd.accepted < fly),
                                 first_r.eq(t - tail + 1)]
                    m.d.comb += c_request_next.eq(cmd.request)
                    with m.If(illegal):
                        m.d.sync += [self.error_kind.eq(cmd.kind),
                                     self.errors.eq(self.errors + (self.errors != 255))]
                        with m.If((cmd.kind == TxnKind.DRAFT) & cmd.use_logits):
                            m.d.comb += state_next.eq(S.DROP_LOGITS)
                        with m.Else():
                            m.d.comb += state_next.eq(S.DONE)
                    with m.Else():
                        with m.Switch(cmd.kind):
                            for kind in TxnKind:
                                with m.Case(kind):
                                    m.d.comb += state_next.eq(S[kind.name])

            with m.Case(S.DROP_LOGITS):
                m.d.comb += ctl.op.eq(CtlOp.SKIP)
                with m.If(ctl.draft_ready):
                    m.d.comb += state_next.eq(S.DONE)

            with m.Case(S.ADMIT):
                with m.If(room):
                    m.d.comb += ctl.op.eq(CtlOp.ADMIT)
                    emit(EventKind.ADMITTED, request=c.request, microbatch=c.microbatch)
                    m.d.comb += state_next.eq(S.DONE)

            with m.Case(S.DRAFT):
                to_shared = Signal()
                pool_room = Signal()
                shared_room = 1 if fault == "shared_full_ignored" else ~shared_full
                eager_room = 1 if fault == "eager_full_ignored" else ep.room
                token = Mux(c.use_logits, ctl.sampled_token, c.token)
                # The pools' data inputs are driven whatever the handshake: only the op strobes
                # wait for it, so no data multiplexer hangs on the Controller's op_ready.
                m.d.comb += [to_shared.eq(~locked & no_eager),
                             pool_room.eq(Mux(to_shared, shared_room, eager_room)),
                             sp.pos.eq(c.position), sp.token.eq(token), sp.h.eq(ctl.h_new),
                             sp.mb.eq(c.microbatch), ep.pos.eq(c.position),
                             ep.token.eq(token), ep.h.eq(ctl.h_new)]
                if plus:    # the planner's value of the token travels with it
                    m.d.comb += [sp.h_prev.eq(ctl.h_old), sp.last.eq(ctl.stop),
                                 ep.h.eq(Cat(ctl.h_new, ctl.h_old, ctl.stop))]
                with m.If(room):
                    # A refused token's softmax result is dropped (SKIP): the DLM retries.
                    m.d.comb += ctl.op.eq(CtlOp.DRAFT if fault == "refused_draft_updates_h" else
                                          Mux(pool_room, CtlOp.DRAFT, CtlOp.SKIP))
                with m.If(room & ctl.draft_ready & ~pool_room):
                    emit(EventKind.REFUSED, request=c.request, position=c.position, pool=~to_shared)
                    m.d.comb += state_next.eq(S.DONE)
                with m.Elif(room & ctl.draft_ready):
                    with m.If(to_shared):
                        m.d.comb += sp.op.eq(PoolOp.INSERT)
                    with m.Else():
                        m.d.comb += ep.op.eq(EagerOp.INSERT)
                    emit(EventKind.DRAFTED, request=c.request, position=c.position,
                         pool=~to_shared, h=ctl.h_new, flag=ctl.stop)
                    m.d.comb += state_next.eq(S.DONE)

            with m.Case(S.ISSUE):
                with m.If(room):
                    with m.If(locked):
                        emit(EventKind.NOT_ISSUED, code=0, numerator=sp.count - sp.fly_count)
                        m.d.comb += state_next.eq(S.DONE)
                    with m.Elif(sp.count == 0):
                        emit(EventKind.NOT_ISSUED, code=1, numerator=0)
                        m.d.comb += state_next.eq(S.DONE)
                    with m.Elif((sp.count < c.capacity) & ~c.tlm_idle):
                        emit(EventKind.NOT_ISSUED, code=2, numerator=sp.count)
                        m.d.comb += state_next.eq(S.DONE)
                    with m.Else():
                        if plus:
                            with m.If(self.plan_select | self.plan_issue):
                                # SADDLE+: walk the waiting entries (all, or the capacity's first).
                                m.d.sync += left.eq(Mux(self.plan_select, self.shared_entries, c.capacity))
                                m.d.comb += [planner.start.eq(1), state_next.eq(S.PLAN)]
                            with m.Else():
                                select(c.capacity)
                        else:
                            select(c.capacity)

            if plus:
                with m.Case(S.PLAN):
                    # One PEEK per cycle, in selection order, into the planner; then the peeks
                    # are cleared (the selector shows it before the first SELECT can come).
                    with m.If(~sp.best_valid | (left == 0)):
                        m.d.comb += [sp.unpeek.eq(1), state_next.eq(S.PLAN_END)]
                        m.d.sync += gap.eq(LATENCY - 1)
                    with m.Else():
                        m.d.comb += sp.peek.eq(1)
                        m.d.sync += left.eq(left - 1)

                with m.Case(S.PLAN_END):
                    with m.If(gap != 0):
                        m.d.sync += gap.eq(gap - 1)
                    with m.Elif(room):
                        with m.If(self.plan_issue & (sp.count < c.capacity) & planner.wait):
                            emit(EventKind.NOT_ISSUED, code=2, numerator=sp.count)
                            m.d.comb += [planner.waited.eq(1), state_next.eq(S.DONE)]
                        with m.Else():
                            m.d.comb += planner.issued.eq(1)
                            select(planner.best_k)

            with m.Case(S.SELECT):
                # The pass's bookkeeping runs one cycle behind the selection, on the registered
                # winner: the request of the token selected in the previous cycle, its first
                # in flight iff its in-flight count is still 0 (the Shared Pool counts a SELECT
                # a cycle later than other commands). So the selector's
                # winner drives no request lookup (Controller, pools): the selection path ends
                # in the Shared Pool and the event register. The cycle after the last SELECT
                # is this state's end of selection, so the counts are complete before ISSUED.
                with m.If(sel_valid):
                    m.d.sync += [distinct.eq(distinct + (fly == (1 if fault == "distinct_after_count" else 0))),
                                 in_pass.eq(in_pass | one_hot(sel_req, "best"))]
                # The pool's command does not wait for the winner: a SELECT without a waiting
                # entry changes nothing there.
                with m.If(room & (left != 0)):
                    m.d.comb += sp.op.eq(PoolOp.SELECT)
                with m.If(~sp.best_valid | (left == 0)):
                    m.d.comb += state_next.eq(S.ISSUED)
                    if self.aging_passes is not None:   # the selection is complete: age the pool
                        m.d.comb += sp.pass_end.eq(1)
                with m.Elif(room):
                    # SRAM: the token is the Shared Pool's read of this SELECT (``token_from_pool``).
                    token = {} if sram else {"token": sp.best_token}
                    emit(EventKind.ISSUED_TOKEN, request=sp.best_req, position=sp.best_pos, **token, h=sp.best_h)
                    m.d.sync += [left.eq(left - 1), queries.eq(queries + 1),
                                 sel_valid.eq(1), sel_req.eq(sp.best_req)]
                    m.d.comb += sel_req_next.eq(sp.best_req)

            with m.Case(S.ISSUED):
                with m.If(room):
                    emit(EventKind.ISSUED, verification=vid)
                    m.d.sync += locked.eq(1)
                    m.d.comb += state_next.eq(S.LOCKED)

            with m.Case(S.LOCKED):
                with m.If(room):
                    emit(EventKind.LOCKED, verification=vid)
                    m.d.comb += state_next.eq(S.MAP_TLM)

            with m.Case(S.MAP_TLM):
                with m.If(room):
                    emit(EventKind.MAPPING, tlm=1, gpu=sched.tlm_attention_gpu, numerator=queries,
                         denominator=distinct)
                    m.d.comb += state_next.eq(S.DONE)

            with m.Case(S.RESULT):
                with m.If(room):
                    first = Signal(POSITION.bits)
                    reject = reject_r       # accepted < fly, registered when the command was accepted
                    m.d.comb += [first.eq(first_r),
                                 ctl.token.eq(c.token), ctl.reject.eq(reject),
                                 sp.clear_fly.eq(1),
                                 sp.clear_wait.eq(1 if fault == "wait_cleared_on_accept" else reject)]
                    m.d.comb += [ctl.op.eq(CtlOp.RESULT), sp.op.eq(PoolOp.CLEAR)]
                    m.d.sync += resulted.eq(resulted | one_hot(c.request, "resulted"))
                    emit(EventKind.VERIFIED, request=c.request, position=first, accepted=c.accepted,
                         flag=reject)
                    # Rejected prefix: first+a+1 .. first+fly-1; then the waiting tokens.
                    m.d.sync += [pos.eq(first + c.accepted + 1), pos_end.eq(first + fly - 1),
                                 walk_req.eq(c.request), code.eq(0)]
                    m.d.comb += walk_req_next.eq(c.request)
                    with m.If(reject):
                        m.d.sync += rejected.eq(rejected | one_hot(c.request, "result"))
                        with m.If(c.accepted + 1 < fly):
                            m.d.comb += state_next.eq(S.DISCARD)
                        with m.Elif(wait != 0):
                            m.d.sync += [pos.eq(first + fly), pos_end.eq(first + fly + wait - 1),
                                         code.eq(1)]
                            m.d.comb += state_next.eq(S.DISCARD)
                        with m.Else():
                            m.d.comb += state_next.eq(S.DONE)
                    with m.Else():
                        m.d.comb += state_next.eq(S.DONE)
                    m.d.sync += wait_left.eq(wait)

            with m.Case(S.DISCARD):
                # One DISCARDED beat per position pos..pos_end of walk_req with reason `code`.
                with m.If(room):
                    emit(EventKind.DISCARDED, request=walk_req, position=pos, code=code)
                    m.d.sync += pos.eq(pos + 1)
                    with m.If(pos == pos_end):
                        with m.Switch(code):
                            with m.Case(0):         # rejected prefix, then the waiting tokens
                                with m.If(wait_left != 0):
                                    m.d.sync += [pos.eq(pos + 1), pos_end.eq(pos + wait_left), code.eq(1)]
                                with m.Else():
                                    m.d.comb += state_next.eq(S.DONE)
                            with m.Case(1):
                                m.d.comb += state_next.eq(S.DONE)
                            with m.Case(2):         # eager tokens of a rejected request
                                m.d.comb += [cur_mb.eq(ctl.rd_mb), ep.op.eq(EagerOp.DROP)]
                                m.d.sync += rejected.eq(rejected & ~one_hot(walk_req, "drop"))
                                m.d.comb += state_next.eq(S.UNLOCK_REJECTED)
                            with m.Case(3):
                                m.d.comb += state_next.eq(S.RETIRED)

            with m.Case(S.UNLOCK):
                with m.If(room):
                    emit(EventKind.UNLOCKED, verification=vid)
                    m.d.sync += locked.eq(0)
                    m.d.comb += state_next.eq(S.UNLOCK_REJECTED)

            with m.Case(S.UNLOCK_REJECTED):
                # Discard the eager tokens of each rejected request, ascending request id.
                with m.If(~rej_fresh):
                    pass
                with m.Elif(1 if fault == "eager_moved_on_reject" else ~rej_any):
                    m.d.comb += state_next.eq(S.DRAIN)
                with m.Elif(eager == 0):
                    m.d.sync += rejected.eq(rejected & ~rej_bit)
                with m.Else():
                    m.d.sync += [walk_req.eq(rej_idx), pos.eq(t - eager + 1), pos_end.eq(t), code.eq(2)]
                    m.d.comb += walk_req_next.eq(rej_idx)
                    m.d.comb += state_next.eq(S.DISCARD)

            with m.Case(S.DRAIN):
                # Eager tokens to the Shared Pool while it has room: ascending request, position.
                if sram:
                    m.d.sync += primed.eq(0)
                with m.If(~hold_fresh):
                    pass
                with m.Elif(~hold_any | shared_full):
                    with m.If(c.kind == TxnKind.UNLOCK):
                        m.d.comb += state_next.eq(S.RESUME)
                    with m.Else():
                        m.d.comb += state_next.eq(S.DONE)
                with m.Else():
                    m.d.comb += walk_req_next.eq(hold_idx)
                    m.d.sync += [walk_req.eq(hold_idx), walk_mb.eq(ctl.rd_mb), pos.eq(t - eager + 1),
                                 pos_end.eq(t)]
                    m.d.comb += state_next.eq(S.MOVE)

            with m.Case(S.MOVE):
                m.d.comb += [cur_mb.eq(walk_mb), ep.pos.eq(pos),
                             sp.pos.eq(pos), sp.mb.eq(walk_mb), sp.token.eq(ep.look_token),
                             sp.h.eq(ep.look_h)]
                if plus:
                    m.d.comb += [sp.h_prev.eq(ep.look_h[CUM_PROB.bits:2 * CUM_PROB.bits]),
                                 sp.last.eq(ep.look_h[-1])]
                # SRAM: the first cycle looks up the first position (``primed``); from then on
                # each cycle takes the token looked up in the previous one and looks up the next.
                move = room & (primed | (fault == "sram_move_unprimed")) if sram else room
                if sram:
                    m.d.comb += [ep.pos.eq(Mux(primed, pos + 1, pos)), ep.look.eq(~primed | room)]
                    m.d.sync += primed.eq(1)
                with m.If(move):
                    m.d.comb += [ep.op.eq(EagerOp.TAKE), sp.op.eq(PoolOp.INSERT)]
                    emit(EventKind.MOVED, request=walk_req, microbatch=walk_mb, position=pos)
                    m.d.sync += pos.eq(pos + 1)
                    filled = sp.count + 1 == self.shared_entries
                    with m.If(pos == pos_end if fault == "move_ignores_full" else (pos == pos_end) | filled):
                        m.d.comb += state_next.eq(S.DRAIN)

            with m.Case(S.RESUME):
                # New rounds for the verification's requests that are rejected or done.
                slot_state = ctl.rd_state
                restart = Signal()
                m.d.comb += restart.eq((slot_state == SlotState.REJECTED) |
                                       ((slot_state == SlotState.STOPPED) & none_left))
                with m.If(~pass_fresh):
                    pass
                with m.Elif(~pass_any):
                    m.d.sync += [vid.eq(vid + 1), rejected.eq(0), resulted.eq(0)]
                    m.d.comb += state_next.eq(S.DONE)
                with m.Elif(~restart):
                    m.d.sync += in_pass.eq(in_pass & ~pass_bit)
                with m.Elif(room):
                    m.d.comb += ctl.op.eq(CtlOp.NEW_ROUND)
                    emit(EventKind.RESUMED, request=pass_idx, token=ctl.rd_next_token,
                         flag=slot_state == SlotState.REJECTED)
                    m.d.sync += in_pass.eq(in_pass & ~pass_bit)

            with m.Case(S.QUERY):
                with m.If(room):
                    emit(EventKind.MAPPING, tlm=0, gpu=sched.dlm_fc_gpu, numerator=sched.drafting_count,
                         denominator=1, microbatch=c.microbatch)
                    m.d.comb += state_next.eq(S.DONE)

            with m.Case(S.END_ROUND):
                with m.If(room):
                    m.d.comb += ctl.op.eq(CtlOp.END_ROUND)
                    emit(EventKind.ROUND_ENDED, request=c.request, position=t, h=ctl.rd_h)
                    with m.If(none_left):
                        m.d.comb += state_next.eq(S.END_RESUME)
                    with m.Else():
                        m.d.comb += state_next.eq(S.DONE)

            with m.Case(S.END_RESUME):
                with m.If(room):
                    m.d.comb += ctl.op.eq(CtlOp.NEW_ROUND)
                    emit(EventKind.RESUMED, request=c.request, token=ctl.rd_next_token, flag=0)
                    m.d.comb += state_next.eq(S.DONE)

            with m.Case(S.RETIRE):
                # The waiting and eager tokens (the last wait + eager of the round) are discarded.
                m.d.sync += [walk_req.eq(c.request), pos.eq(first_r), pos_end.eq(t), code.eq(3)]
                m.d.comb += walk_req_next.eq(c.request)
                with m.If(~none_left):
                    m.d.comb += state_next.eq(S.DISCARD)
                with m.Else():
                    m.d.comb += state_next.eq(S.RETIRED)

            with m.Case(S.RETIRED):
                with m.If(room):
                    m.d.comb += [sp.op.eq(PoolOp.CLEAR), sp.clear_wait.eq(1), sp.clear_fly.eq(0),
                                 ep.op.eq(EagerOp.DROP), cur_mb.eq(ctl.rd_mb), ctl.op.eq(CtlOp.RETIRE)]
                    emit(EventKind.RETIRED, request=c.request)
                    with m.If(0 if fault == "retire_drains_while_locked" else locked):
                        m.d.comb += state_next.eq(S.DONE)
                    with m.Else():
                        m.d.comb += state_next.eq(S.DRAIN)

            with m.Default():   # DONE
                with m.If(room):
                    emit(EventKind.DONE)
                    m.d.comb += state_next.eq(S.IDLE)
        return m

    def _plus(self, m, ctl, sp, ep, sched, locked):
        """SADDLE+'s configuration wiring and the Planner, fed by the Shared Pool's PEEKs: the
        winner's request and H registered at the PEEK, its h_prev and last from the pool."""
        m.submodules.planner = planner = Planner(self.shared_entries, self.requests,
                                                 fault=fault_for(self.fault, Planner))
        m.d.comb += [ctl.tau_table.eq(self.tau_table), sched.locked.eq(locked),
                     sched.dlm_fc_threshold_locked.eq(self.dlm_fc_threshold_locked),
                     planner.fc.eq(self.pass_fc), planner.per_request.eq(self.per_request),
                     planner.wait_bound.eq(self.wait_bound), planner.select.eq(self.plan_select),
                     planner.drafting.eq(ctl.drafting_all), planner.holding.eq(sp.holding | ep.holding),
                     planner.gain.eq(ctl.gain)]
        peeked = Signal()
        peeked_req = Signal(REQUEST_ID.bits)
        peeked_h = Signal(CUM_PROB.bits)
        m.d.sync += [peeked.eq(sp.peek & sp.best_valid), peeked_req.eq(sp.best_req), peeked_h.eq(sp.best_h)]
        m.d.comb += [planner.valid.eq(peeked), planner.req.eq(peeked_req), planner.h.eq(peeked_h),
                     planner.h_prev.eq(sp.peek_hprev), planner.last.eq(sp.peek_last)]
        return planner

    def _illegal(self, m, cmd, ctl, locked, in_pass, resulted, fly, t):
        """Whether ``cmd`` is illegal (``ILLEGAL_CHECKS``), with the Controller and the Shared
        Pool read for its request."""
        n, pools = self.requests, self.micro_batches
        request_bit = Signal(n, name="check_bit")
        m.d.comb += request_bit.eq(Cat(cmd.request == i for i in range(n)))
        outside = cmd.request >= n if n < 1 << REQUEST_ID.bits else 0
        mb_outside = cmd.microbatch >= pools if pools < 1 << MICROBATCH_ID.bits else 0
        admitted = Signal(name="check_admitted")
        drafting = Signal(name="check_drafting")
        passing = Signal(name="check_in_pass")
        m.d.comb += [admitted.eq(ctl.rd_admitted & ~outside),
                     drafting.eq(admitted & (ctl.rd_state == SlotState.DRAFTING)),
                     passing.eq((in_pass & request_bit).any())]
        illegal = Signal(name="illegal")
        with m.Switch(cmd.kind):
            with m.Case(TxnKind.ADMIT):
                m.d.comb += illegal.eq(outside | ctl.rd_admitted | mb_outside)
            with m.Case(TxnKind.DRAFT):
                m.d.comb += illegal.eq(~drafting | (ctl.rd_mb != cmd.microbatch) | (cmd.position != t + 1)
                                       | (~cmd.use_logits & (cmd.prob > PROB_ONE)))
            with m.Case(TxnKind.ISSUE):
                m.d.comb += illegal.eq(cmd.capacity == 0)
            with m.Case(TxnKind.RESULT):
                m.d.comb += illegal.eq(~passing | (resulted & request_bit).any() | (cmd.accepted > fly))
            with m.Case(TxnKind.UNLOCK):
                m.d.comb += illegal.eq(~locked | (in_pass & ~resulted).any())
            with m.Case(TxnKind.QUERY):
                m.d.comb += illegal.eq(mb_outside)
            with m.Case(TxnKind.END_ROUND):
                m.d.comb += illegal.eq(~drafting | (t == 0))
            with m.Case(TxnKind.RETIRE):
                m.d.comb += illegal.eq(~admitted | passing)
        return illegal
