"""`saddle cost ...` end to end through the CLI entry point."""
import json

import pytest

from sim.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_pim_attention_json(capsys):
    code, out, _ = run(capsys, "cost", "pim-attention", "--instances", "1", "--context", "64",
                       "--head-dim", "64", "--query-tokens", "1", "--calibration", "physical",
                       "--json")
    data = json.loads(out)
    assert code == 0
    assert data["cycles"] == 128                   # the hand-worked schedule (test_pim.py)
    assert data["time_ns"] == pytest.approx(128 * 0.769)
    assert data["channels_used"] == 1


def test_step_json_keys_and_sum(capsys):
    code, out, _ = run(capsys, "cost", "step", "--system", "attacc", "--model", "opt-66b",
                       "--batch", "16", "--context", "512", "--json")
    data = json.loads(out)
    b = data["breakdown"]
    assert code == 0
    assert set(b) == {"attention_ns", "fc_ns", "comm_ns", "other_ns"}
    assert data["time_ns"] == pytest.approx(sum(b.values()))
    assert data["mapping"] == {"fc": "gpu", "attention": "pim"}


def test_step_errors_exit_2(capsys):
    code, _, err = run(capsys, "cost", "step", "--system", "dgx-a100", "--model", "opt-66b",
                       "--batch", "4", "--context", "64", "--fc", "pim")
    assert code == 2 and "has no PIM" in err
    code, _, err = run(capsys, "cost", "step", "--system", "nope", "--model", "opt-66b",
                       "--batch", "4", "--context", "64")
    assert code == 2 and "unknown hardware config 'nope'" in err


def test_roofline_writes_png_and_sides(capsys, tmp_path):
    out_png = tmp_path / "roof.png"
    code, out, _ = run(capsys, "cost", "roofline", "--pair", "opt-66b+opt-1.3b",
                       "--out", str(out_png), "--json")
    points = json.loads(out)["points"]
    assert code == 0 and out_png.stat().st_size > 10_000
    assert len(points) == 8
    side = {p["label"]: p["faster"] for p in points}
    assert side["DLM FC (B=4, d=1)"] == "pim"      # tiny batch: GEMV, PIM's home ground
    assert side["TLM FC (B=12, d=8)"] == "gpu"     # 108 tokens per weight: GPU
