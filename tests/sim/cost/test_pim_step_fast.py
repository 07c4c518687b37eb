"""A PIM attention step's price, as the step pricer makes it (constants bound once per kind of
step, instances memoized per context unit, only the energies attention adds to summed per
step), against the slow path: every instance (request x KV head) priced at its own context
and placed by ``PimStack.attention_channels`` (per-instance refresh tails), and the step's
energies summed component by component as pricing operator by operator sums them. Contexts
are swept over context-unit edges (16 k, 16 k + 1) and up to lengths whose busiest channel
crosses several refresh intervals; every field must be equal, energies to the last bit."""

import random

import pytest

from sim.cost.system import clear_caches, load_system
from sim.engine.costs import CostAdapter
from sim.model import load_model


def _reference(system, model: str, reqs, fc: str, devices: int) -> tuple:
    """The step's ``StepCost`` fields, from the per-instance placement and ``_Dense``."""
    shard = load_model(model).shard(devices)
    pim, layers = system.pim, shard.layers
    d = system._dense(shard, sum(q for _, q in reqs), fc, devices, False)
    instances = [(L, shard.head_dim, q * shard.group) for L, q in reqs for _ in range(shard.kv_heads)]
    load = pim.attention_channels(instances, shard.bpe, False,
                                  channels=pim.channels * system.stacks_per_device)
    att_ps = load.cycles * pim.tck_ps * layers
    parts = system.energy.pim(load.column_reads, pim.column_bytes, pim.lanes)
    comm_ps, link_pj = d.attention_transfer
    if system.gpu_pim_link.overlap_attention:
        h = shard.heads
        comm_ps = -(-comm_ps // h) if att_ps > comm_ps else comm_ps - att_ps + -(-att_ps // h)
    att_energy = (0.0, 0.0, 0.0, parts["pim_bank"] * layers, parts["pim_mac"] * layers, link_pj, 0.0)
    time_ps = att_ps + d.fc_ps + d.comm_ps + comm_ps + d.other_ps
    stacks = devices * system.stacks_per_device
    energy = tuple([((f + a) + o + r) * devices for f, a, o, r in zip(
        d.fc_energy, att_energy, d.other_energy, d.allreduce_energy)][:-1]
                   + [system.energy.static(time_ps, devices, stacks)])
    sum_l = sum(L for L, _ in reqs)
    sum_q = sum(q for _, q in reqs)
    sum_lq = sum(L * q for L, q in reqs)
    a, b, c, e = d.attention_flops
    att_flops = (a * len(reqs) + b * sum_l + c * sum_q + e * sum_lq) * layers
    return (time_ps, att_ps, d.fc_ps, d.comm_ps + comm_ps, d.other_ps, d.gpu_ps, d.pim_ps + att_ps,
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
    system = load_system("saddle", calibration)
    clear_caches()
    for fc in ("gpu", "pim"):
        pricer = system.step_pricer(model, mapping={"fc": fc, "attention": "pim"}, devices=devices)
        for reqs in _steps(7, 60, longest):
            # twice: a new step, then the memo's answer for it
            for _ in range(2):
                assert tuple(pricer(reqs)) == _reference(system, model, reqs, fc, devices), (fc, reqs)


def test_refresh_tails_decide_some_swept_steps():
    """The sweep reaches the refresh search with tails (until_last_activate): some steps'
    busiest channel takes a refresh that its last instance's tail avoids."""
    system = load_system("saddle", "attacc")
    pim = system.pim
    shard = load_model("opt-66b").shard(8)
    decided = 0
    for reqs in _steps(7, 60, 4200):
        instances = [(L, shard.head_dim, q * shard.group) for L, q in reqs for _ in range(shard.kv_heads)]
        channels = pim.channels * system.stacks_per_device
        tails = pim.attention_channels(instances, shard.bpe, False, channels=channels)
        cycles, reads = pim.attention_many([L for L, _, _ in instances], shard.head_dim,
                                           [q for _, _, q in instances], shard.bpe, False)
        every = pim.round_robin(cycles, channels, reads,
                                odd_extra=pim.pair_extra([L for L, _, _ in instances]))
        decided += tails.cycles < every.cycles
    assert decided > 0


def test_the_engines_form_is_the_step_cost():
    """``StepForm.of`` takes the fields: the adapter's ``Priced`` equals the one made from
    ``price_step``'s ``StepCost``, on new steps and memo hits."""
    system = load_system("saddle", "attacc")
    clear_caches()
    adapter = CostAdapter("saddle", "opt-66b", "opt-1.3b")
    for reqs in _steps(11, 80, 2100):
        got = adapter.price("dlm", reqs, "gpu", "pim", 1)
        cost = system.price_step("opt-1.3b", reqs, mapping={"fc": "gpu", "attention": "pim"}, devices=1)
        assert got.work.time_ps == cost.time_ps and got.work.gpu_ps == cost.gpu_busy_ps
        assert got.work.pim_ps == cost.pim_busy_ps and got.work.devices == 1
        assert got.energy_fj == round((cost.energy_pj - cost.energy[-1]) * 1000)
        assert got[2:] == (cost.attention_ps, cost.fc_ps, cost.comm_ps, cost.flops, cost.pim_flops)


@pytest.mark.parametrize("calibration", ["attacc", "physical"])
def test_uniform_instances_are_the_instances_of_equal_rows(calibration):
    """``PimStack.uniform_instances`` (looked up by context units alone) against
    ``unit_instances`` with every query row count spelled out, cold and warm."""
    pim = load_system("saddle", calibration).pim
    rng = random.Random(5)
    for rows in (1, 4, 8, 36):
        for _ in range(20):
            units = [rng.randint(1, 300) for _ in range(rng.randint(1, 40))]
            clear_caches()
            fast = pim.uniform_instances(128, 2, False)
            want = pim.unit_instances(128, 2, False)(units, [rows] * len(units))
            assert fast(units, rows) == want
            clear_caches()
            slow = pim.unit_instances(128, 2, False)
            assert slow(units, [rows] * len(units)) == pim.uniform_instances(128, 2, False)(units, rows)
