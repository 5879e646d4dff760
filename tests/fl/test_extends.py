"""Building on a shipped experiment (issue 42): ``extends:`` a shipped name or a file, keys merged as
documented, cycles refused in one line; a plug-in module found in the working directory; a failed
import says where it looked; display names, never import paths, and told apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from flamingo_sim.cli import main
from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.config import load_experiment, resolve_path
from flamingo_sim.fl.extends import experiment_files, load_extended, merge
from flamingo_sim.fl.plugins import check_plugins, experiment_policy, plugin_search
from flamingo_sim.resources import shipped

POLICY = '''
from flamingo_sim.devices.policies import BaselinePolicy


class Mine(BaselinePolicy):
    name = "mine"


class Nameless(BaselinePolicy):
    pass


class Impostor(BaselinePolicy):
    name = "flamingo"
'''


def test_merge_merges_mappings_key_by_key_and_replaces_everything_else():
    base = {"fl": {"rounds": 100, "lr": 0.05}, "policies": ["baseline", "flamingo"], "seeds": [0], "data": {"proxy": {"n_clients": 10, "alpha": 1}}}
    over = {"fl": {"rounds": 20}, "policies": ["baseline"], "data": {"proxy": {"n_clients": 5}}, "network": None}
    assert merge(base, over) == {"fl": {"rounds": 20, "lr": 0.05}, "policies": ["baseline"], "seeds": [0],
                                 "data": {"proxy": {"n_clients": 5, "alpha": 1}}, "network": None}
    assert base["fl"] == {"rounds": 100, "lr": 0.05}  # the base is left as it was


def test_an_experiment_extends_a_shipped_one_by_name_and_overrides_keys(tmp_path):
    exp = tmp_path / "mine.yaml"
    exp.write_text("extends: openimage_mobilenet\nname: mine\nfl: {rounds: 3}\npolicies: [baseline]\n")
    cfg, shipped_cfg = load_experiment(exp), load_experiment(shipped("experiments/openimage_mobilenet.yaml"))
    assert (cfg.name, cfg.fl.rounds, cfg.policies) == ("mine", 3, ["baseline"])
    assert cfg.fl.participants_per_round == shipped_cfg.fl.participants_per_round == 100  # kept from the base
    assert cfg.phones == shipped_cfg.phones and cfg.data == shipped_cfg.data
    assert load_experiment(exp, ["fl.rounds=5"]).fl.rounds == 5  # --set after the merge
    # the base's relative paths resolve as the base's: traces/synthetic among the shipped data
    assert resolve_path(cfg.traces.path, exp).resolve() == shipped("traces/synthetic").resolve()


def test_an_experiment_extends_a_file_relative_to_itself_in_a_chain(tmp_path):
    (tmp_path / "bases").mkdir()
    (tmp_path / "bases" / "root.yaml").write_text("name: root\nfl: {rounds: 7, lr: 0.1}\ndata: {root: data_here}\n")
    (tmp_path / "bases" / "data_here").mkdir()
    (tmp_path / "bases" / "middle.yaml").write_text("extends: root.yaml\nname: middle\nfl: {lr: 0.2}\n")
    exp = tmp_path / "top.yaml"
    exp.write_text("extends: bases/middle.yaml\nname: top\n")
    assert load_extended(exp) == {"name": "top", "fl": {"rounds": 7, "lr": 0.2}, "data": {"root": "data_here"}}
    assert experiment_files(exp) == [exp, tmp_path / "bases/middle.yaml", tmp_path / "bases/root.yaml"]
    cfg = load_experiment(exp)
    assert resolve_path(cfg.data.root, exp) == tmp_path / "bases" / "data_here"  # beside the file that named it
    assert plugin_search(exp)[:2] == [tmp_path, tmp_path / "bases"]


def test_a_cycle_and_an_unknown_base_are_one_line(tmp_path):
    (tmp_path / "a.yaml").write_text("extends: b.yaml\nname: a\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\nname: b\n")
    with pytest.raises(ConfigError) as exc:
        load_experiment(tmp_path / "a.yaml")
    assert str(exc.value) == (f"{tmp_path / 'b.yaml'}: extends: a cycle ({tmp_path / 'a.yaml'} -> {tmp_path / 'b.yaml'} -> {tmp_path / 'a.yaml'}); "
                              "an experiment cannot extend itself")
    (tmp_path / "c.yaml").write_text("extends: no_such_experiment\nname: c\n")
    with pytest.raises(ConfigError, match=r"c.yaml: extends: no experiment file 'no_such_experiment' \(looked for .*no_such_experiment\) "
                                          r"and no shipped experiment of that name \(shipped: .*openimage_mobilenet"):
        load_experiment(tmp_path / "c.yaml")
    (tmp_path / "d.yaml").write_text("extends: [a, b]\nname: d\n")
    with pytest.raises(ConfigError, match=r"d.yaml: extends: expected the name of a shipped experiment or a path"):
        load_experiment(tmp_path / "d.yaml")


def test_a_shipped_experiment_with_a_plugin_from_the_working_directory(tmp_path, monkeypatch):
    """The issue's case: the shipped experiment by name, --set policy=my_mod:Cls, the module in the working directory."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "my_mod_42.py").write_text(POLICY)
    monkeypatch.chdir(work)
    monkeypatch.setattr("sys.path", [p for p in __import__("sys").path if p not in ("", str(work))])
    shipped_exp = shipped("experiments/openimage_mobilenet.yaml")
    cfg = load_experiment(shipped_exp, ['policies=[baseline, "my_mod_42:Mine"]'])
    assert type(experiment_policy(cfg, shipped_exp, "my_mod_42:Mine")).__name__ == "Mine"
    assert check_plugins(cfg, shipped_exp) == {"baseline": "baseline", "my_mod_42:Mine": "mine"}
    cfg = load_experiment(shipped_exp, ['policies=[baseline, "my_mod_42:Nameless"]'])
    assert check_plugins(cfg, shipped_exp)["my_mod_42:Nameless"] == "Nameless"  # no name of its own: its class's
    for policies, other in (("flamingo", "policy 'flamingo'"), ("baseline", "the shipped policy")):
        cfg = load_experiment(shipped_exp, [f'policies=[{policies}, "my_mod_42:Impostor"]'])
        with pytest.raises(ConfigError) as exc:
            check_plugins(cfg, shipped_exp)
        assert str(exc.value) == (f"{shipped_exp}: policies: policy 'my_mod_42:Impostor' is called 'flamingo' (its name attribute), as {other} "
                                  "is; give it a name of its own")


def test_a_module_not_found_says_where_it_was_looked_for(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run"
    code = main(["run", "openimage_mobilenet", "--set", "policies=[baseline, nowhere_42:Cls]", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and not out.exists() and len(err.splitlines()) == 1
    folder = Path(shipped("experiments")).resolve()
    assert err.endswith(f"openimage_mobilenet: policies: policy 'nowhere_42:Cls': cannot import (No module named 'nowhere_42'; looked on the "
                        f"Python path, then in {folder} and {tmp_path.resolve()})")
