"""A PIM attention step's price, as ``StepModel.price`` makes it (instances memoized per context
unit, channel placements kept, the step memoized but for its operation counts), against the
slow path: every instance (request x KV head) priced at its own context
and placed by ``PimStack.attention_channels`` (per-instance refresh tails), and the step's
energies summed component by component as pricing operator by operator sums them. Contexts
are swept over context-unit edges (16 k, 16 k + 1) and up to lengths whose busiest channel
crosses several refresh intervals; every field must be equal, energies to the last bit."""

import random

import pytest

from sim.cost.attention import Bilinear
from sim.cost.step import DenseModel, PriceCache, StepCost
from sim.cost.system import load_hardware
from sim.engine.costs import CostAdapter
from sim.model import load_model


def _reference(system, model: str, reqs, fc: str, devices: int) -> tuple:
    """The step's ``StepCost`` fields, from the per-instance placement and the dense part."""
    shard = load_model(model).shard(devices)
    pim, layers, link = system.pim, shard.layers, system.gpu_pim_link
    tokens = sum(q for _, q in reqs)
    d = DenseModel(system, shard, fc, devices, False, PriceCache()).price(tokens)
    instances = [(L, shard.head_dim, q * shard.group) for L, q in reqs for _ in range(shard.kv_heads)]
    load = pim.attention_channels(instances, shard.bpe, False,
                                  channels=pim.channels * system.stacks_per_device)
    att_ps = load.cycles * pim.tck_ps * layers
    bank_pj, mac_pj = system.energy.pim_pj(load.column_reads, pim.column_bytes, pim.lanes)
    q_bytes = tokens * shard.heads * shard.head_dim * shard.bpe
    down = q_bytes + tokens * shard.kv_heads * shard.head_dim * shard.bpe * 2
    comm_ps = (link.transfer_ps(down) + link.transfer_ps(q_bytes)) * layers
    link_pj = (down + q_bytes) * link.energy_pj_per_byte * layers
    if link.overlap_attention:
        h = shard.heads
        comm_ps = -(-comm_ps // h) if att_ps > comm_ps else comm_ps - att_ps + -(-att_ps // h)
    att_energy = (0.0, 0.0, 0.0, bank_pj * layers, mac_pj * layers, link_pj, 0.0)
    time_ps = att_ps + d.fc_ps + d.comm_ps + comm_ps + d.other_ps
    stacks = devices * system.stacks_per_device
    energy = tuple([((f + a) + o + r) * devices for f, a, o, r in zip(
        d.fc_energy, att_energy, d.other_energy, d.allreduce_energy)][:-1]
                   + [system.energy.static(time_ps, devices, stacks)])
    sum_l = sum(L for L, _ in reqs)
    sum_q = sum(q for _, q in reqs)
    sum_lq = sum(L * q for L, q in reqs)
    a, b, c, e = Bilinear.fit(shard, lambda op: op.flops).astuple()
    att_flops = (a * len(reqs) + b * sum_l + c * sum_q + e * sum_lq) * layers
    return (time_ps, att_ps, d.fc_ps, d.comm_ps + comm_ps, d.other_ps, d.allreduce_ps, d.gpu_ps,
            d.pim_ps + att_ps,
            energy, sum(energy), (d.flops + att_flops) * devices,
            (d.pim_flops + att_flops) * devices, devices, (("fc", fc), ("attention", "pim")))


def _steps(seed: int, count: int, longest: int) -> list[tuple[tuple[int, int], ...]]:
    """Random steps of 1-40 requests, contexts at unit edges or anywhere up to ``longest``,
    mostly one query each (draft steps), else 1-9 (verification passes)."""
    rng = random.Random(seed)
    steps = []
    for _ in range(count):
        n = rng.choice((1, 2, 3, rng.randint(1, 40)))
        k = rng.choice((1, 1, rng.randint(1, 9)))
        contexts = [rng.choice((16 * rng.randint(1, longest // 16), 16 * rng.randint(1, longest // 16) + 1,
                                rng.randint(k, longest))) for _ in range(n)]
        steps.append(tuple((max(L, k), k if rng.random() < 0.8 else rng.randint(1, 9)) for L in contexts))
    return steps


@pytest.mark.parametrize("calibration", ["attacc", "physical"])
@pytest.mark.parametrize("model,devices,longest", [("opt-1.3b", 1, 2100), ("opt-66b", 8, 4200),
                                                   ("llama-3.2-1b", 1, 2100)])
def test_pim_step_equals_the_per_instance_slow_path(calibration, model, devices, longest):
    system = load_hardware("saddle", calibration)
    for fc in ("gpu", "pim"):
        step = system.step_model(model, mapping={"fc": fc, "attention": "pim"}, devices=devices)
        for reqs in _steps(7, 60, longest):
            # twice: a new step, then the memo's answer for it
            for _ in range(2):
                got = StepCost.of(step.price(*zip(*reqs))[0])
                assert got.astuple() == _reference(system, model, reqs, fc, devices), (fc, reqs)


def test_refresh_tails_decide_some_swept_steps():
    """The sweep reaches the refresh search with tails (until_last_activate): some steps'
    busiest channel takes a refresh that its last instance's tail avoids."""
    system = load_hardware("saddle", "attacc")
    pim = system.pim
    shard = load_model("opt-66b").shard(8)
    decided = 0
    for reqs in _steps(7, 60, 4200):
        instances = [(L, shard.head_dim, q * shard.group) for L, q in reqs for _ in range(shard.kv_heads)]
        channels = pim.channels * system.stacks_per_device
        tails = pim.attention_channels(instances, shard.bpe, False, channels=channels)
        works = [pim.attention_instance(L, d, q, shard.bpe, False) for L, d, q in instances]
        every = pim.round_robin([w.cycles for w in works], channels, 0,
                                odd_extra=pim.pair_extra(max(L for L, _, _ in instances)))
        decided += tails.cycles < every.cycles
    assert decided > 0


def test_the_engines_form_is_the_step_cost():
    """The adapter's ``StepPrice`` is ``price_step``'s ``StepCost``, on new steps and memo
    hits."""
    system = load_hardware("saddle", "attacc")
    adapter = CostAdapter.named("saddle", "opt-66b", "opt-1.3b")
    for reqs in _steps(11, 80, 2100):
        got = adapter.price("dlm", reqs, "gpu", "pim", 1)
        cost = system.price_step("opt-1.3b", reqs, mapping={"fc": "gpu", "attention": "pim"}, devices=1)
        assert got.work.time_ps == cost.time_ps and got.work.gpu_ps == cost.gpu_busy_ps
        assert got.work.pim_ps == cost.pim_busy_ps and got.work.devices == 1
        assert got.energy_fj == round((cost.energy_pj - cost.energy[-1]) * 1000)
        assert StepCost.of(got) == cost
