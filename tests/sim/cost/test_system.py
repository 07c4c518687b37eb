"""Whole-step pricing: consistency, partitioning, bounds, determinism, crossovers, exactness of
the fast path."""

import json
from pathlib import Path

import pytest

from common.errors import ConfigError, SaddleError
from sim.cost.system import load_hardware
from sim.model import load_model
from tests.sim.cost.gpu_attention import attention_ps

DGX = load_hardware("dgx-a100")
ATTACC = load_hardware("attacc")
SADDLE = load_hardware("saddle")


def test_systems_of_design():
    assert (DGX.devices, DGX.pim, DGX.stacks_per_device) == (8, None, 0)
    assert (SADDLE.devices, SADDLE.stacks_per_device) == (8, 5)
    assert SADDLE.gpu_pim_link.bandwidth == 2000e9 and SADDLE.device_link.bandwidth == 300e9
    assert load_hardware("specpim-4gpu").devices == 4
    # Every A100's 80 GiB (a100.yaml memory_gb) and every stack's 16 GiB (capacity_gb)
    assert DGX.memory_bytes == 8 * 80 * 2**30
    for s in (ATTACC, SADDLE):
        assert s.memory_bytes == 8 * (80 + 5 * 16) * 2**30
    assert load_hardware("specpim-4gpu").memory_bytes == 4 * (80 + 5 * 16) * 2**30


def test_components_are_not_systems():
    with pytest.raises(ConfigError, match="kind: expected 'system'"):
        load_hardware("a100")


@pytest.mark.parametrize("system", [DGX, ATTACC, SADDLE])
@pytest.mark.parametrize("model", ["opt-66b", "llama-3.1-70b"])
def test_step_time_is_the_sum_of_its_parts(system, model):
    c = system.price_step(model, [(1024, 1)] * 16 + [(300, 5)] * 3)
    assert c.time_ps == c.attention_ps + c.fc_ps + c.comm_ps + c.other_ps
    assert all(isinstance(v, int) and v > 0 for v in (c.time_ps, c.fc_ps, c.attention_ps, c.other_ps))
    assert c.gpu_busy_ps + c.pim_busy_ps <= c.time_ps
    assert c.energy_pj == pytest.approx(sum(c.energy_by_component_pj.values()))
    assert c.energy_by_component_pj["static"] == pytest.approx(
        system.energy.static(c.time_ps, 8, 8 * system.stacks_per_device))
    assert 0 <= c.pim_flop_share < 1
    assert (c.pim_busy_ps > 0) == (system.pim is not None)


def test_fc_on_gpu_cannot_beat_the_weight_stream():
    m = load_model("opt-66b")
    c = DGX.price_step(m, [(512, 1)] * 32)
    per_gpu_weights = m.weight_bytes / 8
    assert c.fc_ps >= per_gpu_weights / DGX.gpu.bandwidth * 1e12
    # and decoding FC of a 66B model is memory-bound: within 25% of the sustained stream
    assert c.fc_ps <= 1.25 * per_gpu_weights / DGX.gpu.sustained_bandwidth * 1e12


def test_pim_attention_cannot_beat_the_banks():
    m = load_model("opt-66b")
    reqs = [(2048, 1)] * 64
    c = ATTACC.price_step(m, reqs)
    kv_per_device = sum(L for L, _ in reqs) * m.kv_bytes_per_token / 8
    assert c.attention_ps >= kv_per_device / (5 * ATTACC.pim.peak_bandwidth()) * 1e12


def test_attention_on_pim_beats_gpu_for_large_decoding_batches():
    reqs = [(1024, 1)] * 64
    assert ATTACC.price_step("opt-66b", reqs).time_ps < DGX.price_step("opt-66b", reqs).time_ps


def test_each_request_is_priced_from_its_own_context():
    mixed = SADDLE.price_step("opt-66b", [(128, 1), (1920, 1)] * 40)
    mean = SADDLE.price_step("opt-66b", [(1024, 1)] * 80)
    assert mixed.attention_ps != mean.attention_ps
    longer = SADDLE.price_step("opt-66b", [(128, 1), (1921, 1)] * 40)
    assert longer.attention_ps >= mixed.attention_ps


def test_draft_on_one_device_verify_on_all():
    d = SADDLE.price_draft("opt-1.3b", [(512, 1)] * 8, fc="pim")
    assert d.devices == 1 and dict(d.mapping) == {"fc": "pim", "attention": "pim"}
    assert d.comm_ps > 0 and d.allreduce_ps == 0   # GPU <-> PIM transfers, no all-reduce
    v = SADDLE.price_verify("opt-66b", [(512, 9)] * 8)
    assert v.devices == 8 and dict(v.mapping) == {"fc": "gpu", "attention": "pim"}
    assert 0 < v.allreduce_ps < v.comm_ps            # all-reduces and the attention's transfers
    assert DGX.price_draft("opt-1.3b", [(512, 1)]).pim_busy_ps == 0


def test_allreduce_part_of_communication_by_hand():
    """GPUs only: every communication is the two all-reduces per layer of the hidden state."""
    m = load_model("opt-66b")
    c = DGX.price_step(m, [(512, 1)] * 16)
    assert c.comm_ps == c.allreduce_ps == 2 * m.layers * DGX.device_link.allreduce_ps(16 * m.hidden * 2, 8)


def test_determinism_and_cache_are_transparent():
    reqs = [(700, 3), (20, 1)]
    a = SADDLE.price_step("llama-3.1-70b", reqs)
    b = SADDLE.price_step("llama-3.1-70b", list(reqs))
    assert a == b and a.as_dict() == b.as_dict()


def test_errors_are_clear():
    with pytest.raises(SaddleError, match="has no PIM"):
        DGX.price_step("opt-66b", [(10, 1)], mapping={"fc": "gpu", "attention": "pim"})
    with pytest.raises(SaddleError, match="exactly the keys"):
        SADDLE.price_step("opt-66b", [(10, 1)], mapping={"fc": "gpu"})
    with pytest.raises(SaddleError, match="expected 'gpu' or 'pim'"):
        SADDLE.price_step("opt-66b", [(10, 1)], mapping={"fc": "cpu", "attention": "pim"})
    with pytest.raises(SaddleError, match="devices must be 1..8"):
        SADDLE.price_step("opt-66b", [(10, 1)], devices=9)
    with pytest.raises(SaddleError, match="needs .* GiB"):
        DGX.check_fits("opt-175b", [(2048, 1)] * 128)


def _first_gpu_win(sizes, price) -> int | None:
    """The first size at which ``price(size, "gpu")`` is faster than ``price(size, "pim")``."""
    return next((n for n in sizes if price(n, "gpu").time_ps < price(n, "pim").time_ps), None)


def test_crossovers_are_where_the_cheaper_side_flips():
    draft = lambda batch, fc: SADDLE.price_draft("opt-1.3b", [(512, 1)] * batch, fc=fc)
    b = _first_gpu_win(range(1, 513), draft)
    assert b is not None and b > 1
    assert draft(b - 1, "pim").time_ps <= draft(b - 1, "gpu").time_ps
    assert draft(b, "gpu").time_ps < draft(b, "pim").time_ps

    def verify(model):
        return lambda q, attention: SADDLE.price_verify(model, [(512, q)] * 32, attention=attention)
    q = _first_gpu_win(range(1, 65), verify("opt-66b"))
    assert q is not None and q > 1
    # grouped-query attention already has g = 8 queries per KV head: it flips much earlier
    assert _first_gpu_win(range(1, 65), verify("llama-3.1-70b")) < q


def test_energy_is_at_least_the_weight_and_kv_streams():
    m = load_model("opt-66b")
    reqs = [(1024, 1)] * 32
    dgx = DGX.price_step(m, reqs).energy_by_component_pj
    kv = sum(L for L, _ in reqs) * m.kv_bytes_per_token
    assert dgx["gpu_dram"] >= (m.weight_bytes + kv) * 28.72
    pim = ATTACC.price_step(m, reqs).energy_by_component_pj
    # on AttAcc the KV stream is read in the banks (4.4 pJ/B) instead of through the GPU
    assert pim["pim_bank"] >= kv * 4.4
    assert pim["gpu_dram"] < dgx["gpu_dram"]


def test_numpy_integers_and_lists_are_accepted_as_requests():
    import numpy as np
    ref = SADDLE.price_step("opt-66b", [(300, 2), (40, 1)])
    assert SADDLE.price_step("opt-66b", [[300, 2], [40, 1]]) == ref
    assert SADDLE.price_step("opt-66b", [(np.int64(300), np.int32(2)), (40, 1)]) == ref


def test_cli_output_is_byte_identical_across_processes():
    import subprocess
    import sys
    cmd = [sys.executable, "-m", "sim.cli", "cost", "step", "--system", "saddle", "--model",
           "llama-3.1-70b", "--batch", "8", "--context", "333", "--query-tokens", "3", "--json"]
    outs = {subprocess.run(cmd, capture_output=True, check=True).stdout for _ in range(2)}
    assert len(outs) == 1


GOLDEN_STEPS = Path(__file__).with_name("golden_steps.json")


def test_steps_are_bit_identical_to_pricing_operator_by_operator():
    """88 steps (sampled from fig12 runs, plus every mapping x power constraint on each system
    kind) as the implementation priced them operator by operator before the per-token-count
    caches, the bilinear attention sums and the plain-Python request loop: every field equal,
    energies to the last bit, under the ``physical`` calibration (the model of that time). A
    deliberate cost-model or config change regenerates the file (last: the bank PE's
    pipeline latency became the RTL's pipelined adder tree's, 6 cycles, which moved the PIM
    steps' attention (and PIM FC) time and energy and nothing else)."""
    cases = json.loads(GOLDEN_STEPS.read_text())
    assert len(cases) == 88
    for case in cases:
        c = load_hardware(case["system"], "physical").price_step(
            case["model"], [tuple(r) for r in case["requests"]], **case["kwargs"])
        got = c.asdict()
        del got["energy"]                 # checked as energy_by_component_pj
        assert 0 <= got.pop("allreduce_ps") <= c.comm_ps     # a part of comm_ps, added since
        got |= {"energy_by_component_pj": dict(c.energy_by_component_pj),
                "mapping": [list(m) for m in c.mapping]}
        assert got == case["cost"], (case["system"], case["model"], case["kwargs"])


@pytest.mark.parametrize("system", [DGX, SADDLE])
@pytest.mark.parametrize("model", ["opt-66b", "llama-3.1-70b", "llama-3.2-1b"])
def test_attention_equals_the_generic_per_operator_pricing(system, model):
    """The step's attention against the lower-level models it is built from: the fused GPU
    kernel over ``attention_batch``, and every (request x KV head) PIM instance placed on the
    device's channels."""
    import numpy as np
    rng = np.random.default_rng(3)
    reqs = [(int(L), int(q)) for L, q in zip(rng.integers(20, 1500, 37), rng.integers(1, 12, 37))]
    shard = load_model(model).shard(8)
    contexts, queries = np.array(reqs).T
    c = system.price_step(model, reqs, mapping={"fc": "gpu", "attention": "gpu"})
    ops = shard.attention_batch(contexts, queries)
    assert c.attention_ps == attention_ps(system.gpu, ops) * shard.layers
    assert c.gpu_busy_ps - c.fc_ps - c.other_ps == c.attention_ps
    if system.pim is None:
        return
    c = system.price_step(model, reqs, mapping={"fc": "gpu", "attention": "pim"})
    instances = [(L, shard.head_dim, q * shard.group) for L, q in reqs for _ in range(shard.kv_heads)]
    load = system.pim.attention_channels(instances, shard.bpe, False,
                                         channels=system.pim.channels * system.stacks_per_device)
    assert c.attention_ps == load.cycles * system.pim.tck_ps * shard.layers
    assert c.energy_by_component_pj["pim_bank"] == pytest.approx(
        load.column_reads * 32 * 4.4 * shard.layers * 8, rel=1e-12)


def test_round_robin_of_repeated_jobs_by_hand():
    pim = SADDLE.pim
    # 3 jobs x 2 copies = 6 jobs on 4 channels: channel 0 runs job 0 and job 2 (copy 1) ...
    load = pim.round_robin([10, 20, 30], 4, 0, repeat=2)
    assert load.busy_cycles == max(10 + 30, 10 + 30, 20, 20) and load.channels_used == 4
    assert pim.round_robin([10, 20, 30], 4, 0, repeat=1).busy_cycles == 30
    assert pim.round_robin([7, 5], 8, 0, repeat=3).channels_used == 6
    assert pim.round_robin([], 4, 0).cycles == 0


def test_round_robin_equals_placing_every_job():
    """Against placing every job on its channel, with and without refresh tails."""
    import random
    rng = random.Random(2)
    for _ in range(500):
        channels, repeat = rng.randint(1, 90), rng.randint(1, 200)
        cycles = [rng.randint(0, rng.choice((3, 10**6))) for _ in range(rng.randint(1, 40))]
        odd_extra = rng.choice((0, 0, rng.randint(1, 10**6)))
        loads, counts = [0] * channels, [0] * channels
        for i in range(len(cycles) * repeat):
            loads[i % channels] += cycles[i // repeat]
            counts[i % channels] += 1
        busiest = max(load + odd_extra * (count % 2) for load, count in zip(loads, counts) if count)
        got = SADDLE.pim.round_robin(cycles, channels, 0, repeat=repeat, odd_extra=odd_extra)
        assert got.busy_cycles == busiest
        # With refresh tails: every channel refreshed up to its last job's last ACT, the
        # slowest sets the time (round_robin asks only the channels that may be the slowest).
        tails = {(r, paired): rng.randint(0, c) for r, c in enumerate(cycles) for paired in (0, 1)}
        last = {i % channels: i // repeat for i in range(len(cycles) * repeat)}
        slowest = max(SADDLE.pim.with_refresh(load + odd_extra * (count % 2),
                                              tails[last[c], 1 - count % 2])
                      for c, (load, count) in enumerate(zip(loads, counts)) if count)
        got = SADDLE.pim.round_robin(cycles, channels, 0, repeat=repeat, odd_extra=odd_extra,
                                     tail=lambda r, paired, tails=tails: tails[r, int(paired)])
        assert got.cycles == slowest


def test_channel_loads_of_a_job_per_channel():
    """``ChannelPlacement.loads`` lists a job per channel (run once) without the placement's
    matrix product: the same loads as placing every job, with and without the odd-count extra
    (and with more copies or jobs than channels, through the product)."""
    import random

    from sim.cost.pim import ChannelPlacement
    rng = random.Random(5)
    for _ in range(300):
        channels, repeat = rng.randint(1, 90), rng.choice((1, 1, rng.randint(1, 12)))
        cycles = [rng.randint(0, 10**6) for _ in range(rng.randint(1, channels // repeat + 3))]
        odd_extra = rng.choice((0, rng.randint(1, 10**6)))
        loads, counts = [0] * channels, [0] * channels
        for i in range(len(cycles) * repeat):
            loads[i % channels] += cycles[i // repeat]
            counts[i % channels] += 1
        want = [load + odd_extra * (count % 2) for load, count in zip(loads, counts) if count]
        got = ChannelPlacement(len(cycles), channels, repeat).loads(cycles, odd_extra)
        assert got == want and all(type(load) is int for load in got)


def test_a_context_unit_is_all_an_instance_sees():
    """PIM attention is memoized per context unit (``PimStack.context_unit``): AttAcc's
    schedule lays keys out over 2 pseudo-channels x 2 stack IDs x 4 bank groups = 16 token
    units, so an instance's cycles, reads, tail and pair overlap are those of its unit's longest
    context; the command model sees every context."""
    pim = SADDLE.pim
    assert pim.context_unit == 16
    assert load_hardware("saddle", "physical").pim.context_unit == 1
    for L in range(1, 300):
        top = -(-L // 16) * 16
        for rows in (1, 8):
            assert pim.attention_instance(L, 64, rows, 2, False) == pim.attention_instance(top, 64, rows, 2, False)
            for paired in (False, True):
                assert (pim.attacc_tail(L, 128, rows, 2, False, paired)
                        == pim.attacc_tail(top, 128, rows, 2, False, paired))
        assert pim.attacc_overlap(L) == pim.attacc_overlap(top)
    assert pim.attention_instance(33, 64, 1, 2, False) != pim.attention_instance(32, 64, 1, 2, False)


@pytest.mark.parametrize("calibration", ["attacc", "physical"])
def test_step_model_equals_price_step_through_its_memos(calibration):
    """``StepModel.price`` on memos kept between steps against ``price_step`` on cold ones: steps that hit its memos (contexts within one
    PIM context unit, requests reordered to the same unfused-GPU sums) and steps that miss, on
    PIM and GPU attention, FC on GPU and PIM, one device and all."""
    from sim.cost.step import PriceCache, StepCost
    cases = []
    for name in ("saddle", "dgx-a100"):
        system = load_hardware(name, calibration)
        places = ("gpu", "pim") if system.pim else ("gpu",)
        for fc in places:
            for attention in places:
                cases.append((system, "opt-1.3b", {"fc": fc, "attention": attention}, 1))
        cases.append((system, "llama-3.1-70b", {"fc": "gpu", "attention": places[-1]}, 8))
    steps = [((100, 1), (300, 1)), ((101, 1), (305, 1)), ((305, 1), (101, 1)), ((112, 1), (320, 1)),
             ((113, 1), (321, 1)), ((40, 3), (700, 9), (5, 1)), ((41, 3), (701, 9), (6, 1))]
    for system, model, mapping, devices in cases:
        step = system.step_model(model, mapping=mapping, devices=devices, cache=PriceCache())
        for reqs in steps:
            got = StepCost.of(step.price(*zip(*reqs))[0])
            ref = system.price_step(model, reqs, mapping=mapping, devices=devices)
            assert got == ref, (system.name, mapping, reqs)


def test_a_link_the_links_file_lacks_is_blamed_on_the_platform(monkeypatch):
    # found by the config fuzzer: attacc.yaml's device_link: '' was reported as links.yaml's
    from sim.config import Configs
    for bad in ("", "calibrations", "nvlinkk"):
        configs = Configs((("hardware.attacc.device_link", bad),))
        with pytest.raises(ConfigError, match=rf"attacc.yaml: device_link: '{bad}' is not a link "
                                              r"of .*links.yaml$"):
            load_hardware("attacc", configs=configs)
