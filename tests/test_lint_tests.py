"""The tests themselves: no loop that can pass having checked nothing.

A loop whose body skips an item (``continue``) before it asserts anything about it passes
whatever it skips; if it skips every item, it checks nothing. Such a loop must be followed, in
the same test, by an assertion on something the loop counted or collected (a name it assigns,
augments or appends to), so that a run that skipped everything fails.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def _loops_skipping_before_asserting(body: list[ast.stmt]) -> bool:
    """Whether a ``continue`` of this loop comes before an ``assert`` in it (nested loops' own ``continue`` aside)."""
    seen_continue = False
    for node in _walk_in_order(body):
        if isinstance(node, ast.Continue):
            seen_continue = True
        elif isinstance(node, ast.Assert) and seen_continue:
            return True
    return False


def _walk_in_order(body: list[ast.stmt]):
    """The nodes of ``body`` in source order, not entering nested loops or functions."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        for field in ("body", "orelse", "handlers", "finalbody"):
            yield from _walk_in_order([s for s in getattr(stmt, field, []) if isinstance(s, ast.stmt)])


def _names_written(loop: ast.stmt) -> set[str]:
    """Names the loop assigns, augments, or calls a method on (``ran.append``, ``seen.add``)."""
    out: set[str] = set()
    for node in ast.walk(loop):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                out |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
            out.add(node.func.value.id)
    return out


def vacuous_loops(source: str, filename: str = "<test>") -> list[str]:
    """``file:line`` of each loop that skips before asserting and whose function asserts nothing after
    it on what the loop wrote."""
    found = []
    for func in ast.walk(ast.parse(source, filename)):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for loop in ast.walk(func):
            if not isinstance(loop, (ast.For, ast.AsyncFor, ast.While)) or not _loops_skipping_before_asserting(loop.body):
                continue
            written = _names_written(loop)
            end = loop.end_lineno or loop.lineno
            later = [a for a in ast.walk(func) if isinstance(a, ast.Assert) and a.lineno > end]
            if not any(isinstance(n, ast.Name) and n.id in written for a in later for n in ast.walk(a)):
                found.append(f"{filename}:{loop.lineno}")
    return found


def test_no_test_loop_skips_before_asserting_without_counting():
    found = [hit for p in sorted(TESTS.rglob("*.py")) for hit in vacuous_loops(p.read_text(), str(p.relative_to(TESTS.parent)))]
    assert found == [], "loops that skip (continue) before asserting, with no assertion after on what they counted: " + ", ".join(found)


@pytest.mark.parametrize("source, vacuous", [
    # skips, asserts, and nothing after: everything could have been skipped
    ("def test_x(rows):\n    for r in rows:\n        if r is None:\n            continue\n        assert r > 0\n", True),
    # the same loop, counted and the count asserted
    ("def test_x(rows):\n    n = 0\n    for r in rows:\n        if r is None:\n            continue\n        assert r > 0\n        n += 1\n    assert n == 2\n", False),
    # collected into a list that is asserted on
    ("def test_x(rows):\n    ran = []\n    for r in rows:\n        if r is None:\n            continue\n        assert r\n        ran.append(r)\n    assert ran\n", False),
    # asserts before it skips: every item is checked
    ("def test_x(rows):\n    for r in rows:\n        assert r is not None\n        if r == 0:\n            continue\n", False),
    # a nested loop's continue is its own
    ("def test_x(rows):\n    for r in rows:\n        for c in r:\n            if not c:\n                continue\n        assert r\n", False),
])
def test_the_lint_finds_a_vacuous_loop(source, vacuous):
    assert bool(vacuous_loops(source)) is vacuous
