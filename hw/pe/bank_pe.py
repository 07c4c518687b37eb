"""DRAM bank processing element: `lanes` FP16 multipliers, exact fixed-point accumulators.

Interface (all widths for ``lanes`` = L, 16 in the shipped PE, see configs/hardware/bank_pe.yaml):

* ``cmd``: stream, always ready (the PE never stalls; the DRAM controller times the commands).
  Payload (`command_layout`): ``op`` (2 bits, `Op`: START 0, MAC 1, DRAIN 2), ``mode`` (1 bit,
  `Mode`: DOT 0, AXPY 1; read by START only), ``row`` (L x 16 bits: the column read from the row
  buffer), ``operand`` (L x 16 bits: the operands from the global buffer). Flattened payload bit
  order, LSB first: op[0:2], mode[2], row lane 0..L-1, operand lane 0..L-1.
* ``out``: stream, always ready (the consumer must take it), valid for one cycle per DRAIN.
  Payload (`result_layout`, registered): ``fp32`` (L x 32 bits: the accumulators rounded to
  binary32) and ``fp16`` (L x 16 bits: that rounded to binary16, the write-back format).

Dataflows: q.K^T sends one key-row column with the matching query slice as operand, MODE DOT,
one MAC per column of the key row (head_dim / L commands), then DRAIN: lane 0 is the score. GEMV
with row-major weights is the same dataflow (weight row, input-vector slice). p.V sends one
value-row column with p_j broadcast in every operand lane, MODE AXPY: lane l accumulates
sum_j p_j V[j, l]; GEMV with column-major weights (x_k broadcast) is this dataflow too. In DOT
mode lanes 1..L-1 stay +0.

Arithmetic: exact. Every binary16 product is an integer multiple of 2^-48 below 2^32
(hw/pe/fp16_mul.py gives it as a 22-bit significand product and a shift), so the accumulators
are ``ACC_BITS`` = 100-bit two's complement integers in units of 2^-48 and every addition is
exact: the drained binary32 value is the exact sum rounded once, to nearest even
(hw/pe/fixed_to_fp32.py), then rounded to binary16 (hw/pe/fp16_round.py). Integer addition has
no order, so the lanes of a DOT command are summed by a carry-save tree (hw/common/carry_save.py)
and the accumulator adds the tree's two vectors. Exact up to |sum| < 2^51; beyond that the sum
wraps modulo 2^100. NaN, inf x 0 and inf + -inf give the canonical quiet NaN (0x7FC00000 /
0x7E00), through sticky flags per accumulator. Bit-exact model: hw/pe/reference.py.

Cycle behaviour (one command per cycle at most, every command takes one slot):

    cycle t     command on ``cmd`` (valid): the L multipliers (significand product, exponent sum)
    cycle t+1   align: each product negated if negative and shifted into a 100-bit word; DOT:
                the carry-save tree reduces the lanes to two words (AXPY: lane 0's product
                alone; lanes 1.. keep their aligned products)
    cycle t+2   accumulate: START clears, MAC adds (lane 0: accumulator + the tree's two words,
                one full-adder row and a carry-propagate adder; lanes 1.. in AXPY: + their own
                product); a DRAIN reads the accumulators (which hold every earlier MAC) into
    cycle t+3   the drain's magnitude and normalizing shift (``FixedToFP32`` stage 1)
    cycle t+4   its rounding to binary32 (stage 2), then to binary16
    cycle t+5   the result on ``out`` (registered)

so a DRAIN right after the last MAC (cycle t+1) returns it (in cycle t+6): pipeline latency
``PIPELINE_LATENCY`` = 6, drain latency ``DRAIN_LATENCY`` = 5, throughput L MACs per cycle,
the same for every lane count. The recurrence (accumulator -> adder -> accumulator) is one
100-bit carry-propagate addition behind one full-adder row. Commands stay in order; the mode of
each command is the one latched by the latest START before it. Reset clears the accumulators
and selects DOT.

Mutation testing: ``fault`` names one fault of ``BankPE.FAULTS`` or of a unit's ``FAULTS``
(hw/common/fault.py, ``saddle hw mutate``); None, the default, is the shipped design. The
multiplier's and the output rounding's faults hit lane ``FAULTY_LANE`` only, the drain
rounding's faults every lane.
"""
from amaranth import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hw.common.carry_save import carry_save_sum, full_adder_row
from hw.common.fault import checked_fault, fault_for
from hw.pe.fixed_to_fp32 import FixedToFP32
from hw.pe.fp16_mul import FP16Mul
from hw.pe.fp16_round import FP32ToFP16
from hw.pe.reference import ACC_BITS, FRAC_BITS, PRODUCT_BITS, SHIFT_BITS, Mode, Op


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
    """The bank PE; `lanes` must be a power of two up to 16 (16 in the shipped design)."""

    MAX_LANES = 16
    DRAIN_LATENCY = 2 + 1 + FixedToFP32.LATENCY     # multiply, align, accumulate, convert, then out
    PIPELINE_LATENCY = DRAIN_LATENCY + 1            # last MAC -> result on out (the DRAIN right after it)
    FAULTS = {
        "acc_not_cleared": f"bank PE: START does not clear lane {FAULTY_LANE}'s accumulator",
        "flags_not_cleared": "bank PE: START does not clear the accumulators' NaN and infinity flags",
        "drain_early": "bank PE: out is valid one cycle early, before the DRAIN's result has arrived",
        "start_mode_from_register": "bank PE: a START's own stage-1 mode is the latched register, not its "
                                    "mode field",
        "axpy_tree_not_masked": "bank PE: in AXPY mode lanes 1.. also enter lane 0's tree (as in DOT)",
        "align_sign_not_extended": "bank PE: a negative product is aligned without sign extension above its "
                                   "23 bits (zero-filled)",
        "tree_carry_dropped": "bank PE: the carry-save tree's last carry vector is lost",
    }
    UNITS = (FP16Mul, FixedToFP32, FP32ToFP16)      # the unit classes a fault is passed on to

    def __init__(self, lanes: int = 16, *, fault: str | None = None):
        if lanes < 1 or lanes & (lanes - 1) or lanes > self.MAX_LANES:
            raise ValueError(f"lanes must be a power of two up to {self.MAX_LANES}, got {lanes}")
        self.lanes = lanes
        self.fault = checked_fault(fault, BankPE, *self.UNITS)
        super().__init__({
            "cmd": In(stream.Signature(command_layout(lanes), always_ready=True)),
            "out": Out(stream.Signature(result_layout(lanes), always_ready=True)),
        })

    def elaborate(self, platform):
        m = Module()
        lanes, w = self.lanes, ACC_BITS
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
            m.d.comb += [mul.a.eq(cmd.row[lane]), mul.b.eq(cmd.operand[lane])]
            regs = {name: Signal(len(getattr(mul, name)), name=f"p{lane}_{name}")
                    for name in ("mag", "shift", "sign", "nan", "inf")}
            m.d.sync += [reg.eq(getattr(mul, name)) for name, reg in regs.items()]
            products.append(regs)

        # Stage 2: align every product into a w-bit two's complement word (negate the 22-bit
        # product, then shift it left by its exponent), and reduce lane 0's operands (every
        # lane's in DOT, its own in AXPY) to two words with the carry-save tree.
        dot = Signal()
        m.d.comb += dot.eq(p_mode == Mode.DOT)
        aligned, flags = [], []
        for lane, p in enumerate(products):
            aligned.append(self._align(m, p, lane))
            pinf, ninf = Signal(name=f"a{lane}_pinf"), Signal(name=f"a{lane}_ninf")
            m.d.comb += [pinf.eq(p["inf"] & ~p["sign"]), ninf.eq(p["inf"] & p["sign"])]
            flags.append((p["nan"], pinf, ninf))
        in_tree = 1 if self.fault == "axpy_tree_not_masked" else dot
        operands = [aligned[0]] + [Mux(in_tree, a, 0) for a in aligned[1:]]
        tree_s, tree_c = carry_save_sum(m, operands, w, "tree", fault=self.fault)
        t_valid, t_op, t_mode = Signal(), Signal(2), Signal()
        m.d.sync += [t_valid.eq(p_valid), t_op.eq(p_op), t_mode.eq(p_mode)]
        t_sum, t_carry = Signal(w, name="t_sum"), Signal(w, name="t_carry")
        m.d.sync += [t_sum.eq(tree_s), t_carry.eq(tree_c)]
        addend_flags = []
        for lane in range(lanes):
            own = flags[lane]
            if lane == 0:
                own = tuple(f | Cat(g[k] for g in flags[1:]).any() & in_tree if lanes > 1 else f
                            for k, f in enumerate(own))
            regs = tuple(Signal(name=f"t{lane}_{n}") for n in ("nan", "pinf", "ninf"))
            m.d.sync += [r.eq(f) for r, f in zip(regs, own)]
            addend_flags.append(regs)
        addends = [None]
        for lane in range(1, lanes):
            reg = Signal(w, name=f"t{lane}_addend")
            m.d.sync += reg.eq(aligned[lane])
            addends.append(reg)

        # Stage 3: accumulate. START clears, a MAC adds; a DRAIN's converters read the
        # accumulators, which then hold every earlier MAC.
        clears = Signal()
        mac = Signal()
        m.d.comb += [clears.eq(t_valid & (t_op == Op.START)), mac.eq(t_valid & (t_op == Op.MAC))]
        accs = []
        for lane in range(lanes):
            acc = Signal(w, name=f"acc{lane}")
            acc_flags = tuple(Signal(name=f"acc{lane}_{n}") for n in ("nan", "pinf", "ninf"))
            total = Signal(w, name=f"acc{lane}_next")
            if lane == 0:
                x, y = full_adder_row(m, acc, t_sum, t_carry, w, "acc0_csa")
                m.d.comb += total.eq(x + y)
                adds = mac
            else:
                m.d.comb += total.eq(acc + addends[lane])
                adds = mac & (t_mode == Mode.AXPY)
            with m.If(0 if self.fault == "acc_not_cleared" and lane == FAULTY_LANE else clears):
                m.d.sync += acc.eq(0)
            with m.Elif(adds):
                m.d.sync += acc.eq(total)
            with m.If(0 if self.fault == "flags_not_cleared" else clears):
                m.d.sync += [f.eq(0) for f in acc_flags]
            with m.Elif(adds):
                m.d.sync += [f.eq(f | g) for f, g in zip(acc_flags, addend_flags[lane])]
            accs.append((acc, acc_flags))

        # Drain: binary32 (two cycles), binary16, the output registers.
        drain = [Signal(name=f"drain{i}") for i in range(FixedToFP32.LATENCY + 1)]
        m.d.sync += drain[0].eq(t_valid & (t_op == Op.DRAIN))
        m.d.sync += [later.eq(earlier) for earlier, later in zip(drain, drain[1:])]
        for lane, (acc, (nan, pinf, ninf)) in enumerate(accs):
            conv = FixedToFP32(w, FRAC_BITS, fault=fault_for(self.fault, FixedToFP32))
            m.submodules[f"conv{lane}"] = conv
            m.d.comb += [conv.value.eq(acc), conv.nan.eq(nan), conv.pinf.eq(pinf), conv.ninf.eq(ninf)]
            rounder = FP32ToFP16(fault=self._lane_fault(lane, FP32ToFP16))
            m.submodules[f"round{lane}"] = rounder
            m.d.comb += rounder.a.eq(conv.fp32)
            m.d.sync += [self.out.payload.fp32[lane].eq(conv.fp32), self.out.payload.fp16[lane].eq(rounder.h)]
        m.d.comb += self.out.valid.eq(drain[-1] if self.fault != "drain_early" else drain[-2])
        return m

    def _align(self, m, p: dict, lane: int) -> Signal:
        """The product (-1)^sign mag 2^shift as a w-bit two's complement word: the signed
        23-bit significand product shifted left by ``shift`` (a logarithmic shifter)."""
        w = ACC_BITS
        signed_mag = Signal(signed(PRODUCT_BITS + 1), name=f"a{lane}_signed")
        m.d.comb += signed_mag.eq(Mux(p["sign"], -p["mag"], p["mag"]))
        word = Signal(w, name=f"a{lane}_x0")
        if self.fault == "align_sign_not_extended":
            m.d.comb += word.eq(signed_mag.as_unsigned())
        else:
            m.d.comb += word.eq(signed_mag)      # sign-extended to w bits
        for k in range(SHIFT_BITS):
            nxt = Signal(w, name=f"a{lane}_x{k + 1}")
            m.d.comb += nxt.eq(Mux(p["shift"][k], (word << (1 << k))[:w], word))
            word = nxt
        return word

    def _lane_fault(self, lane: int, unit) -> str | None:
        """The fault of ``unit`` (a per-lane unit class) in ``lane``: only in ``FAULTY_LANE``."""
        return fault_for(self.fault, unit) if lane == FAULTY_LANE else None
