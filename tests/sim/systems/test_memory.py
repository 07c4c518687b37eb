"""The memory-capacity check (sim/systems/memory.py) on hand-computed sizes: weights, KV caches
and activations per GPU and per PIM stack, the error and warning, and a batch larger than the
requests a run replays."""
import pytest

from common.errors import ConfigError
from sim.cost.system import load_hardware
from sim.model import load_model, load_pair
from sim.systems import memory
from sim.systems.resolve import RunParams, memory_shape, resolve
from sim.systems.spec import load_system

GIB = 2**30
OPT175 = "opt-175b+opt-6.7b"


def test_weight_and_kv_bytes_by_hand():
    m = load_model("opt-66b")
    # per layer: qkv 9216 x 3*9216, out 9216 x 9216, up and down 9216 x 36864; LM head 9216 x 50272
    layer = 9216 * 27648 + 9216 * 9216 + 2 * 9216 * 36864
    assert m.weight_bytes == m.stored_bytes == (64 * layer + 9216 * 50272) * 2 == 131_386_245_120
    assert m.kv_bytes_per_token == 2 * 64 * 72 * 128 * 2 == 2_359_296
    llama = load_model("llama-3.1-70b")         # its token embedding is not its LM head
    assert llama.stored_bytes - llama.weight_bytes == 128256 * 8192 * 2


def gpu_sd_175b(batch):
    p = RunParams(system="gpu-sd", pair=OPT175, batch=batch, draft_length=8, sequence_length=512)
    return (load_hardware("dgx-a100"), load_pair(OPT175), load_system("gpu-sd"),
            {"dlm_fc": "gpu", "dlm_attention": "gpu", "tlm_fc": "gpu", "tlm_attention": "gpu"},
            memory_shape(p))


def test_gpu_sd_opt175b_per_gpu_by_hand():
    system, pair, spec, mapping, shape = gpu_sd_175b(128)
    assert shape == memory.Shape(128, 512, 128 * 9)
    got = {p.what.split(" (")[0]: p.bytes for p in memory.pieces(system, pair, spec, mapping, shape)}
    # one GPU's eighth of OPT-175B: 12 of 96 heads, FFN 6144 of 49152, vocab ceil(50272 / 8)
    layer = 12288 * 36 * 128 + 1536 * 12288 + 2 * 12288 * 6144
    assert got["TLM weights"] == (96 * layer + 12288 * 6284) * 2 == 43_640_979_456
    assert got["TLM KV cache"] == 128 * 512 * (2 * 96 * 12 * 128 * 2) == 36 * GIB
    assert got["DLM weights"] == load_model("opt-6.7b").weight_bytes == 13_296_730_112
    assert got["DLM KV cache"] == 16 * 512 * (2 * 32 * 32 * 128 * 2) == 4 * GIB
    # residual stream + the widest FC (LM head share: 12288 in, 6284 out) + one layer's scores
    assert got["activations"] == 1152 * (12288 + 12288 + 6284) * 2 + 1152 * 12 * 512 * 2
    need = sum(got.values())
    assert need == 99_972_639_744 > 80 * GIB
    found = memory.overflow(system, pair, spec, mapping, shape)
    assert "each GPU (a100, memory_gb) of dgx-a100 needs 93.11 GiB, has 80.00 GiB" in found
    # batch 85 needs 79.74 GiB, batch 86 80.02 GiB
    assert memory.largest_batch(system, pair, spec, mapping, shape) == 85


def test_pim_stack_holds_the_first_channels_instances():
    # PIM-AD, OPT-66B, batch 128 at 1024: 9 KV heads per device -> 1152 instances over 80
    # channels; the first stack's 16 channels get 15 each (14 rounds + the first 16 of 32 left)
    assert memory._kv_instances_on_first_stack(1152, 16, 5) == 240
    p = RunParams(system="pim-ad", pair="opt-66b+opt-1.3b", batch=128, sequence_length=1024)
    parts = memory.pieces(load_hardware("attacc"), load_pair(p.pair), load_system("pim-ad"),
                          dict(load_system("pim-ad").static_mapping), memory_shape(p))
    stack = [x for x in parts if x.device == "stack"]
    assert [x.bytes for x in stack] == [240 * 1024 * 2 * 64 * 128 * 2] == [int(7.5 * GIB)]


def test_a_run_that_does_not_fit_is_one_clear_error():
    p = RunParams(system="gpu-sd", pair=OPT175, batch=128, draft_length=8, sequence_length=512,
                  requests=128, source="exp.yaml")
    with pytest.raises(ConfigError) as e:
        resolve(p)
    msg = str(e.value)
    assert msg.startswith("exp.yaml: gpu-sd (d 8) on opt-175b+opt-6.7b at batch 128")
    for part in ("needs 93.11 GiB, has 80.00 GiB", "TLM weights (opt-175b, 1/8) 40.64",
                 "DLM weights (opt-6.7b, a copy per device) 12.38", "largest batch that fits is 85",
                 "memory_check: warn"):
        assert part in msg


def test_warn_simulates_and_keeps_the_warning_out_of_the_record():
    p = RunParams(system="gpu-sd", pair=OPT175, batch=128, draft_length=8, sequence_length=512,
                  requests=128, memory_check="warn")
    setup = resolve(p)
    assert len(setup.warnings) == 1 and "needs 93.11 GiB" in setup.warnings[0]
    assert "warnings" not in setup.annotations()
    with pytest.raises(ConfigError, match="memory_check: expected one of"):
        resolve(RunParams(system="gpu-ad", pair=OPT175, batch=8, requests=8, memory_check="maybe"))


def test_a_smaller_stack_is_named_with_its_numbers():
    p = RunParams(system="pim-ad", pair="opt-66b+opt-1.3b", batch=128, sequence_length=1024,
                  requests=128, overrides=(("hardware.hbm3_pim.capacity_gb", 4.0),))
    with pytest.raises(ConfigError, match=r"each PIM stack \(hbm3_pim, capacity_gb\) of attacc "
                                          r"needs 7\.50 GiB, has 4\.00 GiB: TLM KV cache"):
        resolve(p)


def test_specpim_search_picks_a_mapping_that_fits():
    # PIM-SD OPT-175B batch 128: 3 of the 8 placements overflow a GPU; the chosen one fits
    p = RunParams(system="pim-sd", pair=OPT175, batch=128, draft_length=8, sequence_length=512,
                  requests=128)
    setup = resolve(p)
    assert setup.warnings == []
    assert memory.overflow(setup.costs.system, load_pair(OPT175), setup.spec, setup.mapping,
                           memory_shape(p)) is None


def test_batch_larger_than_the_requests_is_an_error():
    p = RunParams(system="gpu-ad", pair="opt-66b+opt-1.3b", batch=100000, requests=8,
                  source="exp.yaml")
    with pytest.raises(ConfigError, match="exp.yaml: batch 100000 exceeds the 8 requests the run "
                                          "replays"):
        resolve(p)


EXPERIMENT = """name: mem
pairs: [opt-175b+opt-6.7b]
batches: [64, 128]
sequence_length: max
systems: [{system: gpu-sd, draft_length: 8}, {system: gpu-ad}]
workload: {split: test, requests: 128}
"""


def test_an_experiment_checks_memory_before_its_first_run(tmp_path, capsys):
    from sim.cli import main
    from sim.experiments.grid import load_experiment
    from sim.experiments.runner import write_results
    path = tmp_path / "mem.yaml"
    path.write_text(EXPERIMENT)
    with pytest.raises(ConfigError, match=rf"^{path}: gpu-sd \(d 8\) on opt-175b\+opt-6.7b at batch "
                                          r"128 and sequence length 512 does not fit in memory"):
        load_experiment(path)
    assert main(["run", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs 93.11 GiB, has 80.00 GiB" in err[0]
    assert not (tmp_path / "out" / "runs").exists()
    path.write_text(EXPERIMENT + "memory_check: warn\n")
    experiment, runs = load_experiment(path)
    (warning,) = experiment["warnings"]          # batch 64 and gpu-ad fit
    assert warning.startswith(f"{path}: gpu-sd (d 8) on opt-175b+opt-6.7b at batch 128")
    assert {p.memory_check for p in runs} == {"warn"}
    write_results(tmp_path / "w", experiment, [], [])
    import json
    assert json.loads((tmp_path / "w" / "results.json").read_text())["warnings"] == [warning]
    path.write_text(EXPERIMENT + "memory_check: never\n")
    with pytest.raises(ConfigError, match=r"memory_check: expected one of \['error', 'warn'\], "
                                          "found 'never'"):
        load_experiment(path)
