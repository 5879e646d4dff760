"""The typed config loader: unknown keys, wrong types and overrides are errors naming file and key."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Optional

import pytest

from flamingo_sim.config import apply_overrides, from_mapping, load_config, to_mapping
from flamingo_sim.errors import ConfigError


@dataclass(frozen=True)
class Inner:
    rounds: int = 10
    lr: float = 0.05
    rule: Literal["first", "random"] = "first"

    def __post_init__(self) -> None:
        if self.rounds < 1:
            raise ValueError(f"rounds must be >= 1, got {self.rounds}")


@dataclass(frozen=True)
class Outer:
    name: str
    fl: Inner = field(default_factory=Inner)
    seeds: list[int] = field(default_factory=lambda: [0])
    target: Optional[float] = None


def test_defaults_and_nested_values():
    cfg = from_mapping(Outer, {"name": "x", "fl": {"rounds": 3, "lr": 1}}, source="e.yaml")
    assert cfg == Outer(name="x", fl=Inner(rounds=3, lr=1.0))
    assert isinstance(cfg.fl.lr, float)


def test_unknown_key_names_file_and_dotted_key():
    with pytest.raises(ConfigError, match=r"e\.yaml: unknown key 'fl\.roundz' \(known here: lr, rounds, rule\)"):
        from_mapping(Outer, {"name": "x", "fl": {"roundz": 3}}, source="e.yaml")


@pytest.mark.parametrize(
    "data, message",
    [
        ({"name": "x", "fl": {"rounds": "ten"}}, r"e\.yaml: fl\.rounds: expected an integer, got 'ten'"),
        ({"name": "x", "fl": {"rounds": True}}, r"fl\.rounds: expected an integer, got True"),
        ({"name": "x", "fl": {"rule": "best"}}, r"fl\.rule: expected one of 'first' or 'random', got 'best'"),
        ({"name": "x", "seeds": [1, "a"]}, r"seeds\[1\]: expected an integer"),
        ({"name": "x", "fl": 3}, r"fl: expected a mapping \(section\), got 3"),
        ({"fl": {}}, r"missing required key 'name'"),
        ({"name": "x", "fl": {"rounds": 0}}, r"e\.yaml: fl: rounds must be >= 1, got 0"),
        ({"name": "x", "target": "high"}, r"target: expected a number, got 'high'"),
    ],
)
def test_type_errors_are_specific(data, message):
    with pytest.raises(ConfigError, match=message):
        from_mapping(Outer, data, source="e.yaml")


def test_overrides_are_parsed_as_yaml_and_validated(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text("name: x\nfl:\n  rounds: 5\n")
    cfg = load_config(Outer, path, ["fl.rounds=20", "fl.lr=0.1", "target=0.5"])
    assert (cfg.fl.rounds, cfg.fl.lr, cfg.target) == (20, 0.1, 0.5)
    with pytest.raises(ConfigError, match=r"exp\.yaml: unknown key 'fl\.nope'"):
        load_config(Outer, path, ["fl.nope=1"])
    with pytest.raises(ConfigError, match=r"expected KEY=VALUE"):
        load_config(Outer, path, ["fl.rounds"])


def test_override_through_a_scalar_is_an_error():
    with pytest.raises(ConfigError, match=r"name is not a section"):
        apply_overrides({"name": "x"}, ["name.sub=1"])


def test_missing_and_invalid_yaml_files(tmp_path):
    with pytest.raises(ConfigError, match=r"nope\.yaml: config file not found"):
        load_config(Outer, tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: line \d+ not valid YAML"):
        load_config(Outer, bad)
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match=r"list\.yaml: expected a mapping of keys at the top level, got list"):
        load_config(Outer, listy)


def test_round_trip_through_plain_data():
    cfg = Outer(name="y", fl=Inner(rounds=7, rule="random"), seeds=[1, 2], target=0.7)
    assert from_mapping(Outer, to_mapping(cfg)) == cfg
