"""FP32 to FP16 conversion, round to nearest even, combinational: the PE's write-back format.

Results above the largest binary16 (65504, after rounding) become infinities; results below
2^-14 become binary16 subnormals, rounded at 2^-24 (ties to even), or zeros of their sign. An
FP32 input with a zero exponent field is a zero (the PE's binary32 results are never
subnormal, see hw/pe/fixed_to_fp32.py). NaN gives the canonical quiet NaN 0x7E00. The same rounding as numpy's
``float32.astype(float16)``.
"""
from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.common.fault import checked_fault
from hw.pe.fp_bits import FP16_QNAN

_BIAS_SHIFT = 127 - 15   # FP32 exponent field of 2^-14 is 113 = _BIAS_SHIFT + 1
_SUB_MAX_SHIFT = 25      # beyond this shift a subnormal candidate rounds to zero


class FP32ToFP16(wiring.Component):
    """``h`` = binary16 encoding of the FP32 value ``a``, rounded to nearest even. ``fault``: one
    of ``FAULTS``, for mutation testing (hw/common/fault.py); None in the shipped design."""

    FAULTS = {
        "fp16_round_truncates": "one lane's binary16 output: normal results truncated instead of rounded "
                                "to nearest even",
        "fp16_subnormals_flushed": "one lane's binary16 output: results below 2^-14 become zeros, not subnormals",
    }

    def __init__(self, *, fault: str | None = None):
        self.fault = checked_fault(fault, FP32ToFP16)
        super().__init__({"a": In(32), "h": Out(16)})

    def elaborate(self, platform):
        m = Module()
        sign, exp, frac = self.a[31], self.a[23:31], self.a[0:23]

        # Normal range: keep 10 fraction bits; the carry of rounding may step into the exponent
        # field, and a carry out of exponent 30 lands exactly on the infinity encoding.
        normal = Signal(15)
        round_up = Signal()
        m.d.comb += round_up.eq(0 if self.fault == "fp16_round_truncates" else
                                frac[12] & ((frac[0:12] != 0) | frac[13]))
        m.d.comb += normal.eq(Cat(frac[13:23], (exp - _BIAS_SHIFT)[0:5]) + round_up)

        # Subnormal range: value = sig * 2^(exp - 150) = k * 2^-24 with k = sig >> (126 - exp).
        sig = Cat(frac, C(1, 1))
        shift = Signal(range(_SUB_MAX_SHIFT + 1))
        m.d.comb += shift.eq(Mux(exp < 126 - _SUB_MAX_SHIFT, _SUB_MAX_SHIFT, 126 - exp))
        kept = Signal(24)
        below = Signal(25)
        m.d.comb += [kept.eq(sig >> shift), below.eq(Cat(C(0, 1), sig) >> shift)]
        guard = below[0]
        # Shifting `below` back recovers sig*2 with the bits under the guard cleared.
        back = Signal(25)
        sticky = Signal()
        m.d.comb += [back.eq((below << shift)[0:25]), sticky.eq(back != Cat(C(0, 1), sig))]
        subnormal = Signal(15)
        m.d.comb += subnormal.eq(kept[0:11] + (guard & (sticky | kept[0])))

        with m.If((exp == 0xFF) & (frac != 0)):
            m.d.comb += self.h.eq(FP16_QNAN)
        with m.Elif(exp == 0xFF):
            m.d.comb += self.h.eq(Cat(C(0x7C00, 15), sign))
        with m.Elif(exp == 0):
            m.d.comb += self.h.eq(Cat(C(0, 15), sign))
        with m.Elif(exp >= _BIAS_SHIFT + 31):
            m.d.comb += self.h.eq(Cat(C(0x7C00, 15), sign))
        with m.Elif(exp > _BIAS_SHIFT):
            m.d.comb += self.h.eq(Cat(Mux(normal >= 0x7C00, 0x7C00, normal), sign))
        with m.Else():
            m.d.comb += self.h.eq(Cat(C(0, 15) if self.fault == "fp16_subnormals_flushed" else subnormal, sign))
        return m
