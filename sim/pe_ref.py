"""Bit-exact numpy model of the DRAM bank PE's arithmetic (hw/pe/bank_pe.py), and its parameters.

Pure numpy (no Amaranth): the cost model, the tests' golden vectors and any user can run it.
Values travel as IEEE bit patterns (uint16 for binary16, uint32 for binary32) so that the model
and the RTL are compared bit for bit, signs of zero and NaNs included.

Arithmetic, to the bit:
* products: binary16 x binary16, exact in binary32 (``float32(a) * float32(b)`` is exact: 22
  significand bits, range 2^-48..2^32); FP16 subnormal inputs are exact too;
* q.K^T / GEMV (mode DOT): the 16 products of one MAC command are summed by a binary tree of
  binary32 adders, level by level in lane order: ``(p0+p1), (p2+p3), ...`` then pairs of those,
  down to one sum; the accumulator then does ``acc = acc + sum``;
* p.V (mode AXPY): each lane accumulates its own product, ``acc[l] = acc[l] + p[l]``;
* every addition is binary32 with round to nearest even (numpy's float32 ``+``);
* binary32 subnormals cannot arise (all values are multiples of 2^-48), and the model raises
  ArithmeticError rather than guess if a caller feeds one in a way the PE cannot;
* NaN results are the canonical quiet NaN (0x7FC00000; 0x7E00 in binary16);
* drain returns the binary32 accumulators and their binary16 rounding (nearest even, overflow
  to infinity, binary16 subnormals kept), numpy's ``astype(float16)``.
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


def _canon32(bits: np.ndarray) -> np.ndarray:
    bits = np.asarray(bits, dtype=np.uint32).copy()
    bits[np.isnan(bits.view(np.float32))] = FP32_QNAN
    return bits


def fp16_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact binary32 products of binary16 bit patterns (hw/pe/fp16_mul.py)."""
    fa = np.asarray(a, dtype=np.uint16).view(np.float16).astype(np.float32)
    fb = np.asarray(b, dtype=np.uint16).view(np.float16).astype(np.float32)
    with np.errstate(all="ignore"):
        return _canon32((fa * fb).view(np.uint32))


def fp32_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """binary32 ``a + b`` (bit patterns), nearest even, as hw/pe/fp32_add.py.

    The hardware flushes binary32 subnormal inputs and results, which the PE never produces;
    the model accepts subnormal inputs as signed zeros like the hardware, and raises
    ArithmeticError on a subnormal result instead of modelling the flush's rounding.
    """
    a = np.asarray(a, dtype=np.uint32)
    b = np.asarray(b, dtype=np.uint32)
    exp_mask = np.uint32(0x7F800000)
    a = np.where((a & exp_mask) == 0, a & np.uint32(0x80000000), a)
    b = np.where((b & exp_mask) == 0, b & np.uint32(0x80000000), b)
    with np.errstate(all="ignore"):
        s = (a.view(np.float32) + b.view(np.float32)).view(np.uint32)
    if np.any(((s & exp_mask) == 0) & ((s & np.uint32(0x7FFFFF)) != 0)):
        raise ArithmeticError("binary32 subnormal sum: outside the PE's reachable values")
    return _canon32(s)


def adder_tree(products: np.ndarray) -> np.ndarray:
    """Sum the last axis (a power of two) pairwise, level by level in lane order."""
    level = np.asarray(products, dtype=np.uint32)
    if level.shape[-1] & (level.shape[-1] - 1):
        raise ValueError(f"adder tree needs a power-of-two lane count, got {level.shape[-1]}")
    while level.shape[-1] > 1:
        level = fp32_add(level[..., 0::2], level[..., 1::2])
    return level[..., 0]


def fp32_to_fp16(bits: np.ndarray) -> np.ndarray:
    """binary16 rounding (nearest even) of binary32 bit patterns, as hw/pe/fp16_round.py."""
    bits = np.asarray(bits, dtype=np.uint32)
    with np.errstate(all="ignore"):
        h = bits.view(np.float32).astype(np.float16).view(np.uint16).copy()
    h[np.isnan(h.view(np.float16))] = FP16_QNAN
    return h


def accumulate(mode: Mode, rows: np.ndarray, operands: np.ndarray,
               acc: np.ndarray | None = None) -> np.ndarray:
    """Accumulators (uint32 [..., lanes]) after the MAC commands ``rows[..., k, :]`` x
    ``operands[..., k, :]`` (uint16 bit patterns), k in order, from ``acc`` (default +0).

    Leading axes are independent PEs, so thousands of accumulations vectorize.
    """
    rows = np.asarray(rows, dtype=np.uint16)
    operands = np.asarray(operands, dtype=np.uint16)
    if rows.shape != operands.shape or rows.ndim < 2:
        raise ValueError(f"rows {rows.shape} and operands {operands.shape}: expected equal [..., commands, lanes]")
    shape = rows.shape[:-2] + rows.shape[-1:]
    acc = np.zeros(shape, np.uint32) if acc is None else np.array(acc, dtype=np.uint32)
    products = fp16_mul(rows, operands)
    for k in range(rows.shape[-2]):
        if mode == Mode.DOT:
            acc[..., 0] = fp32_add(acc[..., 0], adder_tree(products[..., k, :]))
        else:
            acc = fp32_add(acc, products[..., k, :])
    return acc


class BankPERef:
    """The PE as a command-level model: start(mode), mac(row, operand), drain()."""

    def __init__(self, lanes: int = 16):
        self.lanes = lanes
        self.mode = Mode.DOT
        self.acc = np.zeros(lanes, np.uint32)

    def start(self, mode: Mode) -> None:
        self.mode = Mode(mode)
        self.acc = np.zeros(self.lanes, np.uint32)

    def mac(self, row: np.ndarray, operand: np.ndarray) -> None:
        self.acc = accumulate(self.mode, np.asarray(row)[None, :], np.asarray(operand)[None, :], self.acc)

    def drain(self) -> tuple[np.ndarray, np.ndarray]:
        """(binary32 accumulators, their binary16 rounding) as bit patterns, per lane."""
        return self.acc.copy(), fp32_to_fp16(self.acc)


def error_bound(mode: Mode, rows: np.ndarray, operands: np.ndarray) -> np.ndarray:
    """A priori bound on |model binary32 result - exact result| per lane (rows, operands as in
    `accumulate`), the standard one for recursive summation: every product is exact, and each
    summand passes through at most n additions (n = log2(lanes) + commands for DOT, commands
    for AXPY), so |error| <= gamma_n * sum |a_i b_i| with gamma_n = n u / (1 - n u),
    u = 2^-24 (Higham, Accuracy and Stability of Numerical Algorithms, eq. 4.4)."""
    a = np.asarray(rows, dtype=np.uint16).view(np.float16).astype(np.float64)
    b = np.asarray(operands, dtype=np.uint16).view(np.float16).astype(np.float64)
    magnitude = np.abs(a * b)
    commands, lanes = a.shape[-2], a.shape[-1]
    if mode == Mode.DOT:
        n = int(np.log2(lanes)) + commands
        total = magnitude.sum(axis=(-2, -1))
    else:
        n = commands
        total = magnitude.sum(axis=-2)
    gamma = n * UNIT_ROUNDOFF_FP32 / (1 - n * UNIT_ROUNDOFF_FP32)
    return gamma * total
