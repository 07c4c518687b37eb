"""common.config: YAML files read with errors that name the file and the lines."""
import pytest

from common.config import load_yaml
from common.errors import ConfigError


@pytest.mark.parametrize("text, line, first, key", [
    ("a: 1\nb: 2\na: 3\n", 3, 1, "a"),
    ("x:\n  y: 1\n  z: 2\n  y: 4\n", 4, 2, "y"),
    ("{a: 1, a: 2}\n", 1, 1, "a"),
    ("runs:\n  - batch: 8\n    batch: 16\n", 3, 2, "batch"),
])
def test_a_key_given_twice_names_both_lines(tmp_path, text, line, first, key):
    path = tmp_path / "dup.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_yaml(path)
    assert str(info.value) == (f"{path}: line {line}: key {key!r} given twice (first at line "
                               f"{first}); a YAML mapping takes each key once")


def test_merge_keys_are_not_duplicates(tmp_path):
    path = tmp_path / "merge.yaml"
    path.write_text("base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  x: 3\n")
    assert load_yaml(path) == {"base": {"x": 1, "y": 2}, "d": {"x": 3, "y": 2}}


def test_the_same_key_in_two_mappings_is_fine(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("a: {k: 1}\nb: {k: 2}\n")
    assert load_yaml(path) == {"a": {"k": 1}, "b": {"k": 2}}
