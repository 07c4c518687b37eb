"""Fixed point to binary32, round to nearest even, in two pipeline stages: the PE's drain.

Input: ``value``, a ``width``-bit two's complement integer in units of 2^-``frac_bits`` (the
PE's accumulator), and the accumulator's special flags ``nan``, ``pinf``, ``ninf``. Output
``fp32``, registered, ``LATENCY`` = 2 cycles after the input. No carry chain longer than the
24-bit significand:

    stage 1  u = value XOR sign (the magnitude for a positive value; |value| - 1 for a negative
             one: no increment), its leading-zero count (a log2-depth tree), and u shifted left
             by it with ``sign`` filling the vacated bits (a logarithmic shifter), so that for a
             negative value |value| x 2^count is exactly the shifted u + 1. Registered: sign,
             zero, the top 24 bits S, the guard bit G, whether the bits below are any one
             (L_any) and all ones (L_all), the count.
    stage 2  the one increment of S: positive, round to nearest even (G and (L_any or lsb));
             negative, the + 1 carries into G only when L is all ones, so the increment is G
             (L not all ones: the bits below are nonzero, the sticky bit is set), or G or lsb
             (L all ones: exactly G + 1 at the guard position, a tie when G was 0); the
             exponent (width - 1 - frac_bits + 127 - count, + 1 on a carry out of S), the
             special values. Registered.

For the PE's 100-bit accumulator of 2^-48 units every nonzero value is a normal binary32 number
(2^-48 <= |x| < 2^52), so there is no subnormal or overflow case. NaN (``nan``, or ``pinf`` and
``ninf``) gives the canonical quiet NaN 0x7FC00000, an infinity flag the infinity, a zero value
+0. Bit-exact model: ``round_fp32`` in hw/pe/reference.py.
"""
from __future__ import annotations

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.common.fault import checked_fault
from hw.pe.fp_bits import FP32_QNAN, leading_zeros, shift_left


class FixedToFP32(wiring.Component):
    """``fp32`` = binary32 rounding of ``value`` 2^-``frac_bits`` (or the special value of the
    flags), two cycles after the inputs. ``fault``: one of ``FAULTS`` (hw/common/fault.py)."""

    LATENCY = 2
    FAULTS = {
        "round_sticky_dropped": "drain rounding: the bits below the guard bit are ignored (no sticky bit), "
                                "so a value just above a tie rounds as the tie",
        "round_ties_away": "drain rounding: ties round away from zero instead of to even",
    }

    def __init__(self, width: int, frac_bits: int, *, fault: str | None = None):
        if not 26 <= width or (width - 1 - frac_bits + 127) >= 255 or frac_bits > 126 + 23:
            raise ValueError(f"FixedToFP32: width {width} with {frac_bits} fraction bits leaves binary32's normal range")
        self.width, self.frac_bits = width, frac_bits
        self.fault = checked_fault(fault, FixedToFP32)
        super().__init__({"value": In(width), "nan": In(1), "pinf": In(1), "ninf": In(1), "fp32": Out(32)})

    def elaborate(self, platform):
        m = Module()
        w = self.width
        # Stage 1: ones' complement, leading zeros, normalizing shift, the bits below the guard.
        sign = Signal()
        u = Signal(w)
        m.d.comb += [sign.eq(self.value[w - 1]), u.eq(self.value ^ sign.replicate(w))]
        lz, u_zero = leading_zeros(m, u, "lz")
        norm = shift_left(m, u, lz, sign, "norm")
        r_sign, r_zero, r_sig = Signal(name="r_sign"), Signal(name="r_zero"), Signal(24, name="r_sig")
        r_guard, r_any, r_all = Signal(name="r_guard"), Signal(name="r_below_any"), Signal(name="r_below_all")
        r_lz = Signal(len(lz), name="r_lz")
        r_nan, r_inf, r_inf_sign = Signal(name="r_nan"), Signal(name="r_inf"), Signal(name="r_inf_sign")
        below = norm[:w - 25]
        m.d.sync += [r_sign.eq(sign), r_zero.eq(u_zero & ~sign), r_sig.eq(norm[w - 24:]),
                     r_guard.eq(norm[w - 25]), r_any.eq(below.any()), r_all.eq(below.all()), r_lz.eq(lz),
                     r_nan.eq(self.nan | (self.pinf & self.ninf)), r_inf.eq(self.pinf | self.ninf),
                     r_inf_sign.eq(self.ninf)]

        # Stage 2: the increment of the significand, exponent, special values.
        g, lsb = r_guard, r_sig[0]
        if self.fault == "round_ties_away":
            positive, negative = g, Mux(r_all, 1, g)
        elif self.fault == "round_sticky_dropped":
            positive, negative = g & lsb, Mux(r_all, g | lsb, g & lsb)
        else:
            positive, negative = g & (r_any | lsb), Mux(r_all, g | lsb, g)
        inc = Signal()
        m.d.comb += inc.eq(Mux(r_sign, negative, positive))
        rounded = Signal(25)
        m.d.comb += rounded.eq(r_sig + inc)
        exp = Signal(8)
        m.d.comb += exp.eq(w - 1 - self.frac_bits + 127 - r_lz + rounded[24])
        with m.If(r_nan):
            m.d.sync += self.fp32.eq(FP32_QNAN)
        with m.Elif(r_inf):
            m.d.sync += self.fp32.eq(Cat(C(0, 23), C(0xFF, 8), r_inf_sign))
        with m.Elif(r_zero):
            m.d.sync += self.fp32.eq(0)
        with m.Else():
            m.d.sync += self.fp32.eq(Cat(rounded[0:23], exp, r_sign))
        return m
