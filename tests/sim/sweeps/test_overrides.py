"""Config overrides (sim/overrides.py): keys resolved to files, refused keys and values, the
value set under every calibration, no object built from other values reused, run keys."""
import dataclasses
import hashlib
import json

import pytest

from common.config import load_yaml
from common.errors import ConfigError
from common.paths import CONFIGS
from sim.config import Configs
from sim.cost.links import load_link
from sim.experiments.grid import LATER_FIELDS, run_key
from sim.overrides import normalize, resolve
from sim.systems.run import RunParams, simulate

NVLINK = "hardware.links.nvlink.step_latency_ns"


def test_keys_name_a_file_and_a_key_inside_it():
    assert resolve("hardware.hbm3_pim.pim.mac_spacing", "x") == \
        (CONFIGS / "hardware/hbm3_pim.yaml", ("pim", "mac_spacing"))
    assert resolve("manager.pools.shared_entries", "x") == \
        (CONFIGS / "manager.yaml", ("pools", "shared_entries"))
    # a file name with a dot: the longest file name that starts the key
    assert resolve("models.opt-1.3b.layers", "x")[0] == CONFIGS / "models/opt-1.3b.yaml"


@pytest.mark.parametrize("key, value, message", [
    ("hardware.links.nvlink.step_latency", 1, "unknown key (did you mean 'nvlink.step_latency_ns'?)"),
    ("hardware.links.nvlink", 1, "a mapping, not a value"),
    ("hardware.linkz.nvlink.step_latency_ns", 1, "did you mean 'hardware.links.nvlink.step_latency_ns'?"),
    ("tau.opt-66b+opt-1.3b.tau", 0.5, "cannot be overridden: use the key tau"),
    (NVLINK, "fast", "expected a number (as 700 in configs/hardware/links.yaml), found 'fast'"),
    ("systems.saddle.eager", 1, "expected a bool"),
])
def test_unknown_keys_and_values_of_another_kind_are_refused(key, value, message):
    with pytest.raises(ConfigError, match="^sweep.yaml: overrides." + key.replace("+", r"\+")) as err:
        normalize({key: value}, "sweep.yaml: overrides")
    assert message in str(err.value)


def test_an_override_holds_under_every_calibration_and_only_in_its_context():
    assert normalize({NVLINK: 2000}, "x") == ((NVLINK, 2000),)
    before = load_link("nvlink", "links", "attacc")
    assert before.latency_ps == 6_060_000           # calibrations.attacc sets 6060 ns
    configs = Configs(normalize({NVLINK: 2000}, "x"))
    assert load_link("nvlink", "links", "attacc", configs=configs).latency_ps == 2_000_000
    assert load_link("nvlink", "links", "physical", configs=configs).latency_ps == 2_000_000
    assert configs.yaml(CONFIGS / "hardware/links.yaml")["gpu_pim"]["latency_ns"] == 500
    assert load_link("nvlink", "links", "attacc") == before
    # one calibration only
    configs = Configs(normalize({"hardware.links.calibrations.attacc.nvlink.step_latency_ns": 100},
                                "x"))
    assert load_link("nvlink", "links", "attacc", configs=configs).latency_ps == 100_000
    assert load_link("nvlink", "links", "physical", configs=configs).latency_ps == 700_000


def test_runs_under_overrides_reuse_nothing_built_from_other_values(tiny_trace_path):
    base = RunParams(system="pim-ad", pair="opt-66b+opt-1.3b", batch=2, trace=tiny_trace_path,
                     split="all")
    slow = dataclasses.replace(base, overrides=normalize({NVLINK: 60_000}, "x"))
    a = simulate(slow)[0].to_dict()
    plain = simulate(base)[0].to_dict()
    b = simulate(slow)[0].to_dict()
    assert a == b
    assert plain == simulate(base)[0].to_dict()
    # Every TLM pass has 2 all-reduces per layer (64 layers) of 7 steps (1 per peer under the
    # attacc calibration), each 60000 - 6060 ns longer; nothing else changes.
    per_pass = 2 * 64 * 7 * (60_000 - 6060) * 1e-9
    assert plain["verification_passes"] == 128
    assert a["time_s"] - plain["time_s"] == pytest.approx(128 * per_pass, rel=1e-12)
    assert a["tokens"] == plain["tokens"]


def test_run_keys_of_runs_without_overrides_are_unchanged():
    p = RunParams(system="gpu-ad", pair="opt-66b+opt-1.3b", batch=4)
    fields = dataclasses.asdict(p) | {"source": None}
    for later in LATER_FIELDS:
        del fields[later]                       # the key as computed before these existed
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:10]
    assert run_key(p) == f"opt-66b+opt-1.3b_gpu-ad_b4_{digest}"
    for other in (dataclasses.replace(p, overrides=((NVLINK, 2000),)),
                  dataclasses.replace(p, dlm_fc_threshold=4), dataclasses.replace(p, aging_passes=2)):
        assert run_key(other) != run_key(p)


def test_load_yaml_parses_each_content_once_and_hands_out_copies(tmp_path):
    """load_yaml caches the parse by the file's bytes: a caller that changes its dict does not
    change the next load, and a file rewritten with other bytes of the same size (within the
    file system's time stamp resolution) is read anew."""
    path = tmp_path / "c.yaml"
    path.write_text("a: {b: [1, 2]}\n")
    first = load_yaml(path)
    first["a"]["b"].append(3)
    assert load_yaml(path) == {"a": {"b": [1, 2]}}
    path.write_text("a: {b: [7, 2]}\n")
    assert load_yaml(path) == {"a": {"b": [7, 2]}}
    path.write_bytes(b"a: \xff\n")
    with pytest.raises(ConfigError, match="c.yaml.*invalid YAML"):
        load_yaml(path)
