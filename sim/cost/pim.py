"""HBM3-PIM timing model: GEMV and attention on bank PEs priced from the DRAM timing
parameters (every assumption: sim/cost/README.md, "HBM3-PIM"). PIM commands are all-bank
commands of one channel: an ACT opens the same row in all ``banks_per_channel`` banks, and each
MAC command (``mac_spacing`` tCK apart, more under the power constraint) reads one column of the
open row in every bank for its PE. Row and column commands have separate buses. Channels work
independently; fewer instances than channels leave channels idle.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from common.config import config_path, get
from common.errors import ConfigError, SaddleError
from sim.config import BASE, Configs, calibrated, loader
from sim.model import choice

TIMING_KEYS = ("CL", "RCD", "RP", "RAS", "RC", "WR", "RTP_L", "CCD_S", "CCD_L", "RRD_S", "RRD_L",
               "FAW", "REFI")      # checked; ``Timing`` keeps those the model uses
ORGANIZATION = ("channels", "pseudo_channels", "stack_ids", "bank_groups", "banks_per_group")
ATTACC_COUNTS = ("per_score_group", "per_context_group", "fixed", "pair_overlap")


def _channel_groups(n_cycles: int, channels: int, repeat: int
                    ) -> tuple[tuple[tuple[int, ...], int], ...] | None:
    """A round-robin placement's channels as ``(job indices, parity of their count)``, one per
    distinct job set but those another dominates (a superset of odd count, or of even count
    when the set's is even), so the slowest entry is the slowest channel. None when the entries
    hold more jobs than there are jobs and channels (summing every channel is cheaper then)."""
    # A job's copies are consecutive, so a channel runs one job twice only if it has more
    # copies than there are channels: sets suffice then, multisets (Counters) otherwise.
    bag: Callable[[tuple[int, ...]], Any] = Counter if repeat > channels else frozenset
    sets = sorted({tuple(i // repeat for i in range(c, n_cycles * repeat, channels))
                   for c in range(channels)}, key=len, reverse=True)
    kept: list[tuple[tuple[int, ...], int, Any]] = []
    for s in sets:
        mine = bag(s)
        if not any(len(s) < len(k) and mine <= theirs and (len(s) % 2 == 0 or odd)
                   for k, odd, theirs in kept):
            kept.append((s, len(s) % 2, mine))
    if sum(len(s) for s, _, _ in kept) > n_cycles + channels:
        return None
    return tuple((s, odd) for s, odd, _ in kept)


class ChannelPlacement:
    """Jobs ``cycles[0]`` x ``repeat``, then ``cycles[1]`` x ``repeat``, ...: job ``i`` of that
    sequence runs on channel ``i mod channels``, the jobs of a channel one after another, and
    the slowest channel, refresh included, sets the time. A channel with an odd number of jobs
    takes ``odd_extra`` more (its last job runs without a partner). Built once per (jobs,
    channels, repeat) and kept by its user."""

    def __init__(self, n_cycles: int, channels: int, repeat: int) -> None:
        self.n_cycles, self.channels, self.repeat = n_cycles, channels, repeat
        self.spread = n_cycles * repeat <= channels      # at most one job per channel
        self.groups = None if self.spread else _channel_groups(n_cycles, channels, repeat)
        self._copies: tuple[np.ndarray, np.ndarray] | None = None

    def loads(self, cycles: Sequence[int], odd_extra: int) -> list[int]:
        """Each used channel's summed job cycles, plus ``odd_extra`` if it runs an odd number."""
        if self.repeat == 1 and self.spread:
            return [c + odd_extra for c in cycles]
        if self._copies is None:      # copies[c, r]: copies of job r on channel c
            jobs = np.arange(self.n_cycles * self.repeat)
            copies = np.zeros((min(len(jobs), self.channels), self.n_cycles), dtype=np.int64)
            np.add.at(copies, (jobs % self.channels, jobs // self.repeat), 1)
            self._copies = copies, copies.sum(axis=1) % 2
        copies, odd = self._copies
        return (copies @ np.asarray(cycles, dtype=np.int64) + odd_extra * odd).tolist()

    def placed(self, cycles: Sequence[int], odd_extra: int, refresh: Callable[..., int],
               tail: Callable[[int, bool], int] | None = None) -> tuple[int, int]:
        """``(cycles, busy cycles)`` of the slowest channel with and without refresh (at least
        one job). ``refresh(busy, tail)``: ``PimStack.with_refresh``. ``tail(r, paired)``:
        cycles of job ``r`` after its last row activation when it ends a channel (``paired``:
        of an even count); None: every refresh that falls due is charged."""
        loads = None
        if self.spread:
            busiest = int(max(cycles)) + odd_extra
        elif self.groups is None:
            busiest = max(loads := self.loads(cycles, odd_extra))
        else:       # a typed loop: compiled, sum(map(...)) is two builtin lookups and calls
            busiest, listed = 0, cycles if isinstance(cycles, list) else [int(c) for c in cycles]
            for jobs, odd in self.groups:
                load = odd_extra * odd
                for job in jobs:
                    load += listed[job]
                if load > busiest:
                    busiest = load
        refreshed = refresh(busiest)
        if tail is None or refreshed == busiest:
            return refreshed, busiest
        if loads is None:
            loads = self.loads(cycles, odd_extra)
        n, channels = self.n_cycles * self.repeat, self.channels
        # Busiest channels first, stopping where no channel left can be slower: a tail only
        # delays refreshes, and refresh(load) never decreases with the load.
        slowest = 0
        for c in sorted(range(len(loads)), key=loads.__getitem__, reverse=True):
            if refresh(loads[c]) <= slowest:
                break
            count = (n - 1 - c) // channels + 1            # jobs on channel c
            last = (c + (count - 1) * channels) // self.repeat
            slowest = max(slowest, refresh(loads[c], tail(last, count % 2 == 0)))
        return slowest, busiest


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
    t: Timing
    mac_spacing: int
    mac_spacing_power: int
    softmax_elements_per_cycle: int
    partial_sum_bytes: int
    attacc: AttaccSchedule | None = None    # None: the command model
    refresh: str = "every"      # or "until_last_activate" (``with_refresh``)

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
        """ACT to the next possible ACT for one row that receives ``macs`` MAC commands: the
        first MAC RCD after the ACT, PRE no earlier than RAS after it and RTP_L after the last
        MAC, RP after the PRE, and RC from ACT to ACT."""
        t = self.t
        pre = max(t.RAS, t.RCD + (macs - 1) * spacing + t.RTP_L)
        return max(t.RC, pre + t.RP)

    def mac_stream(self, columns: int, macs_per_column: int, spacing: int) -> tuple[int, int]:
        """``(drain, tail)`` of streaming ``columns`` columns of every bank through the PEs,
        each used by ``macs_per_column`` MAC commands while its row is open: first ACT to the
        last result out of the PE pipeline, and how much longer until the next ACT may issue
        (the last row's PRE, RP and RC; operand transfers after the stream overlap it)."""
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

    def broadcast(self, nbytes: int) -> int:
        """Write the same ``nbytes`` into every bank PE of a channel."""
        return -(-nbytes // self.column_bytes) * self.t.CCD_S

    def readout(self, nbytes: int) -> int:
        """Read ``nbytes`` spread over the channel's banks out over its pseudo-channels."""
        return -(-nbytes // (self.column_bytes * self.pseudo_channels)) * self.t.CCD_S

    def with_refresh(self, busy: int, tail: int = 0) -> int:
        """``busy`` cycles of work stretched by the refreshes that delay it: one all-bank REF
        falls due every REFI from the start and one that delays the work costs RFC. A REF holds
        back only the next ACT, so only one that falls due no later than the last ACT delays
        the work (Ramulator2's controller); ``tail``: cycles after that ACT. ``tail`` = 0
        charges every REF that falls due while the work runs (``refresh: every``)."""
        t = self.t
        last_act = busy - tail
        refreshes = last_act // t.REFI
        while (more := (last_act + refreshes * t.RFC) // t.REFI) != refreshes:
            refreshes = more
        return busy + refreshes * t.RFC

    # --- attention ------------------------------------------------------------------------

    def attention_instance(self, context: int, head_dim: int, queries: int, bpe: int,
                           power_constrained: bool) -> PimWork:
        """Cycles and PE column reads of one attention instance (one request x one KV head;
        ``queries`` = query tokens x query heads per KV head) on all banks of one channel."""
        price = self.command_attention if self.attacc is None else self.attacc_attention
        return PimWork(*price(context, head_dim, queries, bpe, power_constrained))

    def command_attention(self, context: int, head_dim: int, queries: int, bpe: int,
                          power_constrained: bool) -> tuple[int, int]:
        """``attention_instance`` in the command model. K is stored token-major (a bank holds
        whole key vectors and computes complete scores); V dimension-major (a bank holds some
        dimensions of every token), so the context phase needs every probability in every bank
        but no partial sums, unless there are more banks than dimensions: then tokens are split
        too and partial sums are read out."""
        s = self.spacing(power_constrained)
        B = self.banks_per_channel
        cb = self.column_bytes
        keys_per_bank = -(-context // B)
        k_cols = -(-keys_per_bank * head_dim * bpe // cb)
        dim_slots = min(head_dim, B)
        token_groups = B // dim_slots
        v_cols = -(-(-(-head_dim // dim_slots) * -(-context // token_groups)) * bpe // cb)
        scores = context * queries
        out_bytes = head_dim * queries * token_groups * (self.partial_sum_bytes if token_groups > 1 else bpe)
        between = (self.readout(scores * bpe) + -(-scores // self.softmax_elements_per_cycle)
                   + self.broadcast(scores * bpe))
        query = self.broadcast(queries * head_dim * bpe)
        k_drain, k_tail = self.mac_stream(k_cols, queries, s)
        v_drain, v_tail = self.mac_stream(v_cols, queries, s)
        out = self.readout(out_bytes)
        # The operand moves after a stream overlap its tail; the V rows close while the outputs
        # are read and the next instance's query (assumed the same size) is written.
        cycles = (query + k_drain + max(between, k_tail) + v_drain + out
                  + max(0, v_tail - out - query))
        return cycles, (k_cols + v_cols) * queries * B

    def attacc_attention(self, context: int, head_dim: int, queries: int, bpe: int,
                         power_constrained: bool) -> tuple[int, int]:
        """``attention_instance`` as AttAcc's bank-level PIM runs it (its trace generator and
        Ramulator2's PIM controller): the streams of ``attacc_layout``, ``per_score_group`` for
        every 16 score columns (their probabilities broadcast back), ``per_context_group`` for
        every group of context MACs (a barrier), and ``fixed``. Two instances on one channel
        overlap (``attacc_overlap``): each is charged half of it (``round_robin`` gives an odd
        channel's last instance the other half back)."""
        a = self.attacc
        assert a is not None
        streams, groups, dims, macs = self.attacc_layout(context, head_dim, queries, bpe,
                                                         self.spacing(power_constrained))
        cycles = streams + groups * a.per_score_group + dims * a.per_context_group + a.fixed
        return cycles - self.attacc_overlap(context) // 2, macs * self.banks_per_channel

    def attacc_layout(self, context: int, head_dim: int, queries: int, bpe: int,
                      spacing: int) -> tuple[int, int, int, int]:
        """``(stream cycles, score groups, context groups, MAC commands)`` of one instance in
        AttAcc's layout: keys over the ``token_units``, a key's dimensions over the banks of a
        group and the PE lanes; a MAC command per column and query row, back to back, and a row
        change costing RTP_L + RP + RCD beyond the spacing."""
        a, t = self.attacc, self.t
        assert a is not None
        tokens = -(-context // a.token_units)                               # keys per unit
        dims = -(-head_dim * bpe // (a.dim_banks * self.column_bytes))      # columns per key
        cols = tokens * dims                       # columns per bank, for K and for V each
        rows = 2 * -(-cols // self.columns_per_row)
        macs = 2 * cols * queries
        streams = macs * spacing + (rows - 2) * (t.RTP_L + t.RP + t.RCD - spacing)
        return streams, -(-tokens // 16), dims, macs

    def attacc_overlap(self, context: int) -> int:
        """Cycles two instances on one channel save by overlapping (AttAcc's head pairs): one's
        probability broadcasts and ``pair_overlap`` more."""
        a = self.attacc
        assert a is not None
        return -(-context // (16 * a.token_units)) * a.per_score_group + a.pair_overlap

    def attacc_tail(self, context: int, head_dim: int, queries: int, bpe: int,
                    power_constrained: bool, paired: bool) -> int:
        """Cycles of one instance in AttAcc's schedule after its last row activation: RCD, the
        context MACs of its last V row and the barriers of the context groups that end in it.
        ``paired``: the second instance of a pair on its channel; AttAcc's trace generator issues
        the first's context MACs again for it, so when V fits in one row it needs no ACT and
        the tail is both context phases."""
        a = self.attacc
        assert a is not None
        tokens = -(-context // a.token_units)
        dims = -(-head_dim * bpe // (a.dim_banks * self.column_bytes))
        cols = tokens * dims                       # V columns per bank, token-major per group
        cpr = self.columns_per_row
        before = (-(-cols // cpr) - 1) * cpr       # V columns in the rows before the last
        if paired and before == 0:
            macs, groups = 2 * cols * queries, 2 * dims
        else:
            macs, groups = (cols - before) * queries, dims - before // tokens
        return self.t.RCD + macs * self.spacing(power_constrained) + groups * a.per_context_group

    @property
    def context_unit(self) -> int:
        """Contexts an instance cannot tell apart: its cycles, PE column reads, refresh tail and
        pair overlap depend on a context L only through ceil(L / context_unit) (AttAcc's
        schedule lays keys out in whole token units; the command model sees every L)."""
        return self.attacc.token_units if self.attacc is not None else 1

    def pair_extra(self, longest: int) -> int:
        """What a channel's unpaired last instance gives back (0 but for AttAcc's schedule),
        for instances of at most ``longest`` keys (the overlap grows with the context)."""
        return 0 if self.attacc is None else self.attacc_overlap(longest) // 2

    def attention_channels(self, instances: Sequence[tuple[int, int, int]], bpe: int,
                           power_constrained: bool, channels: int | None = None) -> ChannelLoad:
        """``instances`` = ``[(context, head_dim, queries), ...]`` placed round-robin on
        ``channels`` channels (default: this stack's), in order."""
        works = [self.attention_instance(L, d, q, bpe, power_constrained) for L, d, q in instances]
        tail = None
        if self.refresh == "until_last_activate":
            tail = lambda job, paired: self.attacc_tail(*instances[job], bpe, power_constrained,
                                                        paired)
        return self.round_robin([w.cycles for w in works], channels or self.channels,
                                sum(w.column_reads for w in works),
                                odd_extra=self.pair_extra(max((L for L, _, _ in instances), default=0)),
                                tail=tail)

    def round_robin(self, cycles: Sequence[int], channels: int, column_reads: int,
                    repeat: int = 1, odd_extra: int = 0,
                    tail: Callable[[int, bool], int] | None = None) -> ChannelLoad:
        """Jobs placed as ``ChannelPlacement`` places them; ``tail(r, paired)`` as there."""
        if len(cycles) * repeat == 0:
            return ChannelLoad(0, 0, 0, 0)
        refreshed, busiest = ChannelPlacement(len(cycles), channels, repeat).placed(
            cycles, odd_extra, self.with_refresh, tail)
        return ChannelLoad(cycles=refreshed, busy_cycles=busiest,
                           channels_used=min(len(cycles) * repeat, channels),
                           column_reads=column_reads)

    # --- FC (GEMV) ------------------------------------------------------------------------

    def gemv(self, tokens: int, k: int, n: int, bpe: int, stacks: int,
             power_constrained: bool) -> GemvWork:
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
        out_bytes = self.partial_sum_bytes if k_split > 1 else bpe
        # Each channel receives the input slices its banks need: all of x unless k is split.
        x_bytes = tokens * min(k, k_slice * self.banks_per_channel) * bpe
        drain, tail = self.mac_stream(cols, tokens, s)
        out = self.readout(self.banks_per_channel * rows_per_bank * tokens * out_bytes)
        cycles = self.broadcast(x_bytes) + drain + max(out, tail)
        return GemvWork(cycles=self.with_refresh(cycles), column_reads=cols * tokens * banks,
                        k_split=k_split, result_bytes=n * k_split * tokens * out_bytes)


class ChannelLoad(NamedTuple):
    """``round_robin``'s result."""

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
    org, timing, pim = (get(data, k, dict, source=path) for k in ("organization", "timing", "pim"))
    orgv = {k: g(org, k, prefix="organization") for k in ORGANIZATION}
    tv = {k: g(timing, k, prefix="timing") for k in TIMING_KEYS}
    tck_ps = g(data, "tck_ps")
    tv["RFC"] = math.ceil(g(timing, "RFC_ns", float, prefix="timing") * 1000 / tck_ps)
    p = lambda k: g(pim, k, prefix="pim")
    pe_path = config_path("hardware", get(data, "pe", str, source=path))
    pe = configs.yaml(pe_path)
    pe_get = lambda k: get(pe, k, int, source=pe_path, positive=True)
    column_bytes, row_bytes = pe_get("column_bytes"), g(data, "row_bytes")
    if row_bytes % column_bytes:
        raise ConfigError(f"{path}: row_bytes ({row_bytes}) must be a multiple of the PE's "
                          f"column_bytes ({column_bytes}, {pe_path})")
    mac_sids = p("mac_stack_ids")
    if mac_sids > orgv["stack_ids"] or orgv["stack_ids"] % mac_sids:
        raise ConfigError(f"{path}: pim.mac_stack_ids: expected a divisor of organization.stack_ids "
                          f"({orgv['stack_ids']}), found {mac_sids}")
    attacc = _attacc_schedule(pim, orgv, path)
    refresh = choice(pim, "refresh", ("every", "until_last_activate"), path, prefix="pim",
                     default="every")
    if refresh == "until_last_activate" and attacc is None:
        raise ConfigError(f"{path}: pim.refresh: 'until_last_activate' needs the instance tails "
                          "of pim.attention_schedule 'attacc'")
    return PimStack(
        name=name, tck_ps=tck_ps, channels=orgv["channels"], pseudo_channels=orgv["pseudo_channels"],
        # Banks one all-bank command drives; other stack IDs' banks wait their turn, so for
        # timing a channel behaves as if all its data sat in these banks.
        banks_per_channel=(orgv["pseudo_channels"] * mac_sids * orgv["bank_groups"]
                           * orgv["banks_per_group"]),
        row_bytes=row_bytes, column_bytes=column_bytes, lanes=pe_get("lanes"),
        # last MAC -> accumulator; the DRAIN command overlaps the pipeline (bank_pe.yaml)
        pe_latency=pe_get("pipeline_latency_cycles"),
        capacity_bytes=int(get(data, "capacity_gb", float, source=path, positive=True) * 2**30),
        t=Timing(**{k: tv[k] for k in Timing.__dataclass_fields__}),
        mac_spacing=p("mac_spacing"), mac_spacing_power=p("mac_spacing_power_constrained"),
        softmax_elements_per_cycle=p("softmax_elements_per_cycle"),
        partial_sum_bytes=p("partial_sum_bytes"), attacc=attacc, refresh=refresh)


def _attacc_schedule(pim: dict, org: dict, path) -> AttaccSchedule | None:
    if choice(pim, "attention_schedule", ("command", "attacc"), path, prefix="pim",
              default="command") == "command":
        return None
    sched = get(pim, "attacc_schedule", dict, source=path, prefix="pim")
    counts = {k: get(sched, k, int, source=path, prefix="pim.attacc_schedule")
              for k in ATTACC_COUNTS}
    for key, value in counts.items():
        if value < 0:
            raise ConfigError(f"{path}: pim.attacc_schedule.{key}: expected >= 0 cycles")
    units = org["pseudo_channels"] * org["stack_ids"] * org["bank_groups"]
    return AttaccSchedule(token_units=units, dim_banks=org["banks_per_group"], **counts)


def check_power(flag) -> bool:
    if not isinstance(flag, bool):
        raise SaddleError(f"power_constrained must be true or false, found {flag!r}")
    return flag
