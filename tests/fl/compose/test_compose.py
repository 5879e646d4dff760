"""compose: the one place a simulation is assembled, and the up-front check of what it would build."""

from __future__ import annotations

from pathlib import Path

import pytest

from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.compose import build_components, compose
from flamingo_sim.fl.config import load_experiment
from flamingo_sim.fl.runner.plan import check_composition
from flamingo_sim.fl.sim.fedbuff import AsyncSimulation
from flamingo_sim.fl.sim.simulation import Simulation
from flamingo_sim.fl.strategy.aggregators import FedAvg

ROOT = Path(__file__).resolve().parents[3]
EXP = ROOT / "experiments/openimage_mobilenet.yaml"
SMALL = ["fl.rounds=2", "fl.participants_per_round=4", "fl.local_steps=2", "data.proxy.n_clients=60"]


class Marked(Simulation):
    """A subclass, as Flower's strategy passes one."""


def test_compose_builds_the_configs_parts_and_shares_given_ones() -> None:
    cfg = load_experiment(EXP, [*SMALL, "aggregation.name=fedprox", "aggregation.mu=0.25"])
    parts = build_components(cfg, EXP, 0, log=lambda _m: None)
    sim = compose(cfg, EXP, 0, "flamingo", parts=parts, simulation=Marked)
    assert type(sim) is Marked and sim.parts is parts and sim.policy_name == "flamingo" and sim.seed == 0
    assert type(sim.policy).__name__ == "FlamingoPolicy" and sim.aggregator.proximal_mu == 0.25
    fresh = compose(cfg, EXP, 1, "baseline")  # parts built here, for seed 1
    assert fresh.parts is not parts and fresh.parts.population.n_clients == parts.population.n_clients == 60


def test_fedbuff_composes_the_asynchronous_loop() -> None:
    cfg = load_experiment(EXP, [*SMALL, "fl.mode=fedbuff"])
    sim = compose(cfg, EXP, 0, "baseline")
    assert isinstance(sim, AsyncSimulation) and isinstance(compose(load_experiment(EXP, SMALL), EXP, 0, "baseline").aggregator, FedAvg)


@pytest.mark.parametrize(("sets", "engine", "policies", "message"), [
    (["fl.mode=fedbuff"], "flower", None, "fl.mode: 'fedbuff' runs natively"),
    (["aggregation.name=fedprox"], "fedscale", None, "aggregation: FedScale runs only the default"),
    ([], "native", ["no_such_policy"], "no_such_policy"),
])
def test_check_composition_refuses_in_one_line(sets, engine, policies, message) -> None:
    cfg = load_experiment(EXP, [*SMALL, *sets])
    with pytest.raises(ConfigError, match=message):
        check_composition(cfg, EXP, engine=engine, policies=policies)


def test_compose_is_the_only_place_in_the_package_that_builds_a_simulation() -> None:
    import ast

    import flamingo_sim

    package = Path(flamingo_sim.__file__).parent
    builds = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
                if name.endswith("Simulation") or name == "simulation":
                    builds.append(f"{path.relative_to(package)}:{node.lineno}")
    assert builds and all(b.startswith("fl/compose/assemble.py:") for b in builds), builds


CAPACITY = ROOT / "tests" / "fl" / "sim" / "data" / "fedscale" / "client_device_capacity"


def test_fedscales_capacity_file_gives_each_client_its_bandwidth() -> None:
    """network.fedscale_capacity_file: the five clients of the fixture, FL client i playing the (i mod 5)-th by id."""
    import numpy as np

    logs: list[str] = []
    cfg = load_experiment(EXP, [*SMALL, f"network.fedscale_capacity_file={CAPACITY}"])
    parts = build_components(cfg, EXP, 0, log=logs.append)
    assert parts.network is not None and parts.network.capacity_kbps is not None
    kbps = np.array([2134.5, 11250.0, 640.0, 35000.0, 4800.0])
    assert np.array_equal(parts.network.capacity_kbps, kbps[np.arange(60) % 5])
    sim = compose(cfg, EXP, 0, "baseline", parts=parts)
    plan = sim.plan_round()
    size = parts.cfg.network.model_size_mb
    assert np.array_equal(plan.comm_s, 2.0 * size * 8.0 / (kbps[plan.chosen % 5] / 1000.0))
    assert any("FedScale's device-capacity file" in line and "5 clients" in line for line in logs)


def test_a_bad_capacity_file_is_one_line_naming_the_key(tmp_path) -> None:
    bad = tmp_path / "capacity"
    bad.write_bytes(b"\x80\x04K\x01.")  # a pickled 1: not a dict
    cfg = load_experiment(EXP, [*SMALL, f"network.fedscale_capacity_file={bad}"])
    with pytest.raises(ConfigError) as exc:
        build_components(cfg, EXP, 0, log=lambda _m: None)
    assert str(exc.value) == (f"{EXP}: network.fedscale_capacity_file: {bad}: holds a value of type int; expected a non-empty dict "
                              "{client id: {'computation': ms/sample, 'communication': kbit/s}}")
    cfg = load_experiment(EXP, [*SMALL, f"network.fedscale_capacity_file={tmp_path / 'absent'}"])
    with pytest.raises(ConfigError, match="network.fedscale_capacity_file: FedScale device-capacity file .* not found"):
        build_components(cfg, EXP, 0, log=lambda _m: None)


def test_a_refusal_while_the_parts_are_built_logs_nothing() -> None:
    """The parts' lines (the proxy task's WARNING, the data, the model update) are held until every part is built: a
    setting refused part way is the only line a command prints (issue 50; before, the WARNING and the data line came
    first)."""
    logs: list[str] = []
    for bad in ("fl.batch_size=100000", "phones.mix={nophone: 1.0}", "network.bandwidth_sigma=1000"):
        with pytest.raises(ConfigError):
            build_components(load_experiment(EXP, [*SMALL, bad]), EXP, 0, log=logs.append)
    assert logs == []
    build_components(load_experiment(EXP, SMALL), EXP, 0, log=logs.append)
    assert [line.split(":")[0] for line in logs] == ["WARNING", "data", "model update"], logs
