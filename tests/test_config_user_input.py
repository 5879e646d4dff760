"""What users type into experiment files and ``--set``: numbers as Python reads them, and files that are
not text (another encoding, a directory, a binary) reported in one line naming the file."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from flamingo_sim.config import apply_overrides, from_mapping, load_config, load_yaml
from flamingo_sim.errors import ConfigError


@dataclass(frozen=True)
class Knobs:
    lr: float = 0.05
    rounds: int = 10
    flag: bool = False
    label: str = "x"
    anything: Any = None
    seeds: list[int] = field(default_factory=lambda: [0])


# (what the user types, what Python reads it as); PyYAML's YAML 1.1 read the first four as strings
NUMBERS = [
    ("1e-3", 0.001),
    ("1E5", 100000.0),
    ("1e3", 1000.0),
    ("2.5e-4", 0.00025),
    ("-1e-3", -0.001),
    ("+1E+2", 100.0),
    ("1_000e-3", 1.0),
    (".5", 0.5),
    ("1_000", 1000),
    ("1_000.5", 1000.5),
    ("0.05", 0.05),
    ("1.0e-3", 0.001),
    ("3", 3),
]


@pytest.mark.parametrize("typed,value", NUMBERS)
def test_numbers_in_set_read_as_python_reads_them(typed, value):
    assert float(typed) == value  # the table is Python's reading
    data = apply_overrides({}, [f"anything={typed}"])
    assert data["anything"] == value and type(data["anything"]) is type(value)
    cfg = from_mapping(Knobs, apply_overrides({}, [f"lr={typed}"]), source="--set")
    assert cfg.lr == float(value)


@pytest.mark.parametrize("typed,value", NUMBERS)
def test_numbers_in_a_yaml_file_read_as_python_reads_them(typed, value, tmp_path):
    path = tmp_path / "e.yaml"
    path.write_text(f"lr: {typed}\nanything: [{typed}]\n")
    assert load_yaml(path)["anything"] == [value]
    assert load_config(Knobs, path).lr == float(value)


def test_an_integer_key_takes_a_whole_number_in_exponent_form():
    assert from_mapping(Knobs, apply_overrides({}, ["rounds=1e2"])).rounds == 100
    with pytest.raises(ConfigError, match=r"--set: rounds: expected an integer, got 150\.5"):
        from_mapping(Knobs, apply_overrides({}, ["rounds=1.505e2"]), source="--set")


@pytest.mark.parametrize("typed,value", [
    # not numbers to Python either: they stay strings (and a number key says so in one line)
    ("1e", "1e"), ("e3", "e3"), ("1__0e3", "1__0e3"), ("1e3_", "1e3_"), ("1.2.3", "1.2.3"), ("0x1g", "0x1g"),
    # YAML's booleans and null, as the configuration reference documents them
    ("true", True), ("false", False), ("True", True), ("null", None), ("~", None),
    # a quoted number is a string
    ("'1e-3'", "1e-3"), ('"1e-3"', "1e-3"),
    ("openimage", "openimage"), ("[0,1,2]", [0, 1, 2]),
])
def test_other_values_keep_their_yaml_meaning(typed, value):
    assert apply_overrides({}, [f"anything={typed}"])["anything"] == value


def test_a_word_for_a_number_is_still_one_line():
    with pytest.raises(ConfigError, match=r"^--set: lr: expected a number, got '1e'$"):
        from_mapping(Knobs, apply_overrides({}, ["lr=1e"]), source="--set")


def test_a_file_in_another_encoding_is_one_line_naming_file_line_and_encoding(tmp_path):
    path = tmp_path / "e.yaml"
    path.write_bytes("# r\xe9glages\nlr: 0.1\n".encode("latin-1"))  # what a Windows editor writes
    with pytest.raises(ConfigError) as info:
        load_yaml(path)
    assert str(info.value) == (f"{path}: line 1: not UTF-8 text (byte 0xe9); save the file as UTF-8")


def test_a_utf8_file_with_a_byte_order_mark_reads(tmp_path):
    path = tmp_path / "e.yaml"
    path.write_bytes("\ufeff# réglages\nlr: 1e-3\n".encode("utf-8"))
    assert load_yaml(path) == {"lr": 0.001}


def test_a_directory_is_not_called_missing(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_yaml(tmp_path)
    assert str(info.value) == f"{tmp_path}: is a directory, not a YAML file"


def test_a_binary_file_is_one_line(tmp_path):
    path = tmp_path / "e.yaml"
    path.write_bytes(b"PAR1\x00\x01\x02\x00data")
    with pytest.raises(ConfigError) as info:
        load_yaml(path)
    assert str(info.value) == f"{path}: a binary file, not a YAML file"


def test_a_missing_file_still_says_not_found(tmp_path):
    with pytest.raises(ConfigError, match=r"e\.yaml: config file not found$"):
        load_yaml(tmp_path / "e.yaml")


def test_a_key_written_twice_is_one_line_with_the_line_of_each(tmp_path):
    """YAML requires unique keys; PyYAML keeps the last one silently (issue 44: ``fl:`` written twice ran)."""
    path = tmp_path / "e.yaml"
    path.write_text("name: x\nfl:\n  rounds: 2\nseeds: [0]\nfl:\n  rounds: 5\n")
    with pytest.raises(ConfigError) as info:
        load_yaml(path)
    assert str(info.value) == f"{path}: line 5: key 'fl' written twice in one mapping (lines 2 and 5); YAML takes each key once"


def test_a_nested_key_written_twice_and_a_flow_mapping_are_refused_too(tmp_path):
    path = tmp_path / "e.yaml"
    path.write_text("name: x\nfl:\n  rounds: 2\n  lr: 0.1\n  rounds: 3\n")
    with pytest.raises(ConfigError, match=r"line 5: key 'rounds' written twice in one mapping \(lines 3 and 5\)"):
        load_yaml(path)
    path.write_text("fl: {rounds: 2, rounds: 3}\n")
    with pytest.raises(ConfigError, match=r"line 1: key 'rounds' written twice in one mapping \(twice on line 1\)"):
        load_yaml(path)


def test_the_same_key_in_different_mappings_and_a_merge_key_still_read(tmp_path):
    path = tmp_path / "e.yaml"
    path.write_text("a: {rounds: 2}\nb: {rounds: 3}\nbase: &b {rounds: 4, lr: 0.1}\nc:\n  <<: *b\n  rounds: 5\n")
    assert load_yaml(path) == {"a": {"rounds": 2}, "b": {"rounds": 3}, "base": {"rounds": 4, "lr": 0.1}, "c": {"rounds": 5, "lr": 0.1}}


def test_a_set_value_with_a_key_twice_is_refused():
    with pytest.raises(ConfigError, match=r"^override 'fl=\{rounds: 2, rounds: 3\}': key 'rounds' written twice"):
        apply_overrides({}, ["fl={rounds: 2, rounds: 3}"])
