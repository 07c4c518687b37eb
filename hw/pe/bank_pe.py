"""DRAM bank processing element: `lanes` FP16 multipliers, a binary32 adder tree, accumulators.

Interface (all widths for ``lanes`` = L, 16 in the shipped PE, see configs/hardware/bank_pe.yaml):

* ``cmd``: stream, always ready (the PE never stalls; the DRAM controller times the commands).
  Payload (`command_layout`): ``op`` (2 bits, `Op`: START 0, MAC 1, DRAIN 2), ``mode`` (1 bit,
  `Mode`: DOT 0, AXPY 1; read by START only), ``row`` (L x 16 bits: the column read from the row
  buffer), ``operand`` (L x 16 bits: the operands from the global buffer). Flattened payload bit
  order, LSB first: op[0:2], mode[2], row lane 0..L-1, operand lane 0..L-1.
* ``out``: stream, always ready (the consumer must take it), valid for one cycle per DRAIN.
  Payload (`result_layout`): ``fp32`` (L x 32 bits: the accumulators) and ``fp16`` (L x 16
  bits: the same rounded to binary16, the write-back format).

Dataflows: q.K^T sends one key-row column with the matching query slice as operand, MODE DOT,
one MAC per column of the key row (head_dim / L commands), then DRAIN: lane 0 is the score. GEMV
with row-major weights is the same dataflow (weight row, input-vector slice). p.V sends one
value-row column with p_j broadcast in every operand lane, MODE AXPY: lane l accumulates
sum_j p_j V[j, l]; GEMV with column-major weights (x_k broadcast) is this dataflow too. In DOT
mode lanes 1..L-1 stay +0.

Cycle behaviour (one command per cycle at most, every command takes one slot):

    cycle t       command on ``cmd`` (valid): the L multipliers work on it
    cycle t+1..4  adder tree (DOT), one level per cycle (``TREE_STAGES`` = 4: one binary32
                  adder between two registers); the products travel beside it (AXPY)
    cycle t+5     accumulate: START clears, MAC adds; a DRAIN is on ``out`` in this cycle
    cycle t+6     a MAC of cycle t is in the accumulators

so a DRAIN right after the last MAC (cycle t+1) returns it (in cycle t+6): pipeline latency
``PIPELINE_LATENCY`` = 6, drain latency ``DRAIN_LATENCY`` = 5, throughput L MACs per cycle.
With fewer than 16 lanes the tree's last stages only register, so the latencies are the same
for every lane count. The longest path is then one binary32 adder: in a tree stage, and in the
accumulation, a recurrence (acc = acc + addend, one command per cycle, every addition rounded
as the model's sequential order requires), which no register can split without changing the
arithmetic. Commands stay in order; the mode of each
command is the one latched by the latest START before it. Reset clears the accumulators and
selects DOT.

Arithmetic (bit-exact model: sim/pe_ref.py): exact binary32 products (hw/pe/fp16_mul.py); binary32
round-to-nearest-even additions (hw/pe/fp32_add.py), in the tree level by level in lane order,
((p0+p1)+(p2+p3))+..., then acc = acc + tree; binary16 output by round to nearest even
(hw/pe/fp16_round.py). NaN outputs are canonical (0x7FC00000 / 0x7E00).

Mutation testing: ``fault`` names one fault of ``BankPE.FAULTS`` or of a unit's ``FAULTS``
(hw/common/fault.py, ``saddle hw mutate``); None, the default, is the shipped design. The
multiplier's and the output rounding's faults hit lane ``FAULTY_LANE`` only, the adders' faults
every adder.
"""
from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hw.common.fault import checked_fault, fault_for
from hw.pe.fp16_mul import FP16Mul
from hw.pe.fp16_round import FP32ToFP16
from hw.pe.fp32_add import FP32Add
from sim.pe_ref import Mode, Op


def command_layout(lanes: int) -> data.StructLayout:
    return data.StructLayout({
        "op": 2,
        "mode": 1,
        "row": data.ArrayLayout(16, lanes),
        "operand": data.ArrayLayout(16, lanes),
    })


def result_layout(lanes: int) -> data.StructLayout:
    return data.StructLayout({
        "fp32": data.ArrayLayout(32, lanes),
        "fp16": data.ArrayLayout(16, lanes),
    })


# The lane of the one-lane faults (every PE the tests build has at least 4 lanes).
FAULTY_LANE = 1


class BankPE(wiring.Component):
    """The bank PE; `lanes` must be a power of two (16 in the shipped design)."""

    TREE_STAGES = 4                         # cycles of the adder tree: log2 of the largest lane count
    PIPELINE_LATENCY = TREE_STAGES + 2      # multiply, tree, accumulate: last MAC -> result on out
    DRAIN_LATENCY = TREE_STAGES + 1         # DRAIN on cmd -> result on out
    FAULTS = {
        "acc_not_cleared": f"bank PE: START does not clear lane {FAULTY_LANE}'s accumulator",
        "tree_order": "bank PE: the adder tree pairs lane i with lane i + lanes/2 at its first level "
                      "(the model: lane 2i with 2i + 1)",
        "drain_early": "bank PE: a DRAIN shows the accumulators one cycle early, before the last MAC is in",
        "start_mode_from_register": "bank PE: a START's own stage-1 mode is the latched register, not its "
                                    "mode field",
    }
    UNITS = (FP16Mul, FP32Add, FP32ToFP16)      # the unit classes a fault is passed on to

    def __init__(self, lanes: int = 16, *, fault: str | None = None):
        if lanes < 1 or lanes & (lanes - 1) or lanes > 1 << self.TREE_STAGES:
            raise ValueError(f"lanes must be a power of two up to {1 << self.TREE_STAGES}, got {lanes}")
        self.lanes = lanes
        self.fault = checked_fault(fault, BankPE, *self.UNITS)
        super().__init__({
            "cmd": In(stream.Signature(command_layout(lanes), always_ready=True)),
            "out": Out(stream.Signature(result_layout(lanes), always_ready=True)),
        })

    def elaborate(self, platform):
        m = Module()
        lanes = self.lanes
        cmd = self.cmd.payload

        # Stage 1: multiply. Each command carries the mode in force, so that commands of an
        # old and a new accumulation may follow each other back to back.
        mode = Signal(1, init=Mode.DOT)
        with m.If(self.cmd.valid & (cmd.op == Op.START)):
            m.d.sync += mode.eq(cmd.mode)
        cmd_mode = Signal()
        m.d.comb += cmd_mode.eq(mode if self.fault == "start_mode_from_register" else
                                Mux(cmd.op == Op.START, cmd.mode, mode))

        p_valid, p_op, p_mode = Signal(), Signal(2), Signal()
        m.d.sync += [p_valid.eq(self.cmd.valid), p_op.eq(cmd.op), p_mode.eq(cmd_mode)]
        products = []
        for lane in range(lanes):
            mul = FP16Mul(fault=self._lane_fault(lane, FP16Mul))
            m.submodules[f"mul{lane}"] = mul
            product = Signal(32, name=f"p{lane}")
            m.d.comb += [mul.a.eq(cmd.row[lane]), mul.b.eq(cmd.operand[lane])]
            m.d.sync += product.eq(mul.p)
            products.append(product)

        # Stage 2: the adder tree, pairs in lane order, one level per cycle (one binary32 adder
        # between two registers); with fewer lanes than 2^TREE_STAGES the last stages only
        # register, so the latencies do not depend on the lane count. The products and the
        # command's control travel beside the tree for AXPY and for stage 3.
        level = products
        if self.fault == "tree_order":
            level = [products[i // 2 + (i % 2) * (lanes // 2)] for i in range(lanes)]
        ctl = (p_valid, p_op, p_mode)
        direct = products
        for depth in range(self.TREE_STAGES):
            nxt = []
            if len(level) > 1:
                for i in range(0, len(level), 2):
                    add = FP32Add(fault=fault_for(self.fault, FP32Add))
                    m.submodules[f"tree{depth}_{i // 2}"] = add
                    m.d.comb += [add.a.eq(level[i]), add.b.eq(level[i + 1])]
                    nxt.append(add.s)
            else:
                nxt = level
            last = depth == self.TREE_STAGES - 1
            level = [self._register(m, v, f"t{depth}_{i}") for i, v in enumerate(nxt)] if not last else nxt
            if not last:
                ctl = tuple(self._register(m, v, f"t{depth}_{name}") for v, name in zip(ctl, ("valid", "op", "mode")))
                direct = [self._register(m, v, f"t{depth}_p{lane}") for lane, v in enumerate(direct)]
        tree_sum = level[0]
        t_valid, t_op, t_mode = ctl

        s_valid, s_op, s_mode = Signal(), Signal(2), Signal()
        m.d.sync += [s_valid.eq(t_valid), s_op.eq(t_op), s_mode.eq(t_mode)]
        addends = []
        for lane in range(lanes):
            addend = Signal(32, name=f"s{lane}")
            source = Mux(t_mode == Mode.DOT, tree_sum, direct[0]) if lane == 0 else direct[lane]
            m.d.sync += addend.eq(source)
            addends.append(addend)

        # Stage 3: accumulate; a DRAIN shows the accumulators (which already hold every earlier
        # MAC) and their binary16 rounding.
        for lane in range(lanes):
            acc = Signal(32, name=f"acc{lane}")
            add = FP32Add(fault=fault_for(self.fault, FP32Add))
            m.submodules[f"acc_add{lane}"] = add
            m.d.comb += [add.a.eq(acc), add.b.eq(addends[lane])]
            adds_here = (s_mode == Mode.AXPY) if lane else 1
            clears = s_valid & (s_op == Op.START)
            with m.If(0 if self.fault == "acc_not_cleared" and lane == FAULTY_LANE else clears):
                m.d.sync += acc.eq(0)
            with m.Elif(s_valid & (s_op == Op.MAC) & adds_here):
                m.d.sync += acc.eq(add.s)
            rounder = FP32ToFP16(fault=self._lane_fault(lane, FP32ToFP16))
            m.submodules[f"round{lane}"] = rounder
            m.d.comb += [rounder.a.eq(acc),
                         self.out.payload.fp32[lane].eq(acc),
                         self.out.payload.fp16[lane].eq(rounder.h)]
        m.d.comb += self.out.valid.eq(s_valid & (s_op == Op.DRAIN))
        if self.fault == "drain_early":
            m.d.comb += self.out.valid.eq(t_valid & (t_op == Op.DRAIN))
        return m

    @staticmethod
    def _register(m, value, name):
        reg = Signal(len(value), name=name)
        m.d.sync += reg.eq(value)
        return reg

    def _lane_fault(self, lane: int, unit) -> str | None:
        """The fault of ``unit`` (a per-lane unit class) in ``lane``: only in ``FAULTY_LANE``."""
        return fault_for(self.fault, unit) if lane == FAULTY_LANE else None
