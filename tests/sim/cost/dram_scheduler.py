"""A command-level scheduler of one HBM3-PIM channel, for checking the analytic model.

It issues every command (column write, all-bank ACT, MAC, PRE, REF, column read) one by one,
in order, each at the earliest cycle all timing constraints allow, and logs it. The analytic
model in sim/cost/pim.py works per row and per phase in closed form; this one knows nothing of
rows or phases beyond the command sequence the data layout produces. Refresh differs on
purpose: here an all-bank REF is issued at the first point after it falls due where no row is
open, as a controller would; the analytic model only counts how many fall due.
"""
from __future__ import annotations

from dataclasses import dataclass, field

NEVER = -(10**9)


@dataclass
class ChannelScheduler:
    stack: object                  # sim.cost.pim.PimStack
    spacing: int                   # MAC-to-MAC tCK
    refresh: bool = True
    # HBM3 has separate row and column command buses: operand transfers to and from the PE
    # registers (column bus) need not wait for the last PRE and RP (row bus), only for the PE
    # pipeline; the next ACT still obeys RP and RC. False: every phase waits for closed rows.
    overlap: bool = True
    log: list = field(default_factory=list)

    def __post_init__(self):
        self.now = 0               # no command issues before this cycle (in-order issue)
        self.last_act = self.last_mac = self.last_pre = NEVER
        self.row_open = False
        self.next_ref = self.stack.t.REFI
        self.refreshes = 0

    def _issue(self, cmd: str, at: int) -> int:
        self.log.append((at, cmd))
        self.now = at + 1          # one command per cycle on the command bus
        return at

    def _refresh_if_due(self) -> None:
        t = self.stack.t
        while self.refresh and not self.row_open and self.now >= self.next_ref:
            at = self._issue("REF", max(self.now, self.last_pre + t.RP))
            self.now = at + t.RFC
            self.next_ref += t.REFI
            self.refreshes += 1

    # --- commands ----------------------------------------------------------------------

    def act(self) -> None:
        t = self.stack.t
        self._refresh_if_due()
        self.last_act = self._issue("ACT", max(self.now, self.last_pre + t.RP, self.last_act + t.RC))
        self.row_open = True

    def mac(self) -> None:
        t = self.stack.t
        assert self.row_open, "MAC needs an open row"
        self.last_mac = self._issue("MAC", max(self.now, self.last_act + t.RCD, self.last_mac + self.spacing))

    def pre(self) -> None:
        t = self.stack.t
        self.last_pre = self._issue("PRE", max(self.now, self.last_act + t.RAS, self.last_mac + t.RTP_L))
        self.row_open = False

    def write_columns(self, columns: int) -> None:
        """Broadcast ``columns`` 32-B columns to the PEs: one per CCD_S."""
        at = self.now
        for _ in range(columns):
            self._issue("WR", at)
            at += self.stack.t.CCD_S
        self.now = max(self.now, at)

    def read_columns(self, columns: int) -> None:
        """Read ``columns`` 32-B columns, alternating over the pseudo-channels' data buses."""
        pcs = self.stack.pseudo_channels
        start = self.now
        free = [start] * pcs
        for i in range(columns):
            at = free[i % pcs]
            self.log.append((at, f"RD{i % pcs}"))
            free[i % pcs] = at + self.stack.t.CCD_S
        self.now = max(free) if columns else self.now

    def busy(self, cycles: int) -> None:
        """The buffer die computes (softmax) while the banks wait."""
        self.now += cycles

    def barrier(self) -> None:
        """Phase boundary: rows precharged, ACT-to-ACT satisfied, PE pipeline drained."""
        t = self.stack.t
        if self.last_act != NEVER:
            drained = self.last_mac + self.stack.pe_latency
            closed = drained if self.overlap else max(self.last_pre + t.RP, self.last_act + t.RC)
            self.now = max(self.now, closed, drained)
        self._refresh_if_due()

    # --- jobs --------------------------------------------------------------------------

    def gemv_stream(self, bank_bytes: list[int], macs_per_column: int) -> None:
        """Stream the columns every bank holds (``bank_bytes`` per bank) through the PEs in
        lock-step (all-bank commands address the same column in every bank)."""
        cb, cpr = self.stack.column_bytes, self.stack.columns_per_row
        columns = max(-(-b // cb) for b in bank_bytes)
        for c in range(columns):
            if c % cpr == 0:
                if self.row_open:
                    self.pre()
                self.act()
            for _ in range(macs_per_column):
                self.mac()
        if self.row_open:
            self.pre()
            if self.overlap:   # the column bus is free again right after the last MAC
                self.now = self.last_mac + 1
        self.barrier()

    def attention_instance(self, context: int, head_dim: int, queries: int, bpe: int) -> None:
        """Commands of one instance; the layout is derived per bank: K tokens dealt to the banks
        round-robin, V dimensions dealt to the banks round-robin (each bank keeps every token
        of its dimensions)."""
        banks = self.stack.banks_per_channel
        cb = self.stack.column_bytes
        assert head_dim >= banks, "this checker covers heads with at least one dimension per bank"
        k_tokens = [len(range(b, context, banks)) for b in range(banks)]
        v_dims = [len(range(b, head_dim, banks)) for b in range(banks)]
        self.write_columns(-(-queries * head_dim * bpe // cb))
        self.gemv_stream([n * head_dim * bpe for n in k_tokens], queries)
        self.read_columns(-(-context * queries * bpe // cb))
        self.busy(-(-context * queries // self.stack.softmax_elements_per_cycle))
        self.write_columns(-(-context * queries * bpe // cb))
        self.gemv_stream([n * context * bpe for n in v_dims], queries)
        self.read_columns(-(-head_dim * queries * bpe // cb))
        self.barrier()
