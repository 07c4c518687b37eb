"""HBM3-PIM timing model: GEMV work on bank PEs priced from the DRAM timing parameters.

Command model (see sim/cost/README.md for every assumption):
- PIM commands are all-bank commands of one channel: an all-bank ACT opens the same row in all
  ``banks_per_channel`` banks (both pseudo-channels, both stack IDs, every bank group); each
  MAC command then reads one column of the open row in every bank and feeds it to the bank's
  PE. MAC commands are at least ``mac_spacing`` tCK apart (more under the power constraint).
- A row change is PRE (no earlier than RAS after the ACT and RTP_L after the last MAC) followed
  by RP; ACT to ACT is at least RC; the first MAC follows its ACT by RCD. Row and column
  commands use separate buses, so operand transfers after a stream overlap its last PRE/RP.
- Operands move between the buffer die and the banks over the channel's data buses: a
  broadcast (same data to every bank) is one 32-B column write per CCD_S; a read-out is one
  32-B column per CCD_S on each pseudo-channel in parallel.
- Refresh: an all-bank REF of RFC every REFI, issued when no row is open. Which ones delay a
  job (``PimStack.refresh``): ``every`` one that falls due while the job runs, or
  (``until_last_activate``, Ramulator2's controller) only those that fall due before the job's
  last row activation.
- Channels work independently; fewer instances than channels leave channels idle.
"""
from __future__ import annotations

import math
import weakref
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from sim.config import BASE, Configs, calibrated, config_path, get, loader
from sim.errors import ConfigError, SaddleError

TIMING_KEYS = ("CL", "RCD", "RP", "RAS", "RC", "WR", "RTP_L", "CCD_S", "CCD_L", "RRD_S", "RRD_L",
               "FAW", "REFI")


_LIVE_STACKS: "weakref.WeakSet[PimStack]" = weakref.WeakSet()


def clear_memos() -> None:
    """Forget the memoized instance prices of every stack object alive."""
    for stack in list(_LIVE_STACKS):
        stack._memo.clear()
    _channel_groups.cache_clear()
    _placement.cache_clear()


@lru_cache(maxsize=4096)
def _channel_groups(n_cycles: int, channels: int, repeat: int
                    ) -> tuple[tuple[tuple[int, ...], int], ...] | None:
    """The channels of ``PimStack.round_robin``'s placement (more jobs than channels) as
    ``(job indices, parity of their count)``: one entry per distinct set of jobs, without the
    sets another entry dominates (a superset with an odd count, or with an even count when
    the set's own is even: job cycles and the odd-count extra are never negative), so the
    slowest channel is the slowest entry. Steps price thousands of distinct cycle lists on a
    few placements: a step's busiest channel then costs a few sums, not one per channel.
    None when the entries hold more jobs than there are jobs and channels: summing every
    channel's load (``PimStack._channel_loads``) is then cheaper."""
    jobs: list[list[int]] = [[] for _ in range(channels)]
    for i in range(n_cycles * repeat):
        jobs[i % channels].append(i // repeat)
    # A job's copies are consecutive, so a channel runs one job twice only if it has more
    # copies than there are channels: sets suffice then, multisets (Counters) otherwise.
    bag = Counter if repeat > channels else frozenset
    sets = sorted({tuple(j) for j in jobs}, key=len, reverse=True)
    kept: list[tuple[tuple[int, ...], int, object]] = []
    for s in sets:
        mine = bag(s)
        if not any(len(s) < len(k) and mine <= theirs and (len(s) % 2 == 0 or odd)
                   for k, odd, theirs in kept):
            kept.append((s, len(s) % 2, mine))
    if sum(len(s) for s, _, _ in kept) > n_cycles + channels:
        return None
    return tuple((s, odd) for s, odd, _ in kept)


@lru_cache(maxsize=256)
def _placement(n_cycles: int, channels: int, repeat: int) -> tuple[np.ndarray, np.ndarray]:
    """``PimStack.round_robin``'s placement as ``(copies, odd)``: ``copies[c, r]`` copies of
    job r run on channel c (used channels only), ``odd[c]`` is 1 when channel c runs an odd
    number of jobs. A channel's load is then one row of a matrix product: a TLM pass places
    hundreds of jobs, and one numpy product costs less than a Python pass over them."""
    jobs = np.arange(n_cycles * repeat)
    copies = np.zeros((min(len(jobs), channels), n_cycles), dtype=np.int64)
    np.add.at(copies, (jobs % channels, jobs // repeat), 1)
    return copies, copies.sum(axis=1) % 2


@dataclass(frozen=True)
class PimWork:
    """Cycles of one job on one channel, and the PE column reads it causes (all banks)."""

    cycles: int
    column_reads: int


@dataclass(frozen=True)
class AttaccSchedule:
    """AttAcc's bank-level attention schedule (``PimStack.attacc_attention``); cycle counts
    fitted to Ramulator2 with AttAcc's PIM patches (validation/tables)."""

    token_units: int          # keys spread over pseudo-channels x stack IDs x bank groups
    dim_banks: int            # a key's dimensions over the banks of a group
    per_score_group: int      # broadcast of 16 score columns' probabilities
    per_context_group: int    # barrier after a group of context MACs
    fixed: int
    pair_overlap: int


@dataclass(frozen=True)
class Timing:
    RCD: int
    RP: int
    RAS: int
    RC: int
    RTP_L: int
    CCD_S: int
    CCD_L: int
    REFI: int
    RFC: int


@dataclass(frozen=True)
class PimStack:
    """One HBM3-PIM stack with a bank-level PE per bank."""

    name: str
    tck_ps: int
    channels: int
    pseudo_channels: int
    banks_per_channel: int
    row_bytes: int
    column_bytes: int
    lanes: int
    pe_latency: int
    capacity_bytes: int
    external_bandwidth: float  # bytes/s of the stack's I/O (GPU side)
    t: Timing
    mac_spacing: int
    mac_spacing_power: int
    softmax_elements_per_cycle: int
    partial_sum_bytes: int
    # None: the command model below; else AttAcc's schedule (``attacc_attention``)
    attacc: "AttaccSchedule | None" = None
    # Which refreshes delay a job: ``every`` one falling due while it runs, or only those falling
    # due before its last row activation (``until_last_activate``; see ``with_refresh``).
    refresh: str = "every"
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self):
        _LIVE_STACKS.add(self)

    @property
    def banks(self) -> int:
        return self.channels * self.banks_per_channel

    @property
    def columns_per_row(self) -> int:
        return self.row_bytes // self.column_bytes

    def spacing(self, power_constrained: bool) -> int:
        return self.mac_spacing_power if power_constrained else self.mac_spacing

    def peak_flops(self, power_constrained: bool = False) -> float:
        """FLOP/s with every bank's PE busy on every MAC slot."""
        return self.banks * self.lanes * 2 / (self.spacing(power_constrained) * self.tck_ps * 1e-12)

    def peak_bandwidth(self, power_constrained: bool = False) -> float:
        """Bytes/s the PEs read from the row buffers when each column feeds one MAC."""
        return self.banks * self.column_bytes / (self.spacing(power_constrained) * self.tck_ps * 1e-12)

    # --- primitives -----------------------------------------------------------------------

    def row_cycles(self, macs: int, spacing: int) -> int:
        """ACT to the next possible ACT for one row that receives ``macs`` MAC commands."""
        t = self.t
        pre = max(t.RAS, t.RCD + (macs - 1) * spacing + t.RTP_L)
        return max(t.RC, pre + t.RP)

    def mac_stream(self, columns: int, macs_per_column: int, spacing: int) -> tuple[int, int]:
        """``(drain, tail)`` of streaming ``columns`` columns of every bank through the PEs,
        each column used by ``macs_per_column`` MAC commands while its row is open.

        ``drain``: first ACT to the last result out of the PE pipeline. ``tail``: how much
        longer until the next ACT may issue (the last row's PRE and RP, and RC). Row commands
        and column commands have their own buses in HBM3, so operand transfers that follow
        the stream overlap its tail; only the next ACT waits for it."""
        if columns <= 0:
            return 0, 0
        t = self.t
        cpr = self.columns_per_row
        earlier, rest = divmod(columns - 1, cpr)
        last = (rest + 1) * macs_per_column
        last_mac = t.RCD + (last - 1) * spacing
        drain = earlier * self.row_cycles(cpr * macs_per_column, spacing) + last_mac + self.pe_latency
        tail = max(0, self.row_cycles(last, spacing) - last_mac - self.pe_latency)
        return drain, tail

    @staticmethod
    def stream_then(stream: tuple[int, int], transfer: int) -> int:
        """A stream followed by operand transfers that overlap its tail."""
        drain, tail = stream
        return drain + max(transfer, tail)

    def broadcast(self, nbytes: int) -> int:
        """Write the same ``nbytes`` into every bank PE of a channel."""
        return -(-nbytes // self.column_bytes) * self.t.CCD_S

    def readout(self, nbytes: int) -> int:
        """Read ``nbytes`` spread over the channel's banks out over its pseudo-channels."""
        return -(-nbytes // (self.column_bytes * self.pseudo_channels)) * self.t.CCD_S

    def with_refresh(self, busy: int, tail: int = 0) -> int:
        """``busy`` cycles of work stretched by the refreshes that delay it: one all-bank REF
        falls due every REFI (from the start of the work) and a REF that delays the work costs
        RFC. ``tail``: cycles of the work after its last row activation (ACT).

        A REF that falls due waits for the open rows to close and then holds back only the next
        ACT: the column commands of the row still open (MACs, operand moves) keep issuing. So
        only a REF that falls due no later than the last ACT delays the work; one that falls due
        during the ``tail`` closes the row after the last MAC and is over when the job is
        (Ramulator2's controller, and its run ends once no request is pending: RFC after the
        REF is not part of the run). ``tail`` = 0 charges every REF that falls due while the
        work runs (``refresh: every``)."""
        t = self.t
        last_act = busy - tail
        refreshes = last_act // t.REFI
        while True:
            more = (last_act + refreshes * t.RFC) // t.REFI
            if more == refreshes:
                return busy + refreshes * t.RFC
            refreshes = more

    # --- attention ------------------------------------------------------------------------

    def attention_cycles(self, context: int, head_dim: int, queries: int, bpe: int,
                         power_constrained: bool) -> tuple[int, int]:
        if self.attacc is not None:
            return self.attacc_attention(context, head_dim, queries, bpe, power_constrained)
        return self.command_attention(context, head_dim, queries, bpe, power_constrained)

    def attacc_attention(self, context: int, head_dim: int, queries: int, bpe: int,
                         power_constrained: bool) -> tuple[int, int]:
        """One attention instance as AttAcc's bank-level PIM runs it (its trace generator and
        Ramulator2's PIM controller): keys spread over the ``token_units`` = pseudo-channels x
        stack IDs x bank groups of the channel, and each key's dimensions over the banks of a
        group and the PE lanes; a MAC command per column (times the query rows), back to back
        at the MAC spacing; a row change costs RTP_L + RP + RCD beyond the spacing; every 16
        score columns a group of probabilities is broadcast back (``per_score_group``), every
        group of context MACs ends at a barrier (``per_context_group``), plus ``fixed``. Two
        instances on one channel overlap one's broadcast with the other's scores
        (``pair_overlap``): this instance is charged half of it (``round_robin`` gives an odd
        channel's last instance the other half back)."""
        a = self.attacc
        streams, groups, dims, macs = self.attacc_layout(context, head_dim, queries, bpe,
                                                         self.spacing(power_constrained))
        cycles = streams + groups * a.per_score_group + dims * a.per_context_group + a.fixed
        return cycles - self.attacc_overlap(context) // 2, macs * self.banks_per_channel

    def attacc_layout(self, context: int, head_dim: int, queries: int, bpe: int,
                      spacing: int) -> tuple[int, int, int, int]:
        """``(stream cycles, score groups, context groups, MAC commands)`` of one instance in
        AttAcc's layout: the MACs back to back plus the row changes (what the fitted counts of
        ``AttaccSchedule`` do not cover)."""
        a, t = self.attacc, self.t
        tokens = -(-context // a.token_units)
        dims = -(-head_dim * bpe // (a.dim_banks * self.column_bytes))
        cols = tokens * dims                       # columns per bank, for K and for V each
        rows = 2 * -(-cols // self.columns_per_row)
        macs = 2 * cols * queries
        streams = macs * spacing + (rows - 2) * (t.RTP_L + t.RP + t.RCD - spacing)
        return streams, -(-tokens // 16), dims, macs

    def attacc_overlap(self, context: int) -> int:
        """Cycles two instances on one channel save by overlapping (AttAcc's head pairs): one's
        probability broadcasts and ``pair_overlap`` more."""
        a = self.attacc
        tokens = -(-context // a.token_units)
        return -(-tokens // 16) * a.per_score_group + a.pair_overlap

    def attacc_tail(self, context: int, head_dim: int, queries: int, bpe: int, spacing: int,
                    paired: bool) -> int:
        """Cycles of one instance in AttAcc's schedule after its last row activation: RCD, the
        context MACs of its last V row and the barriers of the context groups that end in it.
        ``paired``: the instance is the second of a pair on its channel; AttAcc's trace
        generator (as published) issues the first instance's context MACs again for the second,
        so when V fits in one row the second needs no ACT and the tail is both context phases."""
        a, t = self.attacc, self.t
        tokens = -(-context // a.token_units)
        dims = -(-head_dim * bpe // (a.dim_banks * self.column_bytes))
        cols = tokens * dims                       # V columns per bank, token-major per group
        cpr = self.columns_per_row
        before = (-(-cols // cpr) - 1) * cpr       # V columns in the rows before the last
        if paired and before == 0:
            macs, groups = 2 * cols * queries, 2 * dims
        else:
            macs, groups = (cols - before) * queries, dims - before // tokens
        return t.RCD + macs * spacing + groups * a.per_context_group

    def refresh_tail(self, instances: list[tuple[int, int, int]], bpe: int,
                     power_constrained: bool):
        """``tail(job, paired)`` for ``round_robin``: cycles of instance ``instances[job]`` =
        ``(context, head_dim, queries)`` after its last ACT, alone or as the second of a pair;
        None when every refresh that falls due is charged (``refresh: every``)."""
        tail = self._tails(bpe, power_constrained)
        if tail is None:
            return None
        return lambda job, paired: tail(*instances[job], paired)

    def _tails(self, bpe: int, power_constrained: bool):
        """``tail(context, head_dim, queries, paired)``: ``attacc_tail`` memoized like the
        instances' cycles (a step asks one tail per channel, and consecutive steps ask mostly
        the same ones); None under ``refresh: every``."""
        if self.refresh != "until_last_activate":
            return None
        s = self.spacing(power_constrained)
        memo = self._memo.get(("tail", bpe, s))
        if memo is None:
            memo = self._memo[("tail", bpe, s)] = {}

        def tail(context: int, head_dim: int, queries: int, paired: bool) -> int:
            key = (context, head_dim, queries, paired)
            hit = memo.get(key)
            if hit is None:
                hit = memo[key] = self.attacc_tail(int(context), int(head_dim), int(queries), bpe,
                                                   s, paired)
            return hit
        return tail

    def unit_tails(self, head_dim: int, bpe: int, power_constrained: bool):
        """``tail(units, queries, job, paired)``: ``refresh_tail``'s tail of the instances with
        contexts of ``units[job]`` x ``context_unit`` keys (all a tail depends on) and
        ``queries[job]`` query rows; None under ``refresh: every``. Built once per instance
        shape: a step binds its own ``units`` and ``queries`` (``functools.partial``), which
        costs less than building closures for tails that ``round_robin`` seldom asks."""
        tail = self._tails(bpe, power_constrained)
        if tail is None:
            return None
        unit = self.context_unit

        def unit_tail(units, queries, job: int, paired: bool) -> int:
            return tail(units[job] * unit, head_dim, queries[job], paired)
        return unit_tail

    def command_attention(self, context: int, head_dim: int, queries: int, bpe: int,
                          power_constrained: bool) -> tuple[int, int]:
        """Cycles and PE column reads of one attention instance (one request x one KV head;
        ``queries`` = query tokens x query heads per KV head) on all banks of one channel.

        K is stored token-major (each bank holds whole key vectors of some tokens, so a bank
        computes complete scores); V is stored dimension-major (each bank holds some dimensions
        of every token), so the context phase needs every probability in every bank but no
        partial sums, unless there are more banks than dimensions, in which case tokens are
        split too and partial sums are read out."""
        s = self.spacing(power_constrained)
        B = self.banks_per_channel
        cb = self.column_bytes
        k_cols = -(-(-(-context // B)) * head_dim * bpe // cb)
        dim_slots = min(head_dim, B)
        token_groups = B // dim_slots
        v_cols = -(-(-(-head_dim // dim_slots) * -(-context // token_groups)) * bpe // cb)
        scores = context * queries
        out_bytes = head_dim * queries * token_groups * (self.partial_sum_bytes if token_groups > 1 else bpe)
        between = (self.readout(scores * bpe) + -(-scores // self.softmax_elements_per_cycle)
                   + self.broadcast(scores * bpe))
        query = self.broadcast(queries * head_dim * bpe)
        v_drain, v_tail = self.mac_stream(v_cols, queries, s)
        out = self.readout(out_bytes)
        # The V rows close while the outputs are read and the next instance's query (assumed
        # the same size) is written; what is left of the tail is charged to this instance.
        cycles = (query + self.stream_then(self.mac_stream(k_cols, queries, s), between)
                  + v_drain + out + max(0, v_tail - out - query))
        return cycles, (k_cols + v_cols) * queries * B

    def attention_instance(self, context: int, head_dim: int, queries: int, bpe: int,
                           power_constrained: bool) -> PimWork:
        """One instance (see ``attention_cycles``)."""
        cycles, reads = self.attention_many([context], head_dim, [queries], bpe, power_constrained)
        return PimWork(cycles[0], reads)

    @property
    def context_unit(self) -> int:
        """Contexts an instance cannot tell apart: its cycles, PE column reads, refresh tail and
        pair overlap depend on a context L only through ceil(L / context_unit) (AttAcc's
        schedule lays keys out in whole token units; the command model sees every L)."""
        return self.attacc.token_units if self.attacc is not None else 1

    def attention_many(self, contexts, head_dim: int, queries, bpe: int,
                       power_constrained: bool) -> tuple[list[int], int]:
        """Cycles of each instance (``contexts[i]`` keys, ``queries[i]`` query rows) and their
        total PE column reads (``attention_units``)."""
        unit = self.context_unit
        return self.attention_units([-(-int(L) // unit) for L in contexts], head_dim, queries,
                                    bpe, power_constrained)

    def attention_units(self, units, head_dim: int, queries, bpe: int,
                        power_constrained: bool) -> tuple[list[int], int]:
        """``attention_many`` of contexts given in ``context_unit``s (``units[i]`` of them),
        memoized per instance shape, each priced at the unit's longest context."""
        return self.unit_instances(head_dim, bpe, power_constrained)(units, queries)

    def unit_instances(self, head_dim: int, bpe: int, power_constrained: bool):
        """``instances(units, queries)``: ``attention_units(units, head_dim, queries, ...)``
        over its memo, for a caller that prices many steps of one instance shape. Plain
        Python: a step has few requests, for which a dict lookup each beats any numpy call
        (inline: a TLM pass looks up hundreds)."""
        memo = self._instance_memo(head_dim, bpe, power_constrained)
        get = memo.get

        def instances(units, queries) -> tuple[list[int], int]:
            cycles = []
            reads = 0
            for shape in zip(units, queries):
                hit = get(shape)
                if hit is None:
                    hit = self._new_instance(memo, shape, head_dim, bpe, power_constrained)
                cycles.append(hit[0])
                reads += hit[1]
            return cycles, reads
        return instances

    def uniform_instances(self, head_dim: int, bpe: int, power_constrained: bool):
        """``instances(units, rows)``: ``unit_instances(...)(units, [rows] * len(units))``, for
        steps whose instances all have ``rows`` query rows (a draft step, a pass of one query
        per request): looked up by context units alone, an int key per request instead of a
        (units, rows) pair built and hashed for each."""
        instance = self.unit_instance(head_dim, bpe, power_constrained)
        by_rows = self._memo.setdefault(("rows", head_dim, bpe, power_constrained), {})

        def instances(units, rows: int) -> tuple[list[int], int]:
            table = by_rows.get(rows)
            if table is None:
                table = by_rows[rows] = {}
            get = table.get
            cycles = []
            reads = 0
            for u in units:
                hit = get(u)
                if hit is None:
                    hit = table[u] = instance(u, rows)
                cycles.append(hit[0])
                reads += hit[1]
            return cycles, reads
        return instances

    def unit_instance(self, head_dim: int, bpe: int, power_constrained: bool):
        """``instance(units, queries)``: (cycles, PE column reads) of one instance over
        ``units`` x ``context_unit`` keys with ``queries`` query rows, from
        ``attention_units``' memo."""
        memo = self._instance_memo(head_dim, bpe, power_constrained)

        def instance(units: int, queries: int) -> tuple[int, int]:
            hit = memo.get((units, queries))
            if hit is None:
                hit = self._new_instance(memo, (units, queries), head_dim, bpe, power_constrained)
            return hit
        return instance

    def _instance_memo(self, head_dim: int, bpe: int, power_constrained: bool) -> dict:
        key = (head_dim, bpe, power_constrained)
        memo = self._memo.get(key)
        if memo is None:
            memo = self._memo[key] = {}
        return memo

    def _new_instance(self, memo: dict, shape: tuple[int, int], head_dim: int, bpe: int,
                      power_constrained: bool) -> tuple[int, int]:
        """An instance of ``shape`` = (context units, query rows), priced at the unit's
        longest context, into ``memo``."""
        units, queries = shape
        hit = memo[shape] = self.attention_cycles(int(units) * self.context_unit, head_dim,
                                                  int(queries), bpe, power_constrained)
        return hit

    def attention_channels(self, instances: list[tuple[int, int, int]], bpe: int,
                           power_constrained: bool, channels: int | None = None) -> "ChannelLoad":
        """``instances`` = ``[(context, head_dim, queries), ...]`` placed round-robin on
        ``channels`` channels (default: this stack's), in order."""
        by_dim: dict[int, list[int]] = {}
        for i, (_, d, _) in enumerate(instances):
            by_dim.setdefault(d, []).append(i)
        cycles = np.zeros(len(instances), dtype=np.int64)
        reads = 0
        for d, idx in by_dim.items():
            c, r = self.attention_many([instances[i][0] for i in idx], d,
                                       [instances[i][2] for i in idx], bpe, power_constrained)
            cycles[idx] = c
            reads += r
        return self.round_robin(cycles, channels or self.channels, reads,
                                odd_extra=self.pair_extra([c for c, _, _ in instances]),
                                tail=self.refresh_tail(instances, bpe, power_constrained))

    def round_robin(self, cycles, channels: int, column_reads: int,
                    repeat: int = 1, odd_extra: int = 0, tail=None) -> "ChannelLoad":
        """Jobs ``cycles[0]`` x ``repeat``, then ``cycles[1]`` x ``repeat``, ...: job ``i`` of
        that sequence runs on channel ``i mod channels``, jobs of one channel one after
        another; the slowest channel, refresh included, sets the time. A channel with an odd
        number of jobs takes ``odd_extra`` more (its last job runs without a partner).
        ``tail(r, paired)``: cycles of job ``cycles[r]`` after its last row activation, when it
        is a channel's last job (``paired``: that channel has an even number of jobs), for
        ``with_refresh``; None: every refresh that falls due is charged."""
        n = len(cycles) * repeat
        if n == 0:
            return ChannelLoad(0, 0, 0, 0)
        refreshed, busiest = self.placed(cycles, channels, repeat, odd_extra, tail)
        return ChannelLoad(cycles=refreshed, busy_cycles=busiest,
                           channels_used=min(n, channels), column_reads=column_reads)

    def placed(self, cycles, channels: int, repeat: int, odd_extra: int, tail
               ) -> tuple[int, int]:
        """``(cycles, busy_cycles)`` of ``round_robin``'s ``ChannelLoad`` for at least one
        job: all a step's price needs of it."""
        loads = None
        if len(cycles) * repeat <= channels:
            busiest = int(max(cycles)) + odd_extra
        elif (groups := _channel_groups(len(cycles), channels, repeat)) is not None:
            take = cycles.__getitem__
            busiest = 0
            for jobs, odd in groups:
                load = sum(map(take, jobs)) + odd_extra * odd
                if load > busiest:
                    busiest = load
            busiest = int(busiest)
        else:
            loads = self._channel_loads(cycles, channels, repeat, odd_extra)
            busiest = max(loads)
        refreshed = self.with_refresh(busiest)
        if tail is not None and refreshed > busiest:
            if loads is None:
                loads = self._channel_loads(cycles, channels, repeat, odd_extra)
            refreshed = self._refreshed_by_channel(loads, len(cycles), channels, repeat, tail)
        return refreshed, busiest

    def _refreshed_by_channel(self, loads: list[int], n_cycles: int, channels: int, repeat: int,
                              tail) -> int:
        """The slowest channel under ``round_robin``'s placement (``loads``: each used
        channel's, ``_channel_loads``), each with the refreshes that fall due before its last
        job's last row activation."""
        n = n_cycles * repeat
        # Busiest channels first, stopping where no channel left can be slower: a tail only
        # delays refreshes (with_refresh(load, tail) <= with_refresh(load)), and
        # with_refresh(load) never decreases with the load.
        slowest = 0
        for c in sorted(range(len(loads)), key=loads.__getitem__, reverse=True):
            if self.with_refresh(loads[c]) <= slowest:
                break
            count = (n - 1 - c) // channels + 1            # jobs on channel c
            last = (c + (count - 1) * channels) // repeat  # index into ``cycles`` of its last job
            slowest = max(slowest, self.with_refresh(loads[c], tail(last, count % 2 == 0)))
        return slowest

    @staticmethod
    def _channel_loads(cycles, channels: int, repeat: int, odd_extra: int) -> list[int]:
        """Each used channel's summed job cycles under ``round_robin``'s placement, plus
        ``odd_extra`` if it runs an odd number of jobs."""
        if repeat == 1 and len(cycles) <= channels and type(cycles) is list:
            # A job per channel, each run once: the loads are the jobs' own cycles (a TLM pass
            # of one KV head per device, when refreshes make round_robin ask every channel),
            # listed in a quarter of the time of a product with an identity matrix.
            return [c + odd_extra for c in cycles]
        copies, odd = _placement(len(cycles), channels, repeat)
        return (copies @ np.asarray(cycles, dtype=np.int64) + odd_extra * odd).tolist()

    def pair_extra(self, contexts) -> int:
        """What a channel's unpaired last instance gives back (0 but for AttAcc's schedule)."""
        if self.attacc is None:
            return 0
        # attacc_overlap never decreases with the context: the longest gives the most back.
        return self.attacc_overlap(int(max(contexts))) // 2

    # --- FC (GEMV) ------------------------------------------------------------------------

    @lru_cache(maxsize=65536)
    def gemv(self, tokens: int, k: int, n: int, bpe: int, stacks: int,
             power_constrained: bool) -> "GemvWork":
        """``tokens`` products with a ``k x n`` weight stored over all banks of ``stacks``
        stacks: output rows spread over the banks (a bank holds whole rows, so it produces
        complete dot products); with fewer rows than banks the input dimension is split
        too and each slice's partial sums are read out. Every channel does the same work."""
        s = self.spacing(power_constrained)
        banks = self.banks * stacks
        if n >= banks:
            k_split, rows_per_bank = 1, -(-n // banks)
        else:
            k_split = max(1, min(banks // n, k // self.lanes))
            rows_per_bank = 1
        k_slice = -(-k // k_split)
        cols = rows_per_bank * -(-k_slice * bpe // self.column_bytes)
        results_per_channel = self.banks_per_channel * rows_per_bank * tokens
        out_bytes = self.partial_sum_bytes if k_split > 1 else bpe
        # Each channel receives the input slices its banks need: all of x unless k is split.
        x_bytes = tokens * min(k, k_slice * self.banks_per_channel) * bpe
        cycles = self.broadcast(x_bytes) + self.stream_then(
            self.mac_stream(cols, tokens, s), self.readout(results_per_channel * out_bytes))
        return GemvWork(cycles=self.with_refresh(cycles),
                        column_reads=cols * tokens * banks,
                        k_split=k_split,
                        result_bytes=n * k_split * tokens * out_bytes)


class ChannelLoad(NamedTuple):
    """``round_robin``'s result (a named tuple: one is made for every new step priced)."""

    cycles: int           # slowest channel, refresh included
    busy_cycles: int      # slowest channel without refresh
    channels_used: int
    column_reads: int


@dataclass(frozen=True)
class GemvWork:
    cycles: int
    column_reads: int
    k_split: int
    result_bytes: int     # outputs (or partial sums) leaving the stacks


@loader
def load_pim(name: str = "hbm3_pim", calibration: str = "physical", *,
             configs: Configs = BASE) -> PimStack:
    """The stack ``configs/hardware/<name>.yaml`` with its PE from ``pe: <file>``, under
    ``calibration``."""
    path = config_path("hardware", name)
    data = calibrated(configs.yaml(path), calibration, source=path)
    g = lambda d, k, kind=int, prefix="": get(d, k, kind, source=path, prefix=prefix, positive=True)
    org = get(data, "organization", dict, source=path)
    orgv = {k: g(org, k, prefix="organization") for k in
            ("channels", "pseudo_channels", "stack_ids", "bank_groups", "banks_per_group")}
    timing = get(data, "timing", dict, source=path)
    tv = {k: g(timing, k, prefix="timing") for k in TIMING_KEYS}
    tck_ps = g(data, "tck_ps")
    rfc = math.ceil(g(timing, "RFC_ns", float, prefix="timing") * 1000 / tck_ps)
    pim = get(data, "pim", dict, source=path)
    pe_path = config_path("hardware", get(data, "pe", str, source=path))
    pe = configs.yaml(pe_path)
    pe_get = lambda k: get(pe, k, int, source=pe_path, positive=True)
    column_bytes, lanes = pe_get("column_bytes"), pe_get("lanes")
    row_bytes = g(data, "row_bytes")
    if row_bytes % column_bytes:
        raise ConfigError(f"{path}: row_bytes ({row_bytes}) must be a multiple of the PE's "
                          f"column_bytes ({column_bytes}, {pe_path})")
    pin = g(data, "pin_rate_gbps", float)
    io_bits = g(data, "io_bits")
    mac_sids = g(pim, "mac_stack_ids", prefix="pim")
    if mac_sids > orgv["stack_ids"] or orgv["stack_ids"] % mac_sids:
        raise ConfigError(f"{path}: pim.mac_stack_ids: expected a divisor of organization.stack_ids "
                          f"({orgv['stack_ids']}), found {mac_sids}")
    # Banks one all-bank command drives; other stack IDs' banks wait their turn, so for timing
    # a channel behaves as if all its data sat in these banks.
    bpc = orgv["pseudo_channels"] * mac_sids * orgv["bank_groups"] * orgv["banks_per_group"]
    attacc = _attacc_schedule(pim, orgv, path)
    refresh = get(pim, "refresh", str, source=path, prefix="pim", default="every")
    if refresh not in ("every", "until_last_activate"):
        raise ConfigError(f"{path}: pim.refresh: expected 'every' or 'until_last_activate', "
                          f"found {refresh!r}")
    if refresh == "until_last_activate" and attacc is None:
        raise ConfigError(f"{path}: pim.refresh: 'until_last_activate' needs the instance tails "
                          "of pim.attention_schedule 'attacc'")
    return PimStack(
        name=name, tck_ps=tck_ps, channels=orgv["channels"], pseudo_channels=orgv["pseudo_channels"],
        banks_per_channel=bpc, row_bytes=row_bytes, column_bytes=column_bytes, lanes=lanes,
        # last MAC -> accumulator, then a DRAIN command -> result on the PE's output
        pe_latency=pe_get("pipeline_latency_cycles"),  # the DRAIN overlaps the pipeline (bank_pe.yaml)
        capacity_bytes=int(g(data, "capacity_gb", float) * 2**30),
        external_bandwidth=io_bits * pin * 1e9 / 8,
        t=Timing(RCD=tv["RCD"], RP=tv["RP"], RAS=tv["RAS"], RC=tv["RC"], RTP_L=tv["RTP_L"],
                 CCD_S=tv["CCD_S"], CCD_L=tv["CCD_L"], REFI=tv["REFI"], RFC=rfc),
        mac_spacing=g(pim, "mac_spacing", prefix="pim"),
        mac_spacing_power=g(pim, "mac_spacing_power_constrained", prefix="pim"),
        softmax_elements_per_cycle=g(pim, "softmax_elements_per_cycle", prefix="pim"),
        partial_sum_bytes=g(pim, "partial_sum_bytes", prefix="pim"),
        attacc=attacc, refresh=refresh)


def _attacc_schedule(pim: dict, org: dict, path) -> "AttaccSchedule | None":
    model = get(pim, "attention_schedule", str, source=path, prefix="pim", default="command")
    if model == "command":
        return None
    if model != "attacc":
        raise ConfigError(f"{path}: pim.attention_schedule: expected 'command' or 'attacc', "
                          f"found {model!r}")
    sched = get(pim, "attacc_schedule", dict, source=path, prefix="pim")
    c = lambda k: get(sched, k, int, source=path, prefix="pim.attacc_schedule")
    for key in ("per_score_group", "per_context_group", "fixed", "pair_overlap"):
        if c(key) < 0:
            raise ConfigError(f"{path}: pim.attacc_schedule.{key}: expected >= 0 cycles")
    return AttaccSchedule(
        token_units=org["pseudo_channels"] * org["stack_ids"] * org["bank_groups"],
        dim_banks=org["banks_per_group"], per_score_group=c("per_score_group"),
        per_context_group=c("per_context_group"), fixed=c("fixed"), pair_overlap=c("pair_overlap"))


def check_power(flag) -> bool:
    if not isinstance(flag, bool):
        raise SaddleError(f"power_constrained must be true or false, found {flag!r}")
    return flag
