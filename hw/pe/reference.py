"""Bit-exact numpy model of the DRAM bank PE's arithmetic (hw/pe/bank_pe.py), and its parameters.

Pure numpy (no Amaranth): the tests' golden vectors and any user can run it. Values travel as
IEEE bit patterns (uint16 for binary16, uint32 for binary32) so that the model and the RTL are
compared bit for bit, signs of zero and NaNs included.

Arithmetic, to the bit (the PE sums exactly and rounds once):
* products: binary16 x binary16 is exact as an integer multiple of 2^-48 (``FRAC_BITS``): a
  22-bit significand product ``mag`` times 2^``shift`` units, shift = Ea + Eb - 2 in 0..58
  (binary16 value = m 2^(E - 25), E the exponent field, 1 for subnormals); ``fp16_product``
  gives exactly the multiplier's outputs;
* the accumulators are ``ACC_BITS``-bit two's complement integers in units of 2^-48: q.K^T /
  GEMV (mode DOT) adds the 16 products of a MAC command to lane 0, p.V (mode AXPY) each lane's
  product to its own lane. Integer addition is exact and associative, so neither the order of
  the products within a command nor the adder tree's shape matters: the accumulator is the
  exact sum, modulo 2^ACC_BITS (exact whenever the final |sum| < 2^(ACC_BITS - 1 - FRAC_BITS)
  = 2^51; only a sum beyond that wraps, whatever the partial sums did);
* drain: the accumulator rounded once to binary32, round to nearest even (``round_fp32``;
  always a normal number: 2^-48 <= |x| < 2^52), then that rounded to binary16 (nearest even,
  overflow to infinity, binary16 subnormals kept), numpy's ``astype(float16)``;
* specials: each accumulator has sticky flags since its START: a NaN product (NaN input,
  inf x 0) -> NaN, an infinite product -> +inf or -inf flag; the result is the canonical quiet NaN
  (0x7FC00000; 0x7E00 in binary16) on NaN or on both infinities, else the infinity, else the
  rounded sum. An exact zero sum gives +0.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from common.config import config_path, get, load_yaml
from common.errors import ConfigError

FP32_QNAN = np.uint32(0x7FC00000)
FP16_QNAN = np.uint16(0x7E00)
UNIT_ROUNDOFF_FP32 = 2.0 ** -24
FRAC_BITS = 48       # accumulator unit 2^-48: the smallest binary16 product, 2^-24 x 2^-24
ACC_BITS = 100       # accumulator width, two's complement (exact up to |sum| < 2^51)
PRODUCT_BITS = 22    # significand product of two 11-bit significands
SHIFT_BITS = 6       # product shift field: Ea + Eb - 2, 0..58 for finite operands (..60 for specials)
_LIMB = 40           # the model's exact sums: two int64 limbs of base 2^40


class Op(enum.IntEnum):
    START = 0   # clear the accumulators and latch the mode
    MAC = 1     # one column x operand: 16 multiplies, then the mode's additions
    DRAIN = 2   # present the accumulators on the output


class Mode(enum.IntEnum):
    DOT = 0     # q.K^T and GEMV: reduce the lanes, accumulate one scalar (lane 0)
    AXPY = 1    # p.V: accumulate each lane's product in its own accumulator


@dataclass(frozen=True)
class BankPEParams:
    """configs/hardware/bank_pe.yaml: shared by the RTL (hw/pe/bank_pe.py) and the PIM cost model."""

    lanes: int
    column_bytes: int
    pipeline_latency_cycles: int   # MAC command to accumulator updated (pipeline depth)
    drain_latency_cycles: int      # DRAIN command to result on the output
    command_interval_cycles: int   # the PE accepts one command every this many cycles

    @property
    def macs_per_column(self) -> int:
        return self.lanes


def load_params(path: str | Path | None = None) -> BankPEParams:
    path = Path(path) if path is not None else config_path("hardware", "bank_pe")
    data = load_yaml(path)
    values = {k: get(data, k, int, source=path, positive=True) for k in
              ("lanes", "column_bytes", "pipeline_latency_cycles", "drain_latency_cycles",
               "command_interval_cycles")}
    params = BankPEParams(**values)
    if params.lanes & (params.lanes - 1):
        raise ConfigError(f"{path}: lanes: expected a power of two (adder tree), found {params.lanes}")
    if params.column_bytes != 2 * params.lanes:
        raise ConfigError(f"{path}: column_bytes: expected 2 * lanes = {2 * params.lanes} "
                          f"(one FP16 value per lane), found {params.column_bytes}")
    return params


@dataclass(frozen=True)
class Products:
    """The multiplier's outputs per element (hw/pe/fp16_mul.py): value = (-1)^sign mag 2^shift
    units of 2^-48; ``mag`` is 0 when an operand is infinite or NaN (the flags carry those)."""

    mag: np.ndarray      # uint32, < 2^22
    shift: np.ndarray    # uint8, Ea + Eb - 2
    sign: np.ndarray     # bool
    nan: np.ndarray      # bool: NaN operand, or inf x 0
    inf: np.ndarray      # bool: an infinite product (sign: ``sign``)


def fp16_product(a: np.ndarray, b: np.ndarray) -> Products:
    """The exact products of binary16 bit patterns ``a`` x ``b`` in the multiplier's form."""
    fields = []
    for x in (np.asarray(a, dtype=np.uint16), np.asarray(b, dtype=np.uint16)):
        exp = (x >> 10) & 0x1F
        frac = (x & 0x3FF).astype(np.uint32)
        fields.append(dict(sign=(x >> 15).astype(bool), exp=np.maximum(exp, 1).astype(np.uint8),
                           sig=frac | np.where(exp != 0, 1 << 10, 0).astype(np.uint32),
                           zero=(exp == 0) & (frac == 0), inf=(exp == 31) & (frac == 0),
                           nan=(exp == 31) & (frac != 0)))
    fa, fb = fields
    special = fa["inf"] | fa["nan"] | fb["inf"] | fb["nan"]
    nan = fa["nan"] | fb["nan"] | (fa["inf"] & fb["zero"]) | (fb["inf"] & fa["zero"])
    return Products(mag=np.where(special, 0, fa["sig"] * fb["sig"]).astype(np.uint32),
                    shift=(fa["exp"] + fb["exp"] - 2).astype(np.uint8),
                    sign=fa["sign"] ^ fb["sign"], nan=nan, inf=special & ~nan)


def product_values(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The exact products as Python ints in units of 2^-48 (object array; 0 for specials)."""
    p = fp16_product(a, b)
    values = [(-1 if sign else 1) * (int(mag) << int(shift))
              for mag, shift, sign in zip(p.mag.ravel(), p.shift.ravel(), p.sign.ravel())]
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out.reshape(p.mag.shape)


@dataclass
class Accumulators:
    """The PE's accumulator state per lane (leading axes: independent PEs): the exact sum in
    units of 2^-48 as two int64 limbs, value = hi 2^40 + lo (wrapped to ACC_BITS on reading),
    and the sticky special flags."""

    hi: np.ndarray
    lo: np.ndarray
    nan: np.ndarray
    pinf: np.ndarray
    ninf: np.ndarray

    @classmethod
    def zeros(cls, shape) -> Accumulators:
        return cls(np.zeros(shape, np.int64), np.zeros(shape, np.int64), np.zeros(shape, bool),
                   np.zeros(shape, bool), np.zeros(shape, bool))

    def values(self) -> np.ndarray:
        """The accumulators as Python ints (object array): the ACC_BITS-bit two's complement value."""
        total = self.hi.astype(object) * (1 << _LIMB) + self.lo.astype(object)
        half = 1 << (ACC_BITS - 1)
        return (total + half) % (1 << ACC_BITS) - half

    def fp32(self) -> np.ndarray:
        """The drained binary32 bit patterns (uint32)."""
        values = self.values()
        out = np.array([round_fp32(int(v)) for v in values.ravel()], np.uint32).reshape(values.shape)
        out[self.pinf | self.ninf] = np.where(self.pinf, 0x7F800000, 0xFF800000)[self.pinf | self.ninf]
        out[self.nan | (self.pinf & self.ninf)] = FP32_QNAN
        return out


def _limbs(p: Products) -> tuple[np.ndarray, np.ndarray]:
    """Each product as int64 limbs (hi, lo), value = hi 2^40 + lo, both carrying the sign."""
    mag = p.mag.astype(np.int64)
    shift = p.shift.astype(np.int64)
    low = shift < _LIMB
    full = mag << np.where(low, shift, 0)                     # < 2^61 where low
    hi = np.where(low, full >> _LIMB, mag << np.where(low, 0, shift - _LIMB))
    lo = np.where(low, full & ((1 << _LIMB) - 1), 0)
    sign = np.where(p.sign, -1, 1)
    return hi * sign, lo * sign


def accumulate_into(acc: Accumulators, mode: Mode, rows: np.ndarray, operands: np.ndarray) -> Accumulators:
    """``acc`` after the MAC commands ``rows[..., k, :]`` x ``operands[..., k, :]`` (uint16 bit
    patterns; leading axes independent PEs); the order of the commands does not matter."""
    rows = np.asarray(rows, dtype=np.uint16)
    operands = np.asarray(operands, dtype=np.uint16)
    if rows.shape != operands.shape or rows.ndim < 2:
        raise ValueError(f"rows {rows.shape} and operands {operands.shape}: expected equal [..., commands, lanes]")
    p = fp16_product(rows, operands)
    hi, lo = _limbs(p)
    pinf, ninf = p.inf & ~p.sign, p.inf & p.sign
    if mode == Mode.DOT:
        axes = (-2, -1)
        acc.hi[..., 0] += hi.sum(axis=axes)
        acc.lo[..., 0] += lo.sum(axis=axes)
        acc.nan[..., 0] |= p.nan.any(axis=axes)
        acc.pinf[..., 0] |= pinf.any(axis=axes)
        acc.ninf[..., 0] |= ninf.any(axis=axes)
    else:
        acc.hi += hi.sum(axis=-2)
        acc.lo += lo.sum(axis=-2)
        acc.nan |= p.nan.any(axis=-2)
        acc.pinf |= pinf.any(axis=-2)
        acc.ninf |= ninf.any(axis=-2)
    # Keep the limbs far from int64's range: lo's excess carried into hi, hi wrapped like the
    # accumulator (the value is read modulo 2^ACC_BITS).
    carry = acc.lo >> _LIMB
    acc.lo -= carry << _LIMB
    half = 1 << (ACC_BITS - _LIMB - 1)
    acc.hi = (acc.hi + carry + half) % (2 * half) - half
    return acc


def accumulate(mode: Mode, rows: np.ndarray, operands: np.ndarray) -> np.ndarray:
    """The drained binary32 accumulators (uint32 [..., lanes]) after a START in ``mode`` and the
    MAC commands ``rows[..., k, :]`` x ``operands[..., k, :]`` (uint16 bit patterns, k in
    order). Leading axes are independent PEs, so thousands of accumulations vectorize."""
    rows = np.asarray(rows, dtype=np.uint16)
    acc = Accumulators.zeros(rows.shape[:-2] + rows.shape[-1:])
    return accumulate_into(acc, mode, rows, operands).fp32()


def round_fp32(value: int) -> int:
    """binary32 bit pattern of ``value`` x 2^-48, rounded to nearest even (hw/pe/fixed_to_fp32.py);
    +0 for 0. Every nonzero value of the accumulators is a normal binary32 number."""
    if value == 0:
        return 0
    sign = int(value < 0)
    mag = -value if sign else value
    top = mag.bit_length() - 1
    exp = top - FRAC_BITS + 127
    if top > 23:
        drop = top - 23
        kept, rest, half = mag >> drop, mag & ((1 << drop) - 1), 1 << (drop - 1)
        if rest > half or (rest == half and kept & 1):
            kept += 1
            if kept >> 24:
                kept, exp = kept >> 1, exp + 1
    else:
        kept = mag << (23 - top)
    return sign << 31 | exp << 23 | (kept & 0x7FFFFF)


def fp32_to_fp16(bits: np.ndarray) -> np.ndarray:
    """binary16 rounding (nearest even) of binary32 bit patterns, as hw/pe/fp16_round.py."""
    bits = np.asarray(bits, dtype=np.uint32)
    with np.errstate(all="ignore"):
        h = bits.view(np.float32).astype(np.float16).view(np.uint16).copy()
    h[np.isnan(h.view(np.float16))] = FP16_QNAN
    return h


class BankPERef:
    """The PE as a command-level model: start(mode), mac(row, operand), drain()."""

    def __init__(self, lanes: int = 16):
        self.lanes = lanes
        self.mode = Mode.DOT
        self.acc = Accumulators.zeros(lanes)

    def start(self, mode: Mode) -> None:
        self.mode = Mode(mode)
        self.acc = Accumulators.zeros(self.lanes)

    def mac(self, row: np.ndarray, operand: np.ndarray) -> None:
        accumulate_into(self.acc, self.mode, np.asarray(row)[None, :], np.asarray(operand)[None, :])

    def drain(self) -> tuple[np.ndarray, np.ndarray]:
        """(binary32 accumulators, their binary16 rounding) as bit patterns, per lane."""
        fp32 = self.acc.fp32()
        return fp32, fp32_to_fp16(fp32)
