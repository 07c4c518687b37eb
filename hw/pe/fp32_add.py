"""FP32 adder, round to nearest even, combinational: the adder tree and accumulators of the PE.

Inputs with a zero exponent field are taken as zeros of their sign (flush to zero), and a
result below 2^-126 becomes a zero of the result's sign. Inside the PE neither can happen: every
value is a sum of exact FP16 products, all multiples of 2^-48, and any rounding of such a sum is
again a multiple of 2^-48, so it is either 0 or at least 2^-48 in magnitude, far above FP32's
subnormal range. Flushing therefore costs no accuracy there and saves the subnormal logic.

Otherwise IEEE 754 binary32 addition: the operand of larger magnitude fixes the sign, the smaller
is aligned with three extra bits (guard, round, and a sticky bit jammed into the lowest position,
which is rounding to odd and keeps the final rounding to nearest even exact), overflow rounds to
infinity, an exact cancellation gives +0, (-0) + (-0) = -0. NaN in, or inf + -inf, gives the
canonical quiet NaN 0x7FC00000.
"""
from amaranth import C, Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.common.fault import checked_fault
from hw.pe.fp_bits import FP32_QNAN, normalize_left

_EXTRA = 3  # guard, round, sticky


class FP32Add(wiring.Component):
    """``s`` = ``a + b`` (FP32 bit patterns). ``fault``: one of ``FAULTS``, for mutation testing
    (hw/common/fault.py); None in the shipped design."""

    FAULTS = {
        "adder_sticky_dropped": "binary32 adders: the bits shifted out in the alignment are dropped "
                                "instead of jammed into the sticky bit",
        "adder_ties_away": "binary32 adders: ties round away from zero instead of to even",
    }

    def __init__(self, *, fault: str | None = None):
        self.fault = checked_fault(fault, FP32Add)
        super().__init__({"a": In(32), "b": In(32), "s": Out(32)})

    def elaborate(self, platform):
        m = Module()
        a, b = self.a, self.b
        ea, eb = a[23:31], b[23:31]
        a_nan = (ea == 0xFF) & (a[0:23] != 0)
        b_nan = (eb == 0xFF) & (b[0:23] != 0)
        a_inf = (ea == 0xFF) & (a[0:23] == 0)
        b_inf = (eb == 0xFF) & (b[0:23] == 0)
        a_zero, b_zero = ea == 0, eb == 0

        # Order by magnitude (flushed inputs count as 0).
        mag_a, mag_b = Signal(31), Signal(31)
        m.d.comb += [mag_a.eq(Mux(a_zero, 0, a[0:31])), mag_b.eq(Mux(b_zero, 0, b[0:31]))]
        swap = Signal()
        m.d.comb += swap.eq(mag_b > mag_a)
        big, small = Signal(32), Signal(32)
        m.d.comb += [big.eq(Mux(swap, Cat(mag_b, b[31]), Cat(mag_a, a[31]))),
                     small.eq(Mux(swap, Cat(mag_a, a[31]), Cat(mag_b, b[31])))]
        e_big, e_small = big[23:31], small[23:31]
        width = 24 + _EXTRA
        big_x, small_x = Signal(width), Signal(width)
        m.d.comb += [big_x.eq(Cat(C(0, _EXTRA), big[0:23], e_big != 0)),
                     small_x.eq(Cat(C(0, _EXTRA), small[0:23], e_small != 0))]

        # Align the smaller operand; everything shifted out is jammed into bit 0.
        dist = Signal(8)
        m.d.comb += dist.eq(e_big - e_small)
        dist_sat = Signal(range(width + 1))
        m.d.comb += dist_sat.eq(Mux(dist > width, width, dist))
        aligned = Signal(width)
        lost_mask = Signal(width)
        m.d.comb += [aligned.eq(small_x >> dist_sat),
                     lost_mask.eq(~(C(2 ** width - 1, width) << dist_sat))]
        small_j = Signal(width)
        m.d.comb += small_j.eq(aligned if self.fault == "adder_sticky_dropped" else
                               aligned | ((small_x & lost_mask) != 0))

        subtract = Signal()
        m.d.comb += subtract.eq(big[31] ^ small[31])
        total = Signal(width + 1)
        diff = Signal(width)
        m.d.comb += [total.eq(big_x + small_j), diff.eq(big_x - small_j)]

        # Normalize to a leading one at bit width-1, with the exponent as a signed value.
        norm = Signal(width)
        exp = Signal(signed(10))
        diff_norm, diff_lz = normalize_left(m, diff, "diff")
        with m.If(~subtract & total[width]):
            m.d.comb += [norm.eq(Cat(total[1] | total[0], total[2:width + 1])), exp.eq(e_big + 1)]
        with m.Elif(~subtract):
            m.d.comb += [norm.eq(total[0:width]), exp.eq(e_big)]
        with m.Else():
            m.d.comb += [norm.eq(diff_norm), exp.eq(e_big - diff_lz)]

        mant = norm[_EXTRA:]
        guard, rest = norm[_EXTRA - 1], norm[0:_EXTRA - 1] != 0
        round_up = Signal()
        m.d.comb += round_up.eq(guard if self.fault == "adder_ties_away" else guard & (rest | mant[0]))
        rounded = Signal(25)
        m.d.comb += rounded.eq(mant + round_up)
        exp_final = Signal(signed(10))
        m.d.comb += exp_final.eq(exp + rounded[24])

        sign = big[31]
        with m.If(a_nan | b_nan | (a_inf & b_inf & (a[31] != b[31]))):
            m.d.comb += self.s.eq(FP32_QNAN)
        with m.Elif(a_inf | b_inf):
            m.d.comb += self.s.eq(Cat(C(0, 23), C(0xFF, 8), Mux(a_inf, a[31], b[31])))
        with m.Elif(a_zero & b_zero):
            m.d.comb += self.s.eq(Cat(C(0, 31), a[31] & b[31]))
        with m.Elif(subtract & (diff == 0)):
            m.d.comb += self.s.eq(0)
        with m.Elif(exp_final >= 0xFF):
            m.d.comb += self.s.eq(Cat(C(0, 23), C(0xFF, 8), sign))
        with m.Elif(exp_final <= 0):
            m.d.comb += self.s.eq(Cat(C(0, 31), sign))
        with m.Else():
            m.d.comb += self.s.eq(Cat(rounded[0:23], exp_final[0:8], sign))
        return m
