"""Sram: a single-port SRAM macro model (``amaranth.lib.memory.Memory``), ``depth`` words of
``width`` bits, for the pools' token records when ``storage="sram"``.

Interface (``lib.wiring`` Component): ``addr``; ``w_en`` with ``w_data`` writes word ``addr``
at the clock edge; ``r_en`` reads word ``addr`` at the clock edge into ``r_data``, which holds
it until the next read (one cycle of read latency, as a synchronous SRAM macro). One port:
``w_en`` and ``r_en`` are never high together (the pools' writes and reads belong to different
commands), so the macro needs a single read-write port. The contents are not reset.

Its own module in the exported Verilog, holding one ``$mem_v2`` cell: synthesis
(hw/flow/synth.py, ``storage`` sram) keeps it as a black-box macro whose area comes from a
stated SRAM density and whose timing from a stated access time (configs/synth/sram.yaml).
"""
from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out


class Sram(wiring.Component):
    def __init__(self, depth: int, width: int):
        if depth < 2 or width < 1:
            raise ValueError(f"Sram: depth >= 2 and width >= 1 expected, found {depth} x {width}")
        self.depth, self.width = depth, width
        super().__init__({"addr": In(range(depth)), "w_en": In(1), "w_data": In(width),
                          "r_en": In(1), "r_data": Out(width)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = memory.Memory(shape=self.width, depth=self.depth, init=[])
        write, read = mem.write_port(), mem.read_port()
        m.d.comb += [write.addr.eq(self.addr), write.en.eq(self.w_en), write.data.eq(self.w_data),
                     read.addr.eq(self.addr), read.en.eq(self.r_en), self.r_data.eq(read.data)]
        return m
