"""Every package's opening docstring names each module and sub-package it holds."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import flamingo_sim

ROOT = Path(flamingo_sim.__file__).parent


def _packages() -> list[Path]:
    return sorted(p.parent for p in ROOT.rglob("__init__.py"))


def _dotted(package: Path) -> str:
    return ".".join(("flamingo_sim", *package.relative_to(ROOT).parts))


def _unnamed(package: Path, dotted: str) -> list[str]:
    """The modules and sub-packages of ``package`` its docstring does not name (by their dotted path, or as :mod:`.name`)."""
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    held = [p.stem for p in package.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    held += [p.name for p in package.iterdir() if (p / "__init__.py").is_file()]
    return sorted(m for m in held if not re.search(rf"\b{re.escape(dotted)}\.{m}\b|:mod:`\.{m}`", doc))


def test_every_module_is_named_in_its_package_docstring() -> None:
    missing = {_dotted(p): _unnamed(p, _dotted(p)) for p in _packages()}
    missing = {k: v for k, v in missing.items() if v}
    assert missing == {}, f"modules not named in their package's docstring: {missing}"


def test_the_check_finds_a_module_left_out(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('"""Holds :mod:`~pkg.alpha`."""\n')
    (pkg / "alpha.py").write_text("")
    (pkg / "beta.py").write_text("")
    (pkg / "gamma").mkdir()
    (pkg / "gamma" / "__init__.py").write_text("")
    assert _unnamed(pkg, "pkg") == ["beta", "gamma"]
    (pkg / "__init__.py").write_text('"""Holds :mod:`~pkg.alpha`, pkg.beta and :mod:`.gamma`; not pkg.alphabet."""\n')
    assert _unnamed(pkg, "pkg") == []
