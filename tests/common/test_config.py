"""common.config: YAML files read with errors that name the file and the lines."""
import re

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


def test_a_value_where_a_mapping_belongs_is_a_config_error():
    # found by the config fuzzer: a100.yaml's calibrations.attacc.elementwise_fit.activation: 0
    from common.config import get
    with pytest.raises(ConfigError, match=r"^a100.yaml: elementwise_fit.activation: expected a "
                                          r"mapping with 'fixed_ns', found 0$"):
        get(0, "fixed_ns", float, source="a100.yaml", prefix="elementwise_fit.activation")


@pytest.mark.parametrize("text, message", [
    ("", "the file is empty (no keys); expected a mapping of keys"),
    ("# only a comment\n", "the file is empty (no keys); expected a mapping of keys"),
    ("- a\n- b\n", "expected a mapping of keys at the top level, found a list"),
])
def test_an_empty_or_listed_config_says_what_it_is(tmp_path, text, message):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(f"{path}: {message}")):
        load_yaml(path)
