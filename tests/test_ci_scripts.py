"""The scripts of .ci/: the lowest-versions constraints (lowest_constraints.py) and the mutation
run's parts that need no mutmut (mutation.py)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"ci_{name}", ROOT / ".ci" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lc = _load("lowest_constraints")
mutation = _load("mutation")


@pytest.mark.parametrize("requirement, pin", [
    ("numpy>=1.24", "numpy==1.24"),
    ("torch==2.14.1", "torch==2.14.1"),
    ("tensorboard>=2.14,<3", "tensorboard==2.14"),
    ("grpcio<2,>=1.60", "grpcio==1.60"),                      # the bound need not come first
    ("mkdocstrings[python]>=1.0", "mkdocstrings==1.0"),         # extras dropped from the name
    ("ray[default] >= 2.40 ; python_version >= '3.10'", "ray==2.40"),  # spaces and a marker
    ("wheel", None),                                           # no lower bound: left free
    ("pandas<3", None),
])
def test_lowest_pins_the_lower_bound(requirement, pin):
    assert lc.lowest(requirement) == pin


def test_the_highest_floor_of_a_package_wins():
    assert lc.constraints(["numpy>=1.24", "flwr>=1.42", "numpy>=1.26", "Pillow>=9.2", "numpy>=1.9"]) == ["flwr==1.42", "numpy==1.26", "Pillow==9.2"]


def test_a_requirement_it_cannot_read_is_one_line():
    with pytest.raises(SystemExit, match=r"pyproject.toml: requirement '>=1' is not understood"):
        lc.lowest(">=1")


def test_the_script_pins_every_extra_and_names_an_unknown_one():
    done = subprocess.run([sys.executable, str(ROOT / ".ci" / "lowest_constraints.py"), "test", "flower"], capture_output=True, text=True, check=True)
    lines = done.stdout.split()
    assert "numpy==1.26" in lines and "flwr==1.42" in lines and "pytest-timeout==2.1" in lines
    assert len(lines) == len({line.split("==")[0].lower() for line in lines})  # one pin per package
    bad = subprocess.run([sys.executable, str(ROOT / ".ci" / "lowest_constraints.py"), "nope"], capture_output=True, text=True)
    assert bad.returncode != 0 and "pyproject.toml: no extra 'nope' (extras: test, mutation, dev," in bad.stderr


def test_every_extra_with_floors_is_installed_at_them_by_ci():
    """.ci/run's lowest-versions job names every extra whose requirements have a lower bound."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        pytest.skip("tomllib: Python 3.11")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    with_floors = {name for name, reqs in extras.items() if any(lc.lowest(r) for r in reqs)}
    ci = (ROOT / ".ci" / "run").read_text()
    variables = dict(re.findall(r'^(\w+)="([^"]*)"', ci, re.M))
    calls = [line for line in ci.splitlines() if "lowest_constraints.py" in line and not line.lstrip().startswith("#")]
    named = {w for line in calls for w in re.sub(r"\$(\w+)", lambda m: variables.get(m[1], ""), line).split()}
    # the tools' extras (lint, types, docs site, mutation) run in the first environment only; dev and mutation are tools, not tested code
    assert with_floors - {"dev", "mutation"} <= named, sorted(with_floors - {"dev", "mutation"} - named)


def test_mutation_targets_groups_and_the_mutmut_section():
    assert mutation.modules_of(["core"]) == mutation.GROUPS["core"]
    assert mutation.modules_of(["flamingo_sim/devices/battery.py", "core"])[0] == "flamingo_sim/devices/battery.py"
    assert len(mutation.modules_of(["core", "core"])) == 4  # each module once
    with pytest.raises(SystemExit, match="unknown target 'flamingo_sim/devices/thermal_table.py'"):
        mutation.modules_of(["flamingo_sim/devices/thermal_table.py"])
    section = mutation.mutmut_section(["flamingo_sim/devices/policies", "flamingo_sim/fl/sim/limits.py"])
    assert 'only_mutate = ["flamingo_sim/devices/policies/*", "flamingo_sim/fl/sim/limits.py"]' in section
    assert '"tests/fl/sim/test_limits.py"' in section and '"tests/devices/test_policies.py"' in section
    for module, tests in mutation.TESTS.items():  # every module and test file named exists
        assert (ROOT / module).exists(), module
        assert all((ROOT / t).exists() for t in tests), tests


def test_mutation_results_are_read_and_summarised():
    text = ("    flamingo_sim.devices.battery.x_step__mutmut_1: killed\n"
            "    flamingo_sim.devices.battery.xǁBatteryǁdrain__mutmut_2: survived\n"
            "    flamingo_sim.devices.energy.x_parse__mutmut_3: no tests\n"
            "    flamingo_sim.devices.energy.x_parse__mutmut_4: timeout\n"
            "garbage line\n")
    statuses = mutation.parse_results(text)
    assert len(statuses) == 4 and statuses["flamingo_sim.devices.battery.xǁBatteryǁdrain__mutmut_2"] == "survived"
    rows = mutation.summarise(statuses)
    assert rows["flamingo_sim.devices.battery"] == {"mutants": 2, "killed": 1, "survived": 1, "no_tests": 0, "timeout": 0, "not_checked": 0,
                                                   "other": 0, "score": 0.5}
    assert rows["flamingo_sim.devices.energy"]["no_tests"] == 1 and rows["flamingo_sim.devices.energy"]["timeout"] == 1


def test_the_mutation_sample_is_deterministic_and_a_subset():
    names = [f"flamingo_sim.m.x_f__mutmut_{i}" for i in range(100)]
    a = mutation.sample(names, 10)
    assert a == mutation.sample(list(reversed(names)), 10) and len(a) == 10 and set(a) <= set(names)
    assert mutation.sample(names, 200) == sorted(names)


def test_junit_results_names_every_test_its_outcome_and_the_commit(tmp_path):
    """.ci/junit_results.py (the CUDA tests' results file): a real pytest run's JUnit XML in, one
    record per test out, with the commit (FLAMINGO_SIM_COMMIT where the tree has no git) and a
    provenance.json entry beside it."""
    (tmp_path / "test_inner.py").write_text(
        "import pytest\n\ndef test_ok():\n    pass\n\ndef test_bad():\n    assert 1 == 2\n\n"
        "@pytest.mark.skip(reason='no GPU')\ndef test_gpu():\n    pass\n")
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml", str(tmp_path / "j.xml"), "test_inner.py"],
                   cwd=tmp_path, capture_output=True, text=True)
    env = {"PATH": "/usr/bin:/bin", "FLAMINGO_SIM_COMMIT": "0123456789abcdef0123456789abcdef01234567"}
    done = subprocess.run([sys.executable, str(ROOT / ".ci" / "junit_results.py"), str(tmp_path / "j.xml"), str(tmp_path / "out" / "cuda.json"),
                           "--command", "pytest test_inner.py"], capture_output=True, text=True, env=env, cwd=tmp_path)
    doc = __import__("json").loads((tmp_path / "out" / "cuda.json").read_text())
    assert done.returncode == 1  # a test failed
    assert {t["id"]: t["outcome"] for t in doc["tests"]} == {"test_inner.py::test_ok": "passed", "test_inner.py::test_bad": "failed",
                                                             "test_inner.py::test_gpu": "skipped"}
    assert doc["counts"] == {"passed": 1, "failed": 1, "skipped": 1} and doc["command"] == "pytest test_inner.py"
    assert doc["commit"] in (env["FLAMINGO_SIM_COMMIT"], subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                                                                          text=True).stdout.strip())
    assert "cuda.json" in (tmp_path / "out" / "provenance.json").read_text()
    (tmp_path / "empty.xml").write_text("<testsuites><testsuite/></testsuites>")
    bad = subprocess.run([sys.executable, str(ROOT / ".ci" / "junit_results.py"), str(tmp_path / "empty.xml"), str(tmp_path / "e.json"),
                          "--command", "x"], capture_output=True, text=True)
    assert bad.returncode != 0 and "no <testcase>: the tests did not run" in bad.stderr
