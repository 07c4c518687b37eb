"""FP16 x FP16 multiplier with an exact FP32 product (no rounding), combinational.

Why exact: the product of two 11-bit significands has at most 22 bits, which fits FP32's 24,
and every product of two binary16 values (subnormals included, down to 2^-48) lies far inside
FP32's normal range (2^-126 .. 2^128), so converting the product to FP32 loses nothing. The PE's
adder tree therefore starts from exact products, and numpy's
``float32(a) * float32(b)`` is a bit-exact model.

Special values: NaN in, or inf x 0, gives the canonical quiet NaN 0x7FC00000; inf x finite
nonzero gives inf; a zero operand gives a zero with sign a.sign ^ b.sign. FP16 subnormal inputs
are handled (normalized through the leading-zero shift).
"""
from __future__ import annotations

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.common.fault import checked_fault
from hw.pe.fp_bits import FP32_QNAN, normalize_left


class FP16Mul(wiring.Component):
    """``p`` = exact FP32 encoding of ``a * b`` (``a``, ``b`` binary16 bit patterns). ``fault``:
    one of ``FAULTS``, for mutation testing (hw/common/fault.py); None in the shipped design."""

    FAULTS = {
        "product_truncated": "one lane's multiplier: the product is truncated to an 11-bit significand "
                             "(binary16 precision) instead of kept exact",
        "subnormal_inputs_flushed": "one lane's multiplier: binary16 subnormal operands are taken as zeros",
    }

    def __init__(self, *, fault: str | None = None):
        self.fault = checked_fault(fault, FP16Mul)
        super().__init__({"a": In(16), "b": In(16), "p": Out(32)})

    def elaborate(self, platform):
        m = Module()
        fields = {}
        for name, x in (("a", self.a), ("b", self.b)):
            exp, frac = x[10:15], x[0:10]
            fields[name] = dict(
                sign=x[15],
                zero=(exp == 0) if self.fault == "subnormal_inputs_flushed" else (exp == 0) & (frac == 0),
                inf=(exp == 31) & (frac == 0),
                nan=(exp == 31) & (frac != 0),
                # Subnormals have no hidden one and the exponent of 1 (2^-14).
                sig=Cat(frac, exp != 0),
                exp=Mux(exp == 0, 1, exp),
            )
        fa, fb = fields["a"], fields["b"]

        product = Signal(22)
        m.d.comb += product.eq(fa["sig"] * fb["sig"])
        normalized, lz = normalize_left(m, product, "prod")
        if self.fault == "product_truncated":
            normalized = Cat(C(0, 11), normalized[11:])
        # Leading one of `product` at bit 21 - lz: value = product * 2^(ea + eb - 30 - 20), so
        # the FP32 exponent field is (21 - lz) + ea + eb - 50 + 127.
        exp32 = Signal(8)
        m.d.comb += exp32.eq(fa["exp"] + fb["exp"] + 98 - lz)
        sign = Signal()
        m.d.comb += sign.eq(fa["sign"] ^ fb["sign"])

        with m.If(fa["nan"] | fb["nan"] | (fa["inf"] & fb["zero"]) | (fb["inf"] & fa["zero"])):
            m.d.comb += self.p.eq(FP32_QNAN)
        with m.Elif(fa["inf"] | fb["inf"]):
            m.d.comb += self.p.eq(Cat(C(0, 23), C(0xFF, 8), sign))
        with m.Elif(fa["zero"] | fb["zero"]):
            m.d.comb += self.p.eq(Cat(C(0, 31), sign))
        with m.Else():
            m.d.comb += self.p.eq(Cat(C(0, 2), normalized[0:21], exp32, sign))
        return m
