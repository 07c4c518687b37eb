"""Model transactions <-> the Manager RTL's ``cmd`` / ``event`` beats (hw/manager/manager.py).

One codec for both simulators: ``encode`` gives the command's field values and ``pack`` its bit
pattern (cocotb drives ``cmd__payload`` with it); ``unpack`` turns an ``event__payload`` bit
pattern into field values and ``decode`` turns the beats of one transaction (up to its ``DONE``)
into the model's output events, so the testbench compares them with ``Manager.apply``.
"""
from __future__ import annotations

from amaranth.lib import data

from hw.manager.manager import (
    DISCARD_CODES,
    NOT_ISSUED_CODES,
    EventKind,
    TxnKind,
    command_layout,
    event_layout,
    uses_plus,
)
from hw.manager.planner import COST_BITS, fc_entries
from sim.manager import transactions as tx
from sim.manager.controller import TAU_BUCKETS
from sim.manager.formats import TAU

_KIND = {tx.Admit: TxnKind.ADMIT, tx.DraftToken: TxnKind.DRAFT, tx.DraftLogits: TxnKind.DRAFT,
         tx.VerifyIssue: TxnKind.ISSUE,
         tx.VerifyResult: TxnKind.RESULT, tx.Unlock: TxnKind.UNLOCK, tx.SchedulerQuery: TxnKind.QUERY,
         tx.EndRound: TxnKind.END_ROUND, tx.Retire: TxnKind.RETIRE}
_FIELDS = {"request": "request", "microbatch": "microbatch", "position": "position",
           "token": "token", "prob": "prob", "tlm_idle": "tlm_idle", "capacity": "capacity",
           "accepted": "accepted", "corrected_token": "token"}
EVENT_FIELDS = tuple(event_layout.members)


def encode(txn) -> dict:
    """The ``cmd`` fields; a DraftLogits sets ``use_logits`` (its logits go to ``logits_beats``)."""
    fields = {"kind": _KIND[type(txn)], "use_logits": int(isinstance(txn, tx.DraftLogits))}
    for name, port in _FIELDS.items():
        if hasattr(txn, name):
            fields[port] = int(getattr(txn, name))
    return fields


def pack(txn) -> int:
    return command_layout.const(encode(txn)).as_value().value


def unpack(bits: int) -> dict:
    view = data.Const(event_layout, bits)
    return {name: view[name] if name == "kind" else int(view[name]) for name in EVENT_FIELDS}


def from_view(view) -> dict:
    """Field values of an Amaranth simulator ``data.Const`` view of ``event.payload``."""
    return unpack(view.as_value().value)


def logits_beats(logits, lanes: int) -> list[dict]:
    """The ``logits`` stream beats of one vector (``hw.manager.softmax.logits_layout`` fields)."""
    beats = [logits[k:k + lanes] for k in range(0, len(logits), lanes)]
    return [{"lanes": list(b) + [0] * (lanes - len(b)), "count": len(b), "last": int(i == len(beats) - 1)}
            for i, b in enumerate(beats)]


def pack_logits_beat(beat: dict, layout) -> int:
    return layout.const(beat).as_value().value


def acceptance_writes(config) -> list[tuple[int, int]]:
    """(entry, UQ1.16 value) writes of the acceptance table through the ``acceptance_write``
    port, one per clock cycle after reset; none without a table."""
    return list(enumerate(config.acceptance_table or ()))


def _packed(values, bits: int) -> int:
    """``values`` as one port value, value i in bits [bits i, bits (i + 1))."""
    return sum(v << (bits * i) for i, v in enumerate(values))


def plus_ports(config) -> dict:
    """SADDLE+'s configuration port values (the Manager built with ``plus``): a piece the
    configuration leaves out is given its SADDLE equivalent (tau in every entry of the tau table,
    the DLM FC threshold while locked too, no planner)."""
    costs = config.pass_costs
    fc = costs.fc if costs is not None else (0,) * fc_entries(config.shared_entries)
    locked = config.dlm_fc_threshold_locked
    return {"tau_table": _packed(config.tau_table or (config.tau,) * TAU_BUCKETS, TAU.bits),
            "dlm_fc_threshold_locked": config.dlm_fc_threshold if locked is None else locked,
            "pass_fc": _packed(fc, COST_BITS), "per_request": costs.per_request if costs else 0,
            "wait_bound": costs.wait_bound if costs else 0,
            "plan_select": int(bool(costs and costs.select)), "plan_issue": int(bool(costs and costs.issue))}


def config_ports(config, plus: bool | None = None) -> dict:
    """Configuration port values of a ``ManagerConfig`` for a Manager built with ``plus``
    (None: ``uses_plus(config)``, as ``Manager.from_config``); the acceptance table is written
    through its register port (``acceptance_writes``)."""
    table = config.acceptance_table
    plus = uses_plus(config) if plus is None else plus
    return {**(plus_ports(config) if plus else {"tau": config.tau}), "max_draft_len": config.max_draft_len,
            "calibrated": int(table is not None),
            "dynamic": int(config.dynamic_mapping),
            "dlm_fc_threshold": config.dlm_fc_threshold,
            "tlm_attention_threshold": config.tlm_attention_threshold,
            "static_dlm_fc_gpu": int(config.static_dlm_fc is tx.Device.GPU),
            "static_tlm_attention_gpu": int(config.static_tlm_attention is tx.Device.GPU)}


def decode(beats: list[dict]) -> list:
    """Model events of one transaction's beats (the final DONE beat included or not)."""
    events: list = []
    tokens: list = []
    for b in beats:
        k = b["kind"]
        pool = tx.Pool.EAGER if b["pool"] else tx.Pool.SHARED
        if k is EventKind.DONE:
            break
        if k is EventKind.ADMITTED:
            events.append(tx.Admitted(b["request"], b["microbatch"]))
        elif k is EventKind.DRAFTED:
            events.append(tx.Drafted(b["request"], b["position"], pool, b["h"], bool(b["flag"])))
        elif k is EventKind.REFUSED:
            events.append(tx.Refused(b["request"], b["position"], pool))
        elif k is EventKind.ROUND_ENDED:
            events.append(tx.RoundEnded(b["request"], b["position"], b["h"]))
        elif k is EventKind.NOT_ISSUED:
            events.append(tx.NotIssued(tx.NotIssuedReason(NOT_ISSUED_CODES[b["code"]]), b["numerator"]))
        elif k is EventKind.ISSUED_TOKEN:
            tokens.append(tx.SelectedToken(b["request"], b["position"], b["token"], b["h"]))
        elif k is EventKind.ISSUED:
            events.append(tx.Issued(b["verification"], tuple(tokens)))
            tokens = []
        elif k is EventKind.LOCKED:
            events.append(tx.Locked(b["verification"]))
        elif k is EventKind.MAPPING:
            op = tx.Op.TLM_ATTENTION if b["tlm"] else tx.Op.DLM_FC
            events.append(tx.Mapping(op, tx.Device.GPU if b["gpu"] else tx.Device.PIM, b["numerator"],
                                     b["denominator"], -1 if b["tlm"] else b["microbatch"]))
        elif k is EventKind.VERIFIED:
            events.append(tx.Verified(b["request"], b["position"], b["accepted"], bool(b["flag"])))
        elif k is EventKind.DISCARDED:
            reason = tx.DiscardReason(DISCARD_CODES[b["code"]])
            last = events[-1] if events else None
            if isinstance(last, tx.Discarded) and last.request == b["request"] and last.reason is reason:
                events[-1] = tx.Discarded(last.request, last.positions + (b["position"],), reason)
            else:
                events.append(tx.Discarded(b["request"], (b["position"],), reason))
        elif k is EventKind.UNLOCKED:
            events.append(tx.Unlocked(b["verification"]))
        elif k is EventKind.MOVED:
            last = events[-1] if events else None
            if isinstance(last, tx.Moved) and last.request == b["request"]:
                events[-1] = tx.Moved(last.request, last.microbatch, last.positions + (b["position"],))
            else:
                events.append(tx.Moved(b["request"], b["microbatch"], (b["position"],)))
        elif k is EventKind.RESUMED:
            events.append(tx.Resumed(b["request"], b["token"], bool(b["flag"])))
        elif k is EventKind.RETIRED:
            events.append(tx.Retired(b["request"]))
    assert not tokens, "ISSUED_TOKEN beats without their ISSUED beat"
    return events
