"""The ``attacc`` calibration (AttAcc's simulator as the paper's substrate) against hand-worked
values, and the reference tables it is validated on (format, provenance, bounds)."""
import json
import math
import subprocess
import sys

import pytest

from common.errors import ConfigError
from sim.config import calibrated
from sim.cost.gpu import load_gpu
from sim.cost.links import load_link
from sim.cost.pim import load_pim
from sim.cost.system import load_hardware
from sim.model import FC, load_model
from tests.sim.cost.gpu_attention import attention_ps
from validation.compare import (
    BOUNDS,
    TABLE_FILES,
    Point,
    compare,
    fit_attacc_schedule,
    known_deviations,
    load_table,
    summarize,
)

GPU = load_gpu("a100", "attacc")


def test_systems_default_to_the_attacc_calibration_and_physical_is_available():
    assert load_hardware("saddle").calibration == "attacc"
    phys = load_hardware("saddle", "physical")
    assert phys.calibration == "physical" and phys.gpu.tile_candidates == ()
    with pytest.raises(ConfigError, match="calibration"):
        load_hardware("saddle", "nonsense")


def test_calibration_overrides_are_merged_and_checked(tmp_path):
    data = {"a": 1, "link": {"x": 1, "y": 2}, "calibrations": {"attacc": {"a": 3, "link": {"y": 5}}}}
    assert calibrated(data, "attacc", source="f") == {"a": 3, "link": {"x": 1, "y": 5}}
    assert calibrated(data, "physical", source="f") == {"a": 1, "link": {"x": 1, "y": 2}}
    with pytest.raises(ConfigError, match="f: calibrations.typo: unknown calibration"):
        calibrated({"calibrations": {"typo": {}}}, "attacc", source="f")


def test_allreduce_by_hand():
    # AttAcc: 7 steps of 6.06 us + 0.009 ns per byte of the 1/8 chunk. 16 tokens x 9216 x 2 B.
    nv = load_link("nvlink", calibration="attacc")
    chunk = 16 * 9216 * 2 // 8
    assert nv.allreduce_ps(16 * 9216 * 2, 8) == 7 * (6_060_000 + math.ceil(chunk * 9.0))
    # the ring of the physical calibration: 14 steps of 700 ns + chunk / 240 GB/s
    ring = load_link("nvlink")
    assert ring.allreduce_ps(16 * 9216 * 2, 8) == 14 * (700_000 + math.ceil(chunk / 240e9 * 1e12))


def test_norm_and_activation_fits_by_hand():
    # norm: 6.87 us + 0.0016 ns/B at 1555 GB/s, scaled to 2039 GB/s
    nbytes = 3 * 16 * 9216 * 2
    assert GPU.elementwise_ps(0, nbytes, "norm") == 6_870_000 + math.ceil(nbytes * 1.6 * 1555 / 2039)
    assert GPU.elementwise_ps(0, nbytes, "activation") == 8_290_000 + math.ceil(nbytes * 0.447 * 1555 / 2039)


def test_searched_gemm_tile_and_memory_wave_by_hand():
    # OPT-66B FFN up-projection share, 16 tokens: 9216 x 4608. Tiles 16 x 16 (L1 traffic
    # 16 * 9216 * 288 + 9216 * 4608 + 16 * 4608 elements, the least / utilisation^2): 288 blocks
    # over 108 SMs = 3 waves of which 2/3 ... utilisation 288 / 324; the weight stream slows by
    # 324 / 288: AttAcc prints 55.42 us.
    op = FC("ffn_up", 1, tokens=16, k=9216, n=4608, bpe=2)
    assert GPU.searched_tile(16, 4608, 9216, 2) == (16, 16, 288)
    k = GPU.fc_kernel(op)
    assert k.dram == (9216 * 4608 + 16 * 9216 + 16 * 4608) * 2
    assert k.ps == math.ceil(k.dram / (2039e9 * 0.85) * 324 / 288 * 1e12)
    assert round(k.ps / 1e6, 2) == 55.42


def test_unfused_attention_by_hand():
    # OPT-66B share (9 heads), 16 requests at L = 512, one query: 144 thread blocks over 108 SMs
    # (utilisation 144 / 216) for scores, softmax and context, each reading and writing its
    # operands. AttAcc prints 16.49 + 0.26 + 16.49 us per layer.
    shard = load_model("opt-66b").shard(8)
    ops = [o for o in shard.attention_ops(512, 1)]
    ps = attention_ps(GPU, [_times(o, 16) for o in ops])
    assert [round(GPU.kernel_ps(o.flops * 16, o.bytes_total * 16, 144) / 1e6, 2) for o in ops] \
        == [16.49, 0.26, 16.49]
    assert ps == sum(GPU.kernel_ps(o.flops * 16, o.bytes_total * 16, 144) for o in ops)


def _times(op, n):
    """``op`` for ``n`` identical requests (array-valued counts)."""
    import dataclasses

    import numpy as np
    return dataclasses.replace(op, context=np.full(n, op.context), queries=np.full(n, op.queries))


def test_attacc_pim_schedule_by_hand():
    pim = load_pim("hbm3_pim", "attacc")
    # One head, L = 1024, head dim 64, no power constraint: keys over 16 units -> 64 per unit,
    # one column each (64 dims = 4 banks x 16 lanes): 64 columns for K and 64 for V = 2 rows
    # each. 128 MACs x 4 + (4 - 2) row changes x (8 + 19 + 19 - 4) + 4 score groups x 15 + one
    # context group x 9 + 45 = 710; alone on its channel it runs unpaired. Ramulator2: 706.
    assert pim.attention_channels([(1024, 64, 1)], 2, False).cycles == 710
    # Two heads on one channel overlap one's probability broadcasts with the other's scores:
    # each is charged 710 - (4 x 15 + 12) // 2 = 674, 1348 for the pair. Ramulator2: 1355.
    assert pim.attention_channels([(1024, 64, 1)] * 17, 2, False).cycles == 1348
    # q query rows use every column q times while its row is open: only the MACs grow.
    one = pim.attacc_attention(1024, 64, 1, 2, False)[0]
    assert pim.attacc_attention(1024, 64, 9, 2, False)[0] - one == 8 * 128 * 4


def test_attacc_refresh_rule_by_hand():
    """A refresh falls due every REFI = 5070; under ``until_last_activate`` it delays the work
    (RFC = 456) only if it falls due before the busiest channel's last row activation."""
    pim = load_pim("hbm3_pim", "attacc")
    assert pim.refresh == "until_last_activate" and load_pim("hbm3_pim").refresh == "every"
    # Skipped: 256 heads, L 512, head dim 64, no power constraint: 16 instances (8 pairs) per
    # channel. One instance: 32 keys per unit, one column each, 32 columns of K and of V (one
    # row each): 64 MACs x 4 + 2 score groups x 15 + one context group x 9 + 45 = 340, less
    # half of (2 x 15 + 12) for its pair = 319; 16 x 319 = 5104 cycles. The last instance is
    # the second of a pair and AttAcc's generator replays the first's context MACs on the row
    # still open, so the last ACT opens the first's V row: RCD 19 + 2 x 32 MACs x 4 + 2 context
    # groups x 9 = 293 cycles before the end, at 4811 < 5070. No refresh: 5104.
    # Ramulator2: 5113, last ACT at 4825, the REF issued at 5107 (the last MAC + RTP_L + 1).
    assert pim.attacc_tail(512, 64, 1, 2, False, paired=True) == 293
    skipped = pim.attention_channels([(512, 64, 1)] * 256, 2, False)
    assert (skipped.busy_cycles, skipped.cycles) == (5104, 5104)
    assert pim.with_refresh(5104) == 5104 + 456          # what the rule `every` charges
    # Charged: 128 heads, L 1024, head dim 64, no power constraint: 8 per channel, 674 each
    # (test_attacc_pim_schedule_by_hand) = 5392. V is 64 columns, two rows: the last ACT opens
    # the second, 19 + 32 MACs x 4 + one context group x 9 = 156 before the end, at 5236 >=
    # 5070: the REF holds that ACT back, 5392 + 456 = 5848. Ramulator2: 5879 (5441 without
    # refresh; last ACT at 5283).
    assert pim.attacc_tail(1024, 64, 1, 2, False, paired=True) == 156
    charged = pim.attention_channels([(1024, 64, 1)] * 128, 2, False)
    assert (charged.busy_cycles, charged.cycles) == (5392, 5848)
    # Alone on its channel (odd count) a one-row V is only its own context phase.
    assert pim.attacc_tail(512, 64, 1, 2, False, paired=False) == 19 + 32 * 4 + 9
    # The boundary: an ACT at REFI - 1 goes ahead, one at REFI waits for the refresh.
    assert pim.with_refresh(5069 + 100, 100) == 5169
    assert pim.with_refresh(5070 + 100, 100) == 5170 + 456
    # The second refresh falls due at 10140 on the stretched clock: a last ACT at 9800 moves to
    # 10256 after the first and waits for it too (10200 + 2 x 456); one at 9600 moves to 10056
    # and goes ahead (10000 + 456).
    assert pim.with_refresh(10_200, 400) == 11_112 and pim.with_refresh(10_000, 400) == 10_456
    # round_robin asks the last job of each channel that may be the slowest. Jobs [2600, 2500,
    # 2700, 2400] on 2 channels: channel 0 runs jobs 0 and 2 (5300, its last job 2, second of a
    # pair), channel 1 jobs 1 and 3 (4900, below REFI: never refreshed, not asked). A tail of
    # 300 puts channel 0's last ACT at 5000: no refresh, 5300; one of 200 at 5100: 5300 + 456.
    seen = []
    def tail(job, paired, cycles=300):
        seen.append((job, paired))
        return cycles
    jobs = [2600, 2500, 2700, 2400]
    assert pim.round_robin(jobs, 2, 0, tail=tail).cycles == 5300
    assert seen == [(2, True)]
    assert pim.round_robin(jobs, 2, 0, tail=lambda job, paired: 200).cycles == 5756
    assert pim.round_robin(jobs, 2, 0).cycles == 5756
    # With repeat: [2600, 2500] x 2 -> 2600, 2600, 2500, 2500: 5100 on each channel, job 1
    # last on both; a tail of 100 (last ACT 5000) skips, one of 20 (5080) charges.
    assert pim.round_robin([2600, 2500], 2, 0, repeat=2, tail=lambda j, p: 100).cycles == 5100
    assert pim.round_robin([2600, 2500], 2, 0, repeat=2, tail=lambda j, p: 20).cycles == 5556
    # 3 jobs on 2 channels: channel 0 ends with job 2 as the second of a pair (5300), channel 1
    # runs job 1 alone (5200, and 5656 if refreshed: it may still be the slowest, so asked).
    seen.clear()
    assert pim.round_robin([2600, 5200, 2700], 2, 0, tail=tail).cycles == 5300
    assert seen == [(2, True), (1, False)]


def test_physical_calibration_charges_every_refresh():
    phys = load_pim("hbm3_pim")
    load = phys.attention_channels([(512, 64, 1)] * 256, 2, False)
    assert load.cycles == phys.with_refresh(load.busy_cycles) > load.busy_cycles


def test_known_deviations_are_listed_apart(tmp_path):
    """The mechanism of validation/known_deviations.yaml: a listed point out of its bound does
    not fail the component, is reported with its error and whether it is still out."""
    points = [Point("attention", "a", 112, 100), Point("attention", "b", 101, 100)]
    assert not summarize(points)[0]["within"]
    (row,) = summarize(points, {("attention", "a"): "measured"})
    assert row["within"] and row["worst_at"] == "b"
    assert row["known_deviations"] == [{"where": "a", "error": pytest.approx(0.12),
                                        "still_out": True, "why": "measured"}]
    (row,) = summarize(points, {("attention", "b"): "fixed since"})
    assert not row["within"] and not row["known_deviations"][0]["still_out"]
    (tmp_path / "tables").mkdir()
    assert known_deviations(tmp_path / "tables") == {}
    (tmp_path / "known_deviations.yaml").write_text(
        "- {component: attention, where: somewhere, why: because}\n")
    assert known_deviations(tmp_path / "tables") == {("attention", "somewhere"): "because"}
    (tmp_path / "known_deviations.yaml").write_text("- {component: typo, where: x, why: y}\n")
    with pytest.raises(ConfigError, match="component: expected one of"):
        known_deviations(tmp_path / "tables")
    # Read by common.config's loader: a key given twice and bad YAML name the file and line.
    path = tmp_path / "known_deviations.yaml"
    path.write_text("- component: attention\n  where: x\n  why: y\n  where: z\n")
    with pytest.raises(ConfigError, match=f"^{path}: line 4: key 'where' given twice "
                                          r"\(first at line 2\)"):
        known_deviations(tmp_path / "tables")
    path.write_text("{component: attention}\n")
    with pytest.raises(ConfigError, match=f"^{path}: expected a list at the top level, found dict"):
        known_deviations(tmp_path / "tables")
    path.write_text("")
    assert known_deviations(tmp_path / "tables") == {}


def test_attacc_schedule_counts_are_the_fit_to_the_ramulator_table():
    a = load_pim("hbm3_pim", "attacc").attacc
    configured = {k: getattr(a, k) for k in ("per_score_group", "per_context_group", "fixed",
                                             "pair_overlap")}
    assert fit_attacc_schedule() == configured


@pytest.mark.parametrize("kind", sorted(TABLE_FILES))
def test_reference_tables_carry_their_provenance(kind):
    doc = load_table(kind)
    assert doc["command"].startswith("python validation/regenerate.py")
    assert set(doc["sources"]) == {"attacc_simulator", "ramulator2"}
    p = doc["parameters"]
    if kind == "pim_attention":
        assert len(doc["rows"]) == len(p["blocks"]) * len(p["heads"]) * len(p["contexts"])
    else:
        assert len(doc["rows"]) == (len(p["systems"]) * len(p["models"]) * len(p["batches"])
                                    * len(p["contexts"]))
        assert "2039" in p["gpu"]


def test_bad_table_is_named(tmp_path):
    (tmp_path / TABLE_FILES["pim_attention"]).write_text(json.dumps({"schema": "x"}))
    with pytest.raises(ConfigError, match="ramulator_pim_attention.json: missing key 'kind'"):
        load_table("pim_attention", tmp_path)


def test_attacc_calibration_is_within_the_bounds_of_the_references():
    known = known_deviations()
    rows = summarize(compare("attacc"), known)
    assert {r["component"] for r in rows} == set(BOUNDS)
    bad = [(r["component"], r["mean_abs_error"], r["worst_error"], r["worst_at"])
           for r in rows if not r["within"]]
    assert not bad
    # every listed deviation is a real point, still out of its bound (else remove it)
    listed = [k for r in rows for k in r["known_deviations"]]
    assert len(listed) == len(known) and all(k["still_out"] for k in listed)


def test_saddle_validate_command():
    out = subprocess.run([sys.executable, "-m", "sim.cli", "validate", "--calibration", "attacc",
                          "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    rows = report["calibrations"]["attacc"]["components"]
    assert all(r["within"] for r in rows) and report["tables"]["pim_attention"]


def test_cost_readme_table_is_what_saddle_validate_writes():
    from common.marked import marked_blocks
    from validation.compare import README, README_COMMAND, readme_table
    blocks = marked_blocks(README.read_text(), README_COMMAND)
    assert blocks == {"errors": readme_table()}, \
        f"{README}'s validation table is stale: run `saddle validate --readme`"
