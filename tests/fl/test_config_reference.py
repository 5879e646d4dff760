"""The configuration reference (flamingo_sim.fl.config_reference): every key described, ranges as enforced."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import pytest

from flamingo_sim.config import check_ranges, from_mapping, to_mapping
from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.config import ExperimentConfig
from flamingo_sim.fl.config_reference import CHOSEN_BY, _plugin_keys, config_keys, plugin_params, reference_markdown

LOW = 3


@dataclass(frozen=True)
class _Toy:
    #: First line of a description,
    #: and its second line.
    described: int = 4
    undescribed: float = 0.5  # a trailing comment is not a description
    #: An optional one.
    optional: Optional[float] = None

    def __post_init__(self) -> None:
        check_ranges(self, described=f">= {LOW}", optional="(0, 1]")


def test_descriptions_defaults_and_ranges_are_read_from_the_source():
    keys = {k.key: k for k in config_keys(_Toy)}
    assert keys["described"].description == "First line of a description, and its second line."
    assert (keys["described"].type, keys["described"].default, keys["described"].range) == ("int", "4", ">= 3")  # f-string resolved
    assert keys["undescribed"].description == ""
    assert (keys["optional"].type, keys["optional"].default, keys["optional"].range) == ("float or null", "null", "(0, 1]")


def test_every_experiment_key_has_a_description():
    missing = [k.key for k in config_keys() + _plugin_keys(plugin_params()) if not k.description]
    assert missing == [], f"add a '#: one-line description' above these config fields: {missing}"


def test_every_numeric_key_has_a_range():
    """The docs say "every field's range is checked" (docs/fl-engine.md): a number without a check_ranges rule fails here."""
    numeric = [k for k in config_keys() if not k.is_section and not k.type.startswith("one of") and ("int" in k.type or "float" in k.type)]
    assert len(numeric) > 40
    assert [k.key for k in numeric if not k.range] == []


def test_the_reference_lists_exactly_the_keys_the_loader_takes():
    loaded = to_mapping(from_mapping(ExperimentConfig, {"name": "x"}))

    def flat(mapping, prefix=""):
        for key, value in mapping.items():
            if isinstance(value, dict) and key not in ("mix", "policy_params"):  # mapping values, not sections
                yield from flat(value, f"{prefix}{key}.")
            else:
                yield f"{prefix}{key}"

    assert sorted(k.key for k in config_keys() if not k.is_section) == sorted(flat(loaded))


def test_each_shipped_plugin_has_its_parameter_table():
    md = reference_markdown()
    assert "### `policy_params.eas` (policy `eas`)" in md
    assert "| `policy_params.eas.margin` | float | `0.8` | `(0, 1]` |" in md
    assert "### `selector` with `fl.selection: oort`" in md and "| `selector.exploration` | float | `0.2` | `[0, 1]` |" in md
    assert "### `aggregation` with `name: fedprox`" in md and "| `aggregation.mu` | float | `0.01` | `>= 0` |" in md
    keys = plugin_params()
    assert {(p.section, p.plugin) for p in keys} == {("policy_params.eas", "eas"), ("selector", "battery"), ("selector", "oort"),
                                                    ("aggregation", "fedprox"), ("aggregation", "fedadam"), ("aggregation", "fedyogi")}


def test_the_table_holds_known_keys_with_their_default_and_range():
    md = reference_markdown()
    assert "| `fl.overcommit` | float | `1.3` | `>= 1` | Select ceil(K x overcommit) clients, keep the K fastest" in md
    assert "| `aggregation.beta2` | float | `0.99` | `[0, 1)` |" in md
    assert "| `data.image_size` | int | `64` | `>= 8` |" in md  # the range is an f-string of MIN_IMAGE_SIZE
    assert "| `fl.train_mode` | one of 'auto', 'batched', 'vmap', 'streams', 'threads', 'sequential' | `auto` |  |" in md
    assert "| `name` | str | required |  |" in md
    assert "### `policy.interference`" in md


def _outside(rule: str) -> float:
    """A value just outside a range rule."""
    if m := re.fullmatch(r"(>=|>) (-?[0-9.]+)", rule):
        return float(m.group(2)) - 1
    m = re.fullmatch(r"[\[(](-?[0-9.]+), (-?[0-9.]+)[\])]", rule)
    assert m, rule
    return float(m.group(2)) + 1


def test_every_stated_range_is_enforced_by_the_loader():
    ranged = [k for k in config_keys() + _plugin_keys(plugin_params()) if k.range]
    assert len(ranged) >= 40
    for k in ranged:
        value: object = _outside(k.range)
        if k.type.startswith("int") or "list of int" in k.type:
            value = int(value)  # type: ignore[call-overload]
        if k.type.startswith("list"):
            value = [value]
        elif k.type.startswith("mapping"):
            value = {"pixel_3": value}
        data: dict = {"name": "x"}
        if k.plugin:  # choose the plug-in these parameters belong to
            chooser = CHOSEN_BY[k.section.split(".")[0]]
            value_of_chooser: object = [k.plugin] if chooser == "policies" else k.plugin
            head, _, tail = chooser.rpartition(".")
            (data.setdefault(head, {}) if head else data)[tail] = value_of_chooser
        node = data
        *sections, last = k.key.split(".")
        for s in sections:
            node = node.setdefault(s, {})
        node[last] = value
        with pytest.raises(ConfigError) as exc:
            from_mapping(ExperimentConfig, data, source="e.yaml")
        assert str(exc.value).startswith(f"e.yaml: {k.key}"), (k.key, str(exc.value))


def test_the_generator_imports_nothing_heavy():
    """The docs build runs it: only the config modules, never torch, pandas or the simulator."""
    import subprocess
    import sys

    code = ("import sys; from flamingo_sim.fl.config_reference import reference_markdown; reference_markdown(); "
            "print(sorted(m for m in ('torch', 'pandas', 'scipy', 'pyarrow', 'matplotlib', 'flamingo_sim.fl.sim') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
