"""FP16 x FP16 multiplier with an exact fixed-point product, combinational.

A binary16 value is m 2^(E - 25), with m the 11-bit significand (hidden one for normals) and E
the exponent field (1 for subnormals). The product of two is ``mag`` 2^``shift`` in units of
2^-48 (``FRAC_BITS``): ``mag`` = ma mb (22 bits, exact), ``shift`` = Ea + Eb - 2 (0..58 for
finite operands), ``sign`` = sa ^ sb. No normalization and no rounding: the PE aligns the
product into its fixed-point accumulators (hw/pe/bank_pe.py), where every sum is exact.

Special values: ``nan`` for a NaN operand or inf x 0, ``inf`` for an infinite product (sign
``sign``); in both cases ``mag`` is 0, so the fixed-point sum only ever sees finite products.
Bit-exact model: ``fp16_product`` in hw/pe/reference.py.
"""
from __future__ import annotations

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.common.fault import checked_fault
from hw.pe.reference import PRODUCT_BITS, SHIFT_BITS


class FP16Mul(wiring.Component):
    """``a * b`` (binary16 bit patterns) as (``mag``, ``shift``, ``sign``, ``nan``, ``inf``).
    ``fault``: one of ``FAULTS``, for mutation testing (hw/common/fault.py); None in the shipped
    design."""

    FAULTS = {
        "product_truncated": "one lane's multiplier: the product keeps only its top 11 significand bits "
                             "(binary16 precision) instead of all 22",
        "subnormal_inputs_flushed": "one lane's multiplier: binary16 subnormal operands are taken as zeros",
    }

    def __init__(self, *, fault: str | None = None):
        self.fault = checked_fault(fault, FP16Mul)
        super().__init__({"a": In(16), "b": In(16), "mag": Out(PRODUCT_BITS), "shift": Out(SHIFT_BITS),
                          "sign": Out(1), "nan": Out(1), "inf": Out(1)})

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
                sig=Mux(exp == 0, 0, Cat(frac, 1)) if self.fault == "subnormal_inputs_flushed" else
                Cat(frac, exp != 0),
                exp=Mux(exp == 0, 1, exp),
            )
        fa, fb = fields["a"], fields["b"]
        special = Signal()
        m.d.comb += special.eq(fa["inf"] | fa["nan"] | fb["inf"] | fb["nan"])
        product = Signal(PRODUCT_BITS)
        m.d.comb += product.eq(fa["sig"] * fb["sig"])
        if self.fault == "product_truncated":
            # Keep the 11 bits from the product's leading one down (a binary16 significand).
            lead = Signal(range(PRODUCT_BITS), name="lead")
            for i in range(PRODUCT_BITS):
                with m.If(product[i]):
                    m.d.comb += lead.eq(i)
            drop = Signal(range(PRODUCT_BITS), name="drop")
            m.d.comb += drop.eq(Mux(lead > 10, lead - 10, 0))
            product = product & ~((C(1, PRODUCT_BITS + 1) << drop) - 1)[:PRODUCT_BITS]
        m.d.comb += [
            self.mag.eq(Mux(special, 0, product)),
            self.shift.eq(fa["exp"] + fb["exp"] - 2),
            self.sign.eq(fa["sign"] ^ fb["sign"]),
            self.nan.eq(fa["nan"] | fb["nan"] | (fa["inf"] & fb["zero"]) | (fb["inf"] & fa["zero"])),
            self.inf.eq(special & ~self.nan),
        ]
        return m
