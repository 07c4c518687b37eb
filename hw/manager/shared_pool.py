"""Shared Pool: a CAM of draft tokens with the greedy selector of one verification.

Each of ``entries`` entries (a ``CamEntry``) holds valid, in-flight, request, micro-batch,
position, token id and H (widths from ``sim.manager.formats``). Per request the pool also keeps
how many of its tokens wait (``wait_n``) and how many are in flight (``fly_n``), so occupancy
and the Scheduler's counts never need a population count over the CAM.

Interface (``lib.wiring`` Component, one command per cycle, no handshake: every command
completes in the cycle it is given):

- ``op`` with ``req``, ``mb``, ``pos``, ``token``, ``h``:
  ``INSERT`` writes the lowest free entry (the caller checks ``count < entries``);
  ``SELECT`` moves ``best`` in flight; ``CLEAR`` removes the request's in-flight entries
  (``clear_fly``) and/or its waiting entries (``clear_wait``) in one cycle, by a match on the
  request field of every entry.
- ``best_valid``, ``best_req``, ``best_mb``, ``best_pos``, ``best_token``, ``best_h``
  (combinational): the waiting entry with the highest (H, -request, -position), i.e. the model's
  selection order (``sim.manager.shared_pool.selection_key``): an argmax tree of
  ``entries - 1`` comparators (``ArgmaxNode``) over the key {waiting, H, ~request, ~position},
  which carries the winner's token and micro-batch along.
- Aging (``aging_passes`` = K, None = off: no aging logic is built and the key is as above):
  each entry keeps its count of passes passed over (``K.bit_length()`` bits, saturating at K)
  and a ``served`` flag, and prepends ``aged`` (count = K) to its key below the waiting bit:
  {waiting, aged, H, ~request, ~position}, the model's ``aged_selection_key``. A ``SELECT``
  broadcasts the selected token's request to every entry (the ``req`` bus carries ``best_req``
  in that cycle) and the entries of that request set ``served``; ``pass_end`` (one cycle after
  the pass's last ``SELECT``, no other command in it) resets the count of each waiting entry
  that was served and adds one to the others', and clears every ``served``. The tree is not
  changed: the aged bit is formed in the entry.
- ``count`` (every valid entry), ``fly_count``; ``q_req`` -> ``q_wait``, ``q_fly``
  (combinational per-request counts).

Cycle cost: insert 1 cycle, one selected token per cycle (a verification of n tokens takes n
cycles, the first token is visible combinationally), invalidate/release of a whole request
1 cycle. The prefix property of the selection follows from the key, as in the model. The
per-request counts and ``fly_count`` show a SELECT of cycle t from cycle t + 2 (every other
command from t + 1): its bookkeeping runs a cycle behind, from registers, so that the
selector's winner drives no counter (a CLEAR of that request in cycle t + 1 accounts for it).

Pipelined selector (``stage_levels`` = k > 0; 0, the default, is the combinational tree):
registers after every k tree levels (``tree_stages``), so the longest path crosses k levels
instead of all log2(entries). Same selection order, still one SELECT per cycle (II = 1); the
price is **latency = len(tree_stages(entries, k)) cycles** (``self.latency``): ``best_*`` shows
an INSERT, CLEAR or ``pass_end`` (aging changes keys) of cycle t from cycle t + 1 + latency
on (t + 1 for the combinational tree), so the user must not SELECT earlier. 512 entries (9 levels): k = 3 or 4 -> latency 2, k = 5..8
-> latency 1. The registers hold more than each subtree's winner (``argmax_tree``).

Storage (``storage``): ``"ff"`` keeps every field of an entry in flip-flops. ``"sram"`` keeps
the payload {micro-batch, token} (``PAYLOAD_BITS``) in an ``Sram`` macro (hw/manager/sram.py,
one word per entry) and in the entries only what every cycle compares: valid, in flight,
request (CLEAR's match), position and H (the selector's key), aging. The tree then carries no
payload; its winner's index addresses the macro. ``best_token`` and ``best_mb`` are replaced by
``sel_token`` and ``sel_mb``: the payload of the entry SELECTed in the last SELECT cycle, from
the cycle after it, held until the next SELECT (the macro's one cycle of read latency; the
Manager puts it straight into its ISSUED_TOKEN beat, so no cycle is added). INSERT writes the
macro at the lowest free entry; INSERT and SELECT never share a cycle, so one port suffices.

SADDLE+ (``plus``; off: none of this is built): each entry also keeps ``h_prev`` and ``last``
(the planner's value of the token, sim/manager/planner.py), in the payload (flip-flops: carried
by the tree; SRAM: in the macro's word), and a ``peeked`` flag that takes it out of the key's
waiting bit. ``peek`` marks ``best`` peeked (the planner's walk in selection order: the
pipelined selector drops it as it drops a SELECTed entry, so one PEEK per cycle), ``unpeek``
clears every flag (``best_*`` shows it after the selector's latency, as an INSERT). ``peek_hprev``,
``peek_last``: the payload of the entry PEEKed in the previous cycle (a register, or the macro's
read), held until the next PEEK or SELECT. ``holding``: one bit per request with a token in the
pool, waiting or in flight. Counts and aging ignore PEEK.

Structure: every entry and every tree node is its own submodule, so that the exported Verilog
keeps them as modules and synthesis can map them one at a time (``hw/flow/synth.py``, method
``osu018-hier``) instead of optimizing one flat 200k-gate netlist.

``fault``: one of ``ArgmaxNode.FAULTS`` or ``SharedPool.FAULTS``, for mutation testing
(hw/common/fault.py); None in the shipped design.
"""
from __future__ import annotations

from amaranth.hdl import C, Cat, Module, Mux, Signal
from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import In, Out

from hw.common.fault import checked_fault, fault_for
from hw.common.priority_encoder import first_one_hot, one_hot_index
from hw.common.read_mux import read
from hw.manager.sizes import STORAGES
from hw.manager.sram import Sram
from sim.manager.formats import AGE, CUM_PROB, MICROBATCH_ID, POSITION, REQUEST_ID, TOKEN_ID

KEY_BITS = 1 + CUM_PROB.bits + REQUEST_ID.bits + POSITION.bits     # without aging (one more with)
PAYLOAD_BITS = TOKEN_ID.bits + MICROBATCH_ID.bits
PLUS_BITS = CUM_PROB.bits + 1       # SADDLE+: h_prev and last, after the payload


class PoolOp(enum.Enum, shape=2):
    NOP = 0
    INSERT = 1
    SELECT = 2
    CLEAR = 3


def _entry_fields() -> dict:
    return {"req": In(REQUEST_ID.bits), "mb": In(MICROBATCH_ID.bits), "pos": In(POSITION.bits),
            "token": In(TOKEN_ID.bits), "h": In(CUM_PROB.bits)}


class CamEntry(wiring.Component):
    """One Shared Pool entry. ``write`` stores the fields (waiting), ``select`` moves it in
    flight, ``clear`` removes it if it belongs to ``req`` and its state is one ``clear_fly`` /
    ``clear_wait`` names; at most one of the three per cycle. ``key`` = {waiting, H, ~request,
    ~position} (the selector's order), ``payload`` = {micro-batch, token}, ``free`` = not valid.
    With ``aging_passes``: ``selecting`` (a SELECT of a token of request ``req`` this cycle) and
    ``pass_end`` age the entry, and ``key`` = {waiting, aged, H, ~request, ~position}. With
    ``plus``: ``h_prev`` and ``last`` stored (in ``payload`` after micro-batch and token),
    ``peek`` (this entry is PEEKed) and ``unpeek`` set and clear ``peeked``, which is not waiting."""

    def __init__(self, aging_passes: int | None = None, *, payload: bool = True, plus: bool = False,
                 fault: str | None = None):
        self.aging_passes, self.has_payload, self.plus = aging_passes, payload, plus
        self.fault = fault      # one of SharedPool.FAULTS' aging faults, for mutation testing
        fields = _entry_fields()
        if not payload:
            del fields["token"], fields["mb"]
        ports = {"write": In(1), "select": In(1), "clear": In(1), "clear_fly": In(1),
                 "clear_wait": In(1), **fields, "free": Out(1), "key": Out(key_bits(aging_passes))}
        if plus:
            ports.update(peek=In(1), unpeek=In(1))
            if payload:
                ports.update(h_prev=In(CUM_PROB.bits), last=In(1))
        if payload:
            ports["payload"] = Out(PAYLOAD_BITS + (PLUS_BITS if plus else 0))
        if aging_passes is not None:
            ports.update(selecting=In(1), pass_end=In(1))
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        valid, fly = Signal(), Signal()
        payload = self.has_payload
        req, mb, pos = Signal(REQUEST_ID.bits), Signal(MICROBATCH_ID.bits) if payload else None, Signal(POSITION.bits)
        token, h = Signal(TOKEN_ID.bits) if payload else None, Signal(CUM_PROB.bits)
        k = self.aging_passes
        waiting = valid & ~fly
        stored_payload = Cat(token, mb) if payload else None
        if self.plus:
            peeked = Signal()
            waiting = waiting & ~peeked
            with m.If(self.peek):
                m.d.sync += peeked.eq(1)
            with m.If(self.unpeek):
                m.d.sync += peeked.eq(0)
            if payload:
                h_prev, last = Signal(CUM_PROB.bits), Signal()
                stored_payload = Cat(token, mb, h_prev, last)
                with m.If(self.write):
                    m.d.sync += [h_prev.eq(self.h_prev), last.eq(self.last)]
        if k is None:
            key = Cat(~pos, ~req, h, waiting)
        else:
            age, served = Signal(range(k + 1)), Signal()
            key = Cat(~pos, ~req, h, age == k, waiting)
        m.d.comb += [self.key.eq(key), *([self.payload.eq(stored_payload)] if payload else []), self.free.eq(~valid)]
        if k is not None:
            with m.If(self.selecting & valid & (req == self.req)):
                m.d.sync += served.eq(1)
            with m.If(self.pass_end):
                m.d.sync += served.eq(0)
                with m.If(valid & ~fly):
                    older = Mux(age == k, k, age + 1)
                    m.d.sync += age.eq(older if self.fault == "aging_served_not_reset" else Mux(served, 0, older))
            if self.fault != "aging_write_keeps_age":
                with m.If(self.write):
                    m.d.sync += [age.eq(0), served.eq(0)]
        gone = Signal()
        m.d.comb += gone.eq(self.clear & valid & (req == self.req) &
                            Mux(fly, self.clear_fly, self.clear_wait))
        with m.If(self.write):
            if payload:
                m.d.sync += [valid.eq(1), fly.eq(0), req.eq(self.req), mb.eq(self.mb), pos.eq(self.pos),
                             token.eq(self.token), h.eq(self.h)]
            else:
                m.d.sync += [valid.eq(1), fly.eq(0), req.eq(self.req), pos.eq(self.pos), h.eq(self.h)]
        with m.If(self.select):
            m.d.sync += fly.eq(1)
        with m.If(gone):
            m.d.sync += [valid.eq(0), fly.eq(0)]
        return m


def key_bits(aging_passes: int | None) -> int:
    """Width of an entry's selection key: {waiting, [aged,] H, ~request, ~position}."""
    return KEY_BITS + (aging_passes is not None)


class ArgmaxNode(wiring.Component):
    """One comparator of the selector tree: the larger key of ``a`` and ``b`` (``a`` on a tie,
    the lower index), its payload, and its index within this node's subtree: the winner's bit
    above the child's index (children of ``index_bits`` bits; 0 at the leaves)."""

    FAULTS = {
        "tie_break_request_reversed": "shared pool: on equal H the higher request id wins",
        "tie_break_position_reversed": "shared pool: on equal H within a request the later position wins",
        "argmax_prefers_b": "shared pool: an argmax node picks its b input on equal keys (a >= for a >)",
    }
    # The key bits a reversed tie-break compares inverted (see CamEntry: {waiting, H, ~request, ~position}).
    _REVERSED_FIELD = {"tie_break_request_reversed": ((1 << REQUEST_ID.bits) - 1) << POSITION.bits,
                       "tie_break_position_reversed": (1 << POSITION.bits) - 1}

    def __init__(self, key_bits: int, payload_bits: int, index_bits: int, *, fault: str | None = None):
        self.index_bits = index_bits
        self.fault = checked_fault(fault, ArgmaxNode)
        # No payload ports without a payload (the SRAM storage): no zero-width Verilog wires.
        self.payload_bits = payload_bits
        carried = (lambda port: {port: In(payload_bits)}) if payload_bits else (lambda port: {})
        ports = {"a_key": In(key_bits), **carried("a_payload"),
                 "b_key": In(key_bits), **carried("b_payload"),
                 "key": Out(key_bits), **({"payload": Out(payload_bits)} if payload_bits else {}),
                 "index": Out(index_bits + 1)}
        if index_bits:
            ports.update(a_index=In(index_bits), b_index=In(index_bits))
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        take_b = Signal()
        m.d.comb += [take_b.eq(self.beats(self.fault, self.a_key, self.b_key)),
                     self.key.eq(Mux(take_b, self.b_key, self.a_key)),
                     *([self.payload.eq(Mux(take_b, self.b_payload, self.a_payload))] if self.payload_bits else [])]
        if self.index_bits:
            m.d.comb += self.index.eq(Cat(Mux(take_b, self.b_index, self.a_index), take_b))
        else:
            m.d.comb += self.index.eq(take_b)
        return m

    @classmethod
    def beats(cls, fault: str | None, a_key, b_key):
        """Whether key ``b`` wins over key ``a`` (``a`` wins a tie), as a node with ``fault`` compares."""
        if fault == "argmax_prefers_b":
            return b_key >= a_key
        if fault in cls._REVERSED_FIELD:
            flip = cls._REVERSED_FIELD[fault]
            return (b_key ^ flip) > (a_key ^ flip)
        return b_key > a_key


class TopNode(wiring.Component):
    """One node of the pipelined selector tree: the ``keep`` largest of two lists sorted by key
    (largest first; ``a`` before ``b`` on a tie, so the merge is stable), with their payloads
    and indices (the winner's side bit above the child's index, as in ``ArgmaxNode``). List i of
    a port holds element i; the merge compares every pair (a_i, b_j) with i + j < keep at once,
    and element r of the result is the one with exactly r elements ahead of it."""

    def __init__(self, key_bits: int, payload_bits: int, index_bits: int, len_a: int, len_b: int,
                 keep: int, *, fault: str | None = None):
        if not 1 <= keep <= len_a + len_b:
            raise ValueError(f"TopNode: keep {keep} must be 1..{len_a + len_b}")
        self.lengths, self.keep, self.index_bits = (len_a, len_b), keep, index_bits
        self.payload_bits = payload_bits     # 0: no payload ports (as ArgmaxNode)
        self.fault = checked_fault(fault, ArgmaxNode)
        ports = {}
        for side, n in zip("ab", self.lengths):
            ports.update({f"{side}_key": In(data.ArrayLayout(key_bits, n)),
                          **({f"{side}_payload": In(data.ArrayLayout(payload_bits, n))} if payload_bits else {})})
            if index_bits:
                ports[f"{side}_index"] = In(data.ArrayLayout(index_bits, n))
        ports.update(key=Out(data.ArrayLayout(key_bits, keep)),
                     **({"payload": Out(data.ArrayLayout(payload_bits, keep))} if payload_bits else {}),
                     index=Out(data.ArrayLayout(index_bits + 1, keep)))
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        len_a, len_b = self.lengths
        b_wins = {}   # (i, j): b_j is ahead of a_i
        for i in range(len_a):
            for j in range(len_b):
                if i + j < self.keep:
                    b_wins[i, j] = Signal(name=f"b{j}_over_a{i}")
                    m.d.comb += b_wins[i, j].eq(ArgmaxNode.beats(self.fault, self.a_key[i], self.b_key[j]))

        def element(side, i):
            index = getattr(self, f"{side}_index")[i] if self.index_bits else C(0, 0)
            payload = getattr(self, f"{side}_payload")[i] if self.payload_bits else C(0, 0)
            return getattr(self, f"{side}_key")[i], payload, Cat(index, C(side == "b", 1))

        for r in range(self.keep):
            # a_i is element r iff exactly r - i of b are ahead of it, b_j iff exactly r - j of a.
            chosen = []
            for i in range(min(r + 1, len_a)):
                j = r - i
                if j <= len_b:
                    chosen.append(((b_wins[i, j - 1] if j else C(1)) & (~b_wins[i, j] if j < len_b else C(1)),
                                   element("a", i)))
            for j in range(min(r + 1, len_b)):
                i = r - j
                if i <= len_a:
                    chosen.append(((~b_wins[i - 1, j] if i else C(1)) & (b_wins[i, j] if i < len_a else C(1)),
                                   element("b", j)))
            outs = (self.key[r], self.payload[r] if self.payload_bits else None, self.index[r])
            for out, part in zip(outs, range(3)):
                if out is not None:
                    m.d.comb += out.eq(_one_of([(sel, value[part]) for sel, value in chosen], len(out)))
        return m


def _port(node, name: str, default=None, index: int | None = None):
    """A node's payload port (element ``index`` of a list port), or ``default`` when the node
    carries no payload."""
    if not node.payload_bits:
        return default
    port = getattr(node, name)
    return port if index is None else port[index]


def _one_of(choices: list, width: int):
    """The value whose select is high, of (select, value) pairs with at most one select high."""
    result = C(0, width)
    for sel, value in choices:
        result = result | Mux(sel, value, 0)
    return result


def tree_stages(leaves: int, stage_levels: int | tuple[int, ...]) -> list[int]:
    """The tree levels after which a selector over ``leaves`` entries registers its candidate
    lists: every ``stage_levels`` levels from the leaves (none for 0: the combinational tree),
    or, for a tuple, exactly those levels (ascending, each below the root's level)."""
    levels = (leaves - 1).bit_length()
    if isinstance(stage_levels, tuple):
        if list(stage_levels) != sorted(set(stage_levels)) or not all(0 < lv < levels for lv in stage_levels):
            raise ValueError(f"register levels {stage_levels}: expected ascending levels in 1..{levels - 1}")
        return list(stage_levels)
    if stage_levels < 0:
        raise ValueError(f"stage_levels must be >= 0, not {stage_levels}")
    return list(range(stage_levels, levels, stage_levels)) if stage_levels else []


def stages_name(stage_levels: int | tuple[int, ...]) -> str:
    """A file-name tag of a selector's register placement: ``k3`` (every 3 levels), ``r4-7``."""
    if isinstance(stage_levels, tuple):
        return "r" + "-".join(str(lv) for lv in stage_levels)
    return f"k{stage_levels}"


def argmax_tree(m, leaves: list, name: str, fault: str | None = None, *, stage_levels: int | tuple = 0,
                selected: tuple | None = None, register_fault: str | None = None):
    """(key, payload, index) of the largest of ``leaves`` [(key, payload)], lowest index on a
    tie, built from ``ArgmaxNode`` submodules ``{name}{level}_{j}`` (each given ``fault``).
    Node j of level L covers leaves [j 2^L, (j+1) 2^L), so indices are relative and the leaves
    need no constants; an odd node out moves up a level unchanged (its index gains a leading 0).

    Pipelined (``stage_levels`` = k > 0): registers after every k levels (``tree_stages``), so
    that no path crosses more than k levels. A register is one cycle behind the entries, so it
    keeps more than its subtree's winner: with s registers above it (the root's side), the s + 1
    largest keys (``TopNode`` merges). ``selected`` = (valid, index) of the entry SELECTed in this
    cycle (the tree's own result): each register keeps, beside its lists, whether that entry is
    in its subtree, and in the next cycle drops it: it was the winner of every subtree holding
    it, so it is element 0 of those subtrees' registers, and dropping it there gives the lists
    of the current cycle. (The comparison with the index is made before the clock edge, so the
    drop multiplexers are driven by a flip-flop.) Hence
    II = 1: while the pool only selects, the result is the combinational tree's in every cycle.
    An INSERT or CLEAR reaches the root after one cycle per register: latency = len(tree_stages)."""
    stages = tree_stages(len(leaves), stage_levels)
    nodes = [([key], [payload], None) for key, payload in leaves]   # (keys, payloads, indices) largest first
    level = 0
    while len(nodes) > 1:
        keep = 1 + sum(stage > level for stage in stages)
        nxt = []
        for j in range(0, len(nodes) - 1, 2):
            (ka, pa, ia), (kb, pb, ib) = nodes[j], nodes[j + 1]
            if keep == len(ka) == len(kb) == 1:
                node = ArgmaxNode(len(ka[0]), len(pa[0]), level, fault=fault)
                wires = [(node.a_key, _port(node, "a_payload"), ka[0], pa[0]),
                         (node.b_key, _port(node, "b_payload"), kb[0], pb[0])]
                index_ports = [(node.a_index, ia[0]), (node.b_index, ib and ib[0])] if level else []
                result = ([node.key], [_port(node, "payload", C(0, 0))], [node.index])
            else:
                node = TopNode(len(ka[0]), len(pa[0]), level, len(ka), len(kb), min(keep, len(ka) + len(kb)),
                               fault=fault)
                wires = [(node.a_key[i], _port(node, "a_payload", index=i), k, p) for i, (k, p) in enumerate(zip(ka, pa))]
                wires += [(node.b_key[i], _port(node, "b_payload", index=i), k, p) for i, (k, p) in enumerate(zip(kb, pb))]
                index_ports = ([(node.a_index[i], x) for i, x in enumerate(ia)] +
                               [(node.b_index[i], x) for i, x in enumerate(ib or [])]) if level else []
                result = tuple([port[r] if port is not None else C(0, 0) for r in range(node.keep)]
                               for port in (node.key, _port(node, "payload"), node.index))
            m.submodules[f"{name}{level}_{j // 2}"] = node
            m.d.comb += [sig.eq(value) for key_port, payload_port, k, p in wires
                         for sig, value in ((key_port, k), (payload_port, p)) if sig is not None]
            m.d.comb += [port.eq(x) for port, x in index_ports if x is not None]
            nxt.append(result)
        if len(nodes) % 2:
            nxt.append(nodes[-1])
        nodes, level = nxt, level + 1
        if level in stages:
            keep = 1 + sum(stage >= level for stage in stages)
            nodes = [_stage_register(m, lists, keep, level, j, selected, f"{name}{level}r_{j}", register_fault)
                     for j, lists in enumerate(nodes)]
    keys, payloads, indices = nodes[0]
    return keys[0], payloads[0], indices[0]


def _stage_register(m, lists: tuple, keep: int, level: int, j: int, selected: tuple, name: str,
                    fault: str | None = None) -> tuple:
    """Subtree j of ``level``'s lists (the ``keep`` largest) registered, then without the entry
    selected in the previous cycle if it belongs to this subtree: one element shorter, except a
    shorter list, which holds the whole subtree and is padded with an empty element (key 0: not
    waiting) instead."""
    keys, payloads, indices = lists
    indices = indices or [C(0, level)]   # a leaf moved up unchanged: index 0 of its subtree
    # A payload of no bits (the SRAM storage) gets no registers.
    regs = [[Signal(len(v), name=f"{name}_{part}{r}") if len(v) else v for r, v in enumerate(values)]
            for part, values in (("key", keys), ("payload", payloads), ("index", indices))]
    m.d.sync += [reg.eq(v) for reg_list, values in zip(regs, (keys, payloads, indices))
                 for reg, v in zip(reg_list, values) if len(v)]
    sel_valid, sel_index = selected
    drop = Signal(name=f"{name}_drop")
    m.d.sync += drop.eq(0 if fault == "selector_selected_not_dropped" else sel_valid & (sel_index[level:] == j))
    length = len(keys) - 1 if len(keys) == keep else len(keys)
    return tuple([Mux(drop, padded[r + 1], padded[r]) for r in range(length)]
                 for padded in (reg_list + [C(0, len(reg_list[0]))] for reg_list in regs))


class SharedPool(wiring.Component):
    FAULTS = {
        "fly_count_not_cleared": "shared pool: CLEAR leaves the in-flight total fly_count unchanged",
        "aging_served_not_reset": "shared pool, aging: a served request's waiting tokens do not reset their "
                                  "age at the end of the pass (they age like the others)",
        "aging_write_keeps_age": "shared pool, aging: a new token keeps the age of the entry's previous occupant",
        "selector_selected_not_dropped": "shared pool, pipelined selector: the entry SELECTed in the previous "
                                         "cycle is not dropped from the stage registers' lists",
        "select_counts_lost": "shared pool: a SELECT's delayed update of its request's waiting and in-flight "
                              "counts is lost",
        "sram_read_every_cycle": "shared pool, SRAM storage: the payload macro reads the winner in every cycle, "
                                 "not only at a SELECT (a held ISSUED_TOKEN beat shows the next winner's token)",
    }
    _ENTRY_FAULTS = ("aging_served_not_reset", "aging_write_keeps_age")

    def __init__(self, entries: int, requests: int, aging_passes: int | None = None, *,
                 stage_levels: int | tuple[int, ...] = 0, storage: str = "ff", plus: bool = False,
                 fault: str | None = None):
        if entries < 2 or requests < 1:
            raise ValueError("SharedPool: entries >= 2 and requests >= 1 expected")
        if storage not in STORAGES:
            raise ValueError(f"SharedPool: storage {storage!r}, expected one of {', '.join(STORAGES)}")
        self.storage = storage
        if aging_passes is not None and not 1 <= aging_passes <= AGE.max_raw:
            raise ValueError(f"SharedPool: aging_passes in [1, {AGE.max_raw}] or None expected")
        self.entries, self.requests, self.aging_passes = entries, requests, aging_passes
        self.stage_levels, self.plus = stage_levels, plus
        self.latency = len(tree_stages(entries, stage_levels))
        self.fault = checked_fault(fault, SharedPool, ArgmaxNode)
        per_req = range(POSITION.max_raw + 1)
        aging = {} if aging_passes is None else {"pass_end": In(1)}
        plus_ports = {"h_prev": In(CUM_PROB.bits), "last": In(1), "peek": In(1), "unpeek": In(1),
                      "peek_hprev": Out(CUM_PROB.bits), "peek_last": Out(1), "holding": Out(requests)} if plus else {}
        super().__init__({
            **aging, **plus_ports,
            "op": In(PoolOp),
            "req": In(REQUEST_ID.bits), "mb": In(MICROBATCH_ID.bits), "pos": In(POSITION.bits),
            "token": In(TOKEN_ID.bits), "h": In(CUM_PROB.bits),
            "clear_fly": In(1), "clear_wait": In(1),
            "best_valid": Out(1), "best_req": Out(REQUEST_ID.bits),
            **({"best_mb": Out(MICROBATCH_ID.bits)} if storage == "ff" else {}),
            "best_pos": Out(POSITION.bits),
            **({"best_token": Out(TOKEN_ID.bits)} if storage == "ff" else
               {"sel_mb": Out(MICROBATCH_ID.bits), "sel_token": Out(TOKEN_ID.bits)}),
            "best_h": Out(CUM_PROB.bits),
            "count": Out(range(entries + 1)), "fly_count": Out(range(entries + 1)),
            "q_req": In(REQUEST_ID.bits), "q_wait": Out(per_req), "q_fly": Out(per_req),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.entries
        entry_fault = self.fault if self.fault in self._ENTRY_FAULTS else None
        sram = self.storage == "sram"
        cam = [CamEntry(self.aging_passes, payload=not sram, plus=self.plus, fault=entry_fault) for _ in range(n)]
        per_req = range(POSITION.max_raw + 1)
        wait_n = [Signal(per_req, name=f"r{r}_wait") for r in range(self.requests)]
        fly_n = [Signal(per_req, name=f"r{r}_fly") for r in range(self.requests)]

        best_idx = Signal(range(n))
        inserting, selecting = Signal(), Signal()
        taking = selecting      # the winner leaves the tree: SELECT (and PEEK)
        if self.plus:
            peeking, taking = Signal(), Signal()
            m.d.comb += [peeking.eq(self.peek & self.best_valid), taking.eq(selecting | peeking)]
        selected = (taking, best_idx) if self.latency else None
        best_key, best_payload, best_index = argmax_tree(m, [(e.key, C(0, 0) if sram else e.payload) for e in cam],
                                                         "sel",
                                                         fault_for(self.fault, ArgmaxNode),
                                                         stage_levels=self.stage_levels, selected=selected,
                                                         register_fault=self.fault)
        m.d.comb += [
            best_idx.eq(best_index),
            self.best_valid.eq(best_key[-1]),
            self.best_h.eq(best_key[POSITION.bits + REQUEST_ID.bits:POSITION.bits + REQUEST_ID.bits + CUM_PROB.bits]),
            self.best_req.eq(~best_key[POSITION.bits:POSITION.bits + REQUEST_ID.bits]),
            self.best_pos.eq(~best_key[:POSITION.bits]),
            *([] if sram else [self.best_token.eq(best_payload[:TOKEN_ID.bits]),
                               self.best_mb.eq(best_payload[TOKEN_ID.bits:PAYLOAD_BITS])]),
        ]

        free = Signal(n)
        m.d.comb += free.eq(Cat(e.free for e in cam))
        free_one_hot = first_one_hot(m, free, "free")
        m.d.comb += [inserting.eq(self.op == PoolOp.INSERT),
                     selecting.eq((self.op == PoolOp.SELECT) & self.best_valid)]
        entry_req = self.req
        if self.aging_passes is not None:   # a SELECT tells every entry which request it served
            entry_req = Signal(REQUEST_ID.bits)
            m.d.comb += entry_req.eq(Mux(selecting, self.best_req, self.req))
        for i, e in enumerate(cam):
            m.submodules[f"e{i}"] = e
            if self.aging_passes is not None:
                m.d.comb += [e.selecting.eq(selecting), e.pass_end.eq(self.pass_end)]
            m.d.comb += [e.write.eq(inserting & free_one_hot[i]), e.select.eq(selecting & (best_idx == i)),
                         e.clear.eq(self.op == PoolOp.CLEAR), e.clear_fly.eq(self.clear_fly),
                         e.clear_wait.eq(self.clear_wait), e.req.eq(entry_req),
                         *([] if sram else [e.mb.eq(self.mb)]), e.pos.eq(self.pos),
                         *([] if sram else [e.token.eq(self.token)]), e.h.eq(self.h)]
            if self.plus:
                m.d.comb += [e.peek.eq(peeking & (best_idx == i)), e.unpeek.eq(self.unpeek),
                             *([] if sram else [e.h_prev.eq(self.h_prev), e.last.eq(self.last)])]
        if sram:
            # The payload: written at the free entry by INSERT, read at the winner by SELECT.
            word = Cat(self.token, self.mb, *([self.h_prev, self.last] if self.plus else []))
            m.submodules.sram = mem = Sram(n, len(word))
            m.d.comb += [mem.addr.eq(Mux(inserting, one_hot_index(m, free_one_hot, "free"), best_idx)),
                         mem.w_en.eq(inserting), mem.w_data.eq(word),
                         mem.r_en.eq(1 if self.fault == "sram_read_every_cycle" else taking),
                         self.sel_token.eq(mem.r_data[:TOKEN_ID.bits]),
                         self.sel_mb.eq(mem.r_data[TOKEN_ID.bits:PAYLOAD_BITS])]
        if self.plus:
            if sram:
                m.d.comb += [self.peek_hprev.eq(mem.r_data[PAYLOAD_BITS:PAYLOAD_BITS + CUM_PROB.bits]),
                             self.peek_last.eq(mem.r_data[-1])]
            else:
                with m.If(taking):
                    m.d.sync += [self.peek_hprev.eq(best_payload[PAYLOAD_BITS:PAYLOAD_BITS + CUM_PROB.bits]),
                                 self.peek_last.eq(best_payload[-1])]
            m.d.comb += self.holding.eq(Cat((wait_n[r] != 0) | (fly_n[r] != 0) for r in range(self.requests)))

        count = Signal(range(n + 1))
        fly_count = Signal(range(n + 1))
        m.d.comb += [self.count.eq(count), self.fly_count.eq(fly_count)]
        m.d.comb += [self.q_wait.eq(read(wait_n, self.q_req)), self.q_fly.eq(read(fly_n, self.q_req))]
        r_wait = Signal(per_req)
        r_fly = Signal(per_req)
        m.d.comb += [r_wait.eq(read(wait_n, self.req)), r_fly.eq(read(fly_n, self.req))]

        # A SELECT's bookkeeping (its request's waiting and in-flight counts, fly_count) is
        # applied one cycle later, from registers (``pending``): the selector's winner then
        # drives only the entries' select decode and the registers, not a count update. A CLEAR
        # of the same request in that cycle counts the pending token as in flight.
        pending, pending_req = Signal(name="sel_pending"), Signal(REQUEST_ID.bits, name="sel_pending_req")
        m.d.sync += [pending.eq(0 if self.fault == "select_counts_lost" else selecting),
                     pending_req.eq(self.best_req)]
        clearing = Signal()
        same = Signal()
        m.d.comb += [clearing.eq(self.op == PoolOp.CLEAR), same.eq(pending & (pending_req == self.req))]
        dropped_fly = Signal(per_req)
        dropped_wait = Signal(per_req)
        m.d.comb += [dropped_fly.eq(Mux(clearing & self.clear_fly, r_fly + same, 0)),
                     dropped_wait.eq(Mux(clearing & self.clear_wait, r_wait - same, 0))]
        m.d.sync += [count.eq(count + inserting - dropped_fly - dropped_wait),
                     fly_count.eq(fly_count + pending - (0 if self.fault == "fly_count_not_cleared" else dropped_fly))]
        for r in range(self.requests):
            ins_r, pend_r, clr_r = Signal(name=f"r{r}_ins"), Signal(name=f"r{r}_pend"), Signal(name=f"r{r}_clr")
            m.d.comb += [ins_r.eq(inserting & (self.req == r)), pend_r.eq(pending & (pending_req == r)),
                         clr_r.eq(clearing & (self.req == r))]
            with m.If(clr_r & self.clear_wait):
                m.d.sync += wait_n[r].eq(0)
            with m.Elif(ins_r & ~pend_r):
                m.d.sync += wait_n[r].eq(wait_n[r] + 1)
            with m.Elif(pend_r & ~ins_r):
                m.d.sync += wait_n[r].eq(wait_n[r] - 1)
            with m.If(clr_r & self.clear_fly):
                m.d.sync += fly_n[r].eq(0)
            with m.Elif(pend_r):
                m.d.sync += fly_n[r].eq(fly_n[r] + 1)
        return m
