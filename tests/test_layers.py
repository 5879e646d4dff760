"""The layers (pyproject.toml's import-linter contracts) cover every package, and what import-linter
cannot express: torch.distributed held to its modules, no import path in a string pointing up a layer."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "flamingo_sim"

if sys.version_info < (3, 11):
    pytest.skip("tomllib: Python 3.11", allow_module_level=True)
import tomllib  # noqa: E402

CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]

#: The modules that may import torch.distributed: the distributed run and the runner's rank handling.
TORCH_DISTRIBUTED = ("flamingo_sim.fl.distributed", "flamingo_sim.fl.runner.ranks")


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources() -> list[tuple[str, ast.Module]]:
    return [(_module(p), ast.parse(p.read_text(encoding="utf-8"))) for p in sorted(PACKAGE.rglob("*.py"))]


def _imports(tree: ast.Module) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return out


def test_every_package_with_modules_of_its_own_has_its_layers():
    containers = {c for contract in CONTRACTS if contract["type"] == "layers" for c in contract.get("containers", ["flamingo_sim"])}
    # a package whose every part is one of an independence contract's modules: none may import another
    containers |= {m.rpartition(".")[0] for contract in CONTRACTS if contract["type"] == "independence" for m in contract["modules"]}
    packages = [_module(p.parent / "__init__.py") for p in PACKAGE.rglob("__init__.py")]
    # a package of two or more modules (or subpackages) orders them; a package of one module has nothing to order
    ordered = [p for p in packages if len([m for m in (ROOT / p.replace(".", "/")).iterdir()
                                           if (m.suffix == ".py" and m.name != "__init__.py") or (m / "__init__.py").is_file()]) >= 2]
    assert "flamingo_sim.fl.runner" in ordered and "flamingo_sim.devices" in ordered
    assert sorted(p for p in ordered if p not in containers) == []


def test_torch_distributed_is_imported_only_by_the_distributed_modules():
    found = sorted(name for name, tree in _sources() if any(i == "torch.distributed" or i.startswith("torch.distributed.") for i in _imports(tree)))
    assert found and all(name.startswith(TORCH_DISTRIBUTED) for name in found), found


def _layer(module: str, layers: list[str]) -> int | None:
    for i, line in enumerate(layers):
        if any(module == m.strip() or module.startswith(m.strip() + ".") for m in line.split("|")):
            return i
    return None


def test_no_string_names_an_import_path_of_a_higher_layer():
    """A registry of ``"package.module:Name"`` strings would hide an import that points up (the engines
    of the integrations are entry points in pyproject.toml instead)."""
    top = next(c for c in CONTRACTS if c["type"] == "layers" and "containers" not in c)["layers"]
    path = re.compile(r"^(flamingo_sim(?:\.\w+)+)(?::\w+)?$")
    upward = []
    for name, tree in _sources():
        here = _layer(name, top)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and (m := path.match(node.value)):
                there = _layer(m.group(1), top)
                if here is not None and there is not None and there < here:
                    upward.append((name, node.value))
    assert upward == []
