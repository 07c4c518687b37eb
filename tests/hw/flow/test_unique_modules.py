"""Identical submodules share one Verilog module (hw/flow/unique_modules.py), and synthesizing
each distinct module once gives the totals of mapping every instance."""
import re

import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.flow.export import to_verilog, write_verilog
from hw.flow.unique_modules import share_identical_modules
from tests.hw.flow.accumulator import add_accumulators


class MixedAccumulators(wiring.Component):
    """Three identical accumulators and one with a wider input: the wide one must stay apart."""

    def __init__(self):
        super().__init__({"en": In(4), "d": In(32), "q": Out(32)})

    def elaborate(self, platform):
        m = Module()
        add_accumulators(m, self, 3)
        wide = m.submodules.wide = _Wide()
        m.d.comb += [wide.en.eq(self.en[3]), wide.d.eq(self.d[24:]), self.q[24:].eq(wide.q)]
        return m


class _Wide(wiring.Component):
    def __init__(self):
        super().__init__({"en": In(1), "d": In(8), "q": Out(8)})

    def elaborate(self, platform):
        m = Module()
        with m.If(self.en):
            m.d.sync += self.q.eq(self.q + self.d + 1)
        return m


def test_identical_instances_share_one_module():
    shared = share_identical_modules(to_verilog(MixedAccumulators(), "mix"), "mix")
    assert (shared.modules, shared.distinct) == (5, 3)
    assert shared.representative == {"mix": "mix", "\\mix.acc0": "\\mix.acc0", "\\mix.acc1": "\\mix.acc0",
                                      "\\mix.acc2": "\\mix.acc0", "\\mix.wide": "\\mix.wide"}
    assert shared.top_children == ["\\mix.acc0", "\\mix.acc1", "\\mix.acc2", "\\mix.wide"]
    modules = re.findall(r"^module (\\\S+|\w+)", shared.text, re.M)
    assert modules == ["mix", "\\mix.acc0", "\\mix.wide"]
    # Every instance now names the representative, and only its ports.
    instances = re.findall(r"^  (\\mix\.\w+)\s+(\w+) \($", shared.text, re.M)
    assert instances == [("\\mix.acc0", "acc0"), ("\\mix.acc0", "acc1"), ("\\mix.acc0", "acc2"),
                         ("\\mix.wide", "wide")]


def test_shared_verilog_lints_clean(tmp_path):
    from hw.flow.export import lint

    path = tmp_path / "mix.v"
    path.write_text(share_identical_modules(to_verilog(MixedAccumulators(), "mix"), "mix").text)
    result = lint(path, "mix")
    assert result.ok, result.messages


def test_shared_pool_entries_and_tree_levels_collapse():
    """A 16-entry Shared Pool: 16 entries are one module, each argmax level one module."""
    from hw.manager.shared_pool import SharedPool

    shared = share_identical_modules(to_verilog(SharedPool(16, 12), "sp"), "sp")
    reps = set(shared.representative.values())
    assert shared.modules == 1 + 16 + 15
    assert len({shared.representative[f"\\sp.e{i}"] for i in range(16)}) == 1
    assert shared.distinct == len(reps) <= 1 + 1 + 4


def test_composed_synthesis_agrees_with_mapping_every_instance(tmp_path):
    """A small Manager, synthesized hierarchically both ways: each distinct module once (the
    default) and every instance (`--every-instance`). The storage is exact; the logic agrees to
    ABC's tie-breaking, which depends on what Yosys created before a module (hw/README.md:
    "Synthesis in minutes"), so within 1 %."""
    from hw.flow.synth import synthesize
    from hw.manager.manager import Manager
    from sim.manager.softmax import SoftmaxParams

    manager = Manager(requests=4, shared_entries=8, eager_entries=8, micro_batches=2,
                      softmax=SoftmaxParams(lanes=2, vocab=256, exp_frac_bits=10))
    verilog = write_verilog(manager, "mgr", tmp_path)
    composed = synthesize(verilog, "mgr", liberty=None, work_dir=tmp_path / "composed", hierarchy="hier")
    full = synthesize(verilog, "mgr", liberty=None, work_dir=tmp_path / "full", hierarchy="hier",
                      every_instance=True)
    assert "identical instances mapped once" in composed.method and "mapped once" not in full.method
    assert (composed.flip_flops, composed.latches, composed.memory_bits) == \
        (full.flip_flops, full.latches, full.memory_bits)
    assert composed.parts.keys() == full.parts.keys()
    assert composed.cells == pytest.approx(full.cells, rel=0.01)
    assert composed.nand2_eq == pytest.approx(full.nand2_eq, rel=0.01)
