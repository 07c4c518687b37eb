"""The ``attacc`` calibration (AttAcc's simulator as the paper's substrate) against hand-worked
values, and the reference tables it is validated on (format, provenance, bounds)."""
import json
import math
import subprocess
import sys

import pytest

from sim.config import calibrated
from sim.cost.gpu import load_gpu
from sim.cost.links import load_link
from sim.cost.pim import load_pim
from sim.cost.system import load_system
from sim.cost.validation import (BOUNDS, TABLE_FILES, compare, fit_attacc_schedule,
                                 known_deviations, load_table, summarize)
from sim.errors import ConfigError
from sim.model import FC, load_model

GPU = load_gpu("a100", "attacc")


def test_systems_default_to_the_attacc_calibration_and_physical_is_available():
    assert load_system("saddle").calibration == "attacc"
    phys = load_system("saddle", "physical")
    assert phys.calibration == "physical" and phys.gpu.tile_candidates == ()
    with pytest.raises(ConfigError, match="calibration"):
        load_system("saddle", "nonsense")


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
    ps = GPU.attention_ps([_times(o, 16) for o in ops])
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
