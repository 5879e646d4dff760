"""The configuration reference (flamingo_sim.fl.config_reference): every key described, ranges as enforced."""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass
from typing import Optional

import pytest

from flamingo_sim.config import FLOAT32_MAX, FLOAT32_TINY, check_ranges, from_mapping, to_mapping
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
    assert "### `policy_params.least_energy` (policy `least_energy`)" in md
    assert "| `policy_params.least_energy.margin` | float | `0.8` | `(0, 1]` |" in md
    assert "### `selector` with `fl.selection: oort`" in md and "| `selector.exploration` | float | `0.2` | `[0, 1]` |" in md
    assert "### `aggregation` with `name: fedprox`" in md and "| `aggregation.mu` | float | `0.01` | `>= 0, float32` |" in md
    keys = plugin_params()
    assert {(p.section, p.plugin) for p in keys} == {("policy_params.least_energy", "least_energy"), ("selector", "battery"), ("selector", "oort"),
                                                    ("aggregation", "fedprox"), ("aggregation", "fedadam"), ("aggregation", "fedyogi")}


def test_the_table_holds_known_keys_with_their_default_and_range():
    md = reference_markdown()
    assert "| `fl.overcommit` | float | `1.3` | `>= 1` | Select ceil(K x overcommit) clients, keep the K fastest" in md
    assert "| `aggregation.beta2` | float | `0.99` | `[0, 1)` |" in md
    assert "| `data.image_size` | int | `64` | `>= 8` |" in md  # the range is an f-string of MIN_IMAGE_SIZE
    assert "| `fl.train_mode` | one of 'auto', 'batched', 'vmap', 'streams', 'threads', 'sequential' | `auto` |  |" in md
    assert "| `name` | str | required |  |" in md
    assert "### `policy.interference`" in md


def _number(text: str) -> float:
    return int(text) if text.lstrip("-").isdigit() else float(text)  # an integer bound exactly (2**63 is no float's neighbour)


def _bounds(rule: str) -> list[tuple[float, bool, int]]:
    """The finite bounds of a range rule: (bound, closed, side), side -1 for a lower and +1 for an upper bound."""
    rule = rule.removesuffix(", float32")
    if m := re.fullmatch(r"(>=|>|<=|<) (-?[0-9.]+)", rule):
        op, bound = m.group(1), _number(m.group(2))
        return [(bound, op.endswith("="), -1 if op[0] == ">" else 1)]
    m = re.fullmatch(r"([\[(])(-?[0-9.]+), (-?[0-9.]+)([\])])", rule)
    assert m, rule
    return [(_number(m.group(2)), m.group(1) == "[", -1), (_number(m.group(3)), m.group(4) == "]", 1)]


def _probes(rule: str, integer: bool) -> list[tuple[float, bool]]:
    """Values on both sides of every bound of ``rule``, each with whether the rule takes it: a closed
    bound takes the bound itself and refuses the next value outside (the next float, or the next
    integer); an open bound refuses the bound and takes the next value inside. A ``float32`` rule
    also takes float32's largest and smallest normal values and refuses the next float outside."""
    probes = []
    float32 = rule.endswith(", float32")
    for bound, closed, side in _bounds(rule):
        outside = bound + side if integer else math.nextafter(bound, side * math.inf)
        inside = bound - side if integer else math.nextafter(bound, -side * math.inf)
        if float32 and bound == 0 and not closed:  # the next float32 above 0 is the smallest normal one
            inside = FLOAT32_TINY
        probes += [(bound, True), (outside, False)] if closed else [(bound, False), (inside, True)]
    if float32:
        probes += [(FLOAT32_MAX, True), (math.nextafter(FLOAT32_MAX, math.inf), False),
                   (FLOAT32_TINY, True), (math.nextafter(FLOAT32_TINY, 0), False)]
    return probes


#: What a key's value needs around it to be taken at all (the parameter of another plug-in, a pair rule).
CONTEXT: dict[str, dict] = {
    "traces.reentry_pct": {"traces": {"min_pct": 0.0}},  # min_pct <= reentry_pct
    "aggregation.mu": {"aggregation": {"name": "fedprox"}},
    **{f"aggregation.{k}": {"aggregation": {"name": "fedyogi"}} for k in ("server_lr", "beta1", "beta2", "tau")},
    "selector.floor": {"fl": {"selection": "battery"}},
    **{f"selector.{k}": {"fl": {"selection": "oort"}} for k in ("exploration", "straggler_penalty", "preferred_duration_s")},
}
#: A mapping key gets a second item, so that a share of 0 leaves a mix that sums to > 0.
MAPPING_REST = {"phones.mix": {"galaxy_s10e": 1.0}}


def _load_with(k, value: float) -> ConfigError | None:
    """Load a config whose key ``k`` holds ``value`` (in a list or mapping where the key takes one;
    with the plug-in it belongs to chosen); its error."""
    key, type_ = k.key, k.type
    v: object = int(value) if type_.startswith("int") or "list of int" in type_ else value
    if type_.startswith("list"):
        v = [v]
    elif type_.startswith("mapping"):
        v = {"pixel_3": v, **MAPPING_REST.get(key, {})}
    data: dict = {"name": "x", **copy.deepcopy(CONTEXT.get(key, {}))}
    if k.plugin:  # choose the plug-in these parameters belong to
        chooser = CHOSEN_BY[k.section.split(".")[0]]
        value_of_chooser: object = [k.plugin] if chooser == "policies" else k.plugin
        head, _, tail = chooser.rpartition(".")
        (data.setdefault(head, {}) if head else data)[tail] = value_of_chooser
    node = data
    *sections, last = key.split(".")
    for s in sections:
        node = node.setdefault(s, {})
    node[last] = v
    try:
        from_mapping(ExperimentConfig, data, source="e.yaml")
    except ConfigError as exc:
        return exc
    return None


@pytest.mark.parametrize("rule, taken, refused", [
    (">= 3", [3, 4, 1e300], [math.nextafter(3, 0), 2, -math.inf, math.nan]),
    ("> 3", [math.nextafter(3, 4), 1e300], [3, 2, math.inf]),
    ("<= 3", [3, -1e300], [math.nextafter(3, 4), 4]),
    ("< 3", [math.nextafter(3, 0), -5], [3, 4]),
    ("[0, 1]", [0, 1, 0.5], [math.nextafter(0, -1), math.nextafter(1, 2)]),
    ("(0, 1)", [math.nextafter(0, 1), math.nextafter(1, 0)], [0, 1]),
    ("[0, 1)", [0, math.nextafter(1, 0)], [math.nextafter(0, -1), 1]),
    ("(0, 1]", [math.nextafter(0, 1), 1], [0, math.nextafter(1, 2)]),
    ("[-50, 150]", [-50, 150], [math.nextafter(-50, -51), math.nextafter(150, 151)]),
    ("> 0, float32", [FLOAT32_TINY, 1e-3, FLOAT32_MAX], [0, math.nextafter(FLOAT32_TINY, 0), math.nextafter(FLOAT32_MAX, math.inf), 1e308]),
])
def test_check_ranges_takes_and_refuses_each_side_of_each_bound(rule, taken, refused):
    @dataclass(frozen=True)
    class One:
        x: float

        def __post_init__(self) -> None:
            check_ranges(self, x=rule)

    for v in taken:
        assert One(v).x == v
    for v in refused:
        plain = rule.removesuffix(", float32")
        with pytest.raises(ValueError, match=rf"^x: expected an? (number|integer) {'in ' if rule[0] in '[(' else ''}{re.escape(plain)}"
                                             rf"{' that fits float32' if plain != rule else ''}.*, got "):
            One(v)


def test_every_stated_range_is_enforced_by_the_loader_on_both_sides_of_each_bound():
    """An open bound written as closed (or the reverse) fails here: each bound is probed at the
    bound itself and at the next representable value on its other side."""
    ranged = [k for k in config_keys() + _plugin_keys(plugin_params()) if k.range]
    assert len(ranged) >= 40
    wrong = []
    n_probes = 0
    for k in ranged:
        integer = k.type.startswith("int") or "list of int" in k.type
        for value, taken in _probes(k.range, integer):
            n_probes += 1
            exc = _load_with(k, value)
            if taken and exc is not None:
                wrong.append(f"{k.key} ({k.range}) refused {value!r}: {exc}")
            elif not taken and (exc is None or not str(exc).startswith(f"e.yaml: {k.key}")):
                wrong.append(f"{k.key} ({k.range}) took {value!r}" + (f" (or refused it naming another key: {exc})" if exc else ""))
    assert wrong == []
    assert n_probes >= 2 * len(ranged)


def test_the_generator_imports_nothing_heavy():
    """The docs build runs it: only the config modules, never torch, pandas or the simulator."""
    import subprocess
    import sys

    code = ("import sys; from flamingo_sim.fl.config_reference import reference_markdown; reference_markdown(); "
            "print(sorted(m for m in ('torch', 'pandas', 'scipy', 'pyarrow', 'matplotlib', 'flamingo_sim.fl.sim') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_command_takes_an_experiment_by_name_like_every_other_command(capsys):
    """Issue 44: ``python -m flamingo_sim.fl.config_reference openimage_mobilenet`` (docs: EXPERIMENT) ended in a traceback."""
    from flamingo_sim.fl.config_reference import main

    assert main(["openimage_mobilenet"]) == 0
    by_name = capsys.readouterr().out
    assert "### `fl`" in by_name and "| `fl.lr` |" in by_name
    assert main(["no_such_experiment"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("python -m flamingo_sim.fl.config_reference: error: no_such_experiment: no such experiment file, "
                                               "and no shipped experiment of that name (shipped: ")


def test_the_command_adds_the_plugins_an_experiment_names(capsys):
    from pathlib import Path

    from flamingo_sim.fl.config_reference import main

    examples = Path(__file__).resolve().parents[2] / "examples"
    assert main([str(examples / "charging_only.yaml")]) == 0
    assert "### `policy_params.charging_policy:ChargingOnlyPolicy` (policy `charging_policy:ChargingOnlyPolicy`)" in capsys.readouterr().out
