import pytest

from common.errors import ConfigError
from sim.manager import ManagerConfig
from sim.manager.transactions import Device


def test_shipped_config():
    c = ManagerConfig.load()
    assert (c.shared_entries, c.eager_entries, c.micro_batches) == (512, 512, 8)
    assert c.max_requests == 128 and c.tau == 19661          # 0.3 in UQ1.16
    assert c.static_dlm_fc is Device.GPU and c.static_tlm_attention is Device.PIM


YAML = """\
controller: {max_requests: 128, max_draft_len: 16, tau: 0.5}
pools: {shared_entries: 512, eager_entries: 512, micro_batches: 8}
scheduler:
  dynamic: true
  dlm_fc_threshold: 10
  tlm_attention_threshold: 10
  static: {dlm_fc: gpu, tlm_attention: pim}
"""


@pytest.mark.parametrize("old, new, match", [
    ("tau: 0.5", "tau: 1.5", r"controller.tau: expected a probability in \[0, 1\], found 1.5"),
    ("max_draft_len: 16", "max_draft_len: 64", r"controller.max_draft_len: expected an integer in \[1, 63\]"),
    ("max_requests: 128", "max_requests: 129", r"controller.max_requests: expected an integer in \[1, 128\]"),
    ("micro_batches: 8", "micro_batches: 7", "pools.eager_entries: 512 does not split evenly over 7"),
    ("shared_entries: 512", "shared_entries: '512'", "pools.shared_entries: expected int"),
    ("dlm_fc: gpu", "dlm_fc: tpu", "scheduler.static.dlm_fc: expected gpu or pim, found 'tpu'"),
    ("dynamic: true", "dynamic: 1", "scheduler.dynamic: expected bool"),
    ("  tlm_attention_threshold: 10\n", "", "missing key 'scheduler.tlm_attention_threshold'"),
])
def test_bad_values_name_file_and_key(tmp_path, old, new, match):
    path = tmp_path / "manager.yaml"
    assert old in YAML
    path.write_text(YAML.replace(old, new))
    with pytest.raises(ConfigError, match=match) as info:
        ManagerConfig.load(path)
    assert str(path) in str(info.value)


def test_good_file_loads(tmp_path):
    path = tmp_path / "manager.yaml"
    path.write_text(YAML)
    assert ManagerConfig.load(path).tau == 32768
