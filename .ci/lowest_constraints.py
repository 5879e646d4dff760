"""Print a pip constraints file that pins every dependency to the lowest version pyproject.toml allows.

Each requirement of ``[project] dependencies`` and of the extras named on the command line
(default: ``test``) that has a ``>=`` bound becomes ``name==bound``; exact pins (``==``) are kept;
a requirement without a lower bound is left free (pip picks what its other requirements allow).
Where several requirements bound one package (an extra raises a core floor: Flower's needs numpy
1.26), the highest bound wins.
``pip install -c constraints.txt -e '.[test]'`` then installs the lowest declared versions, so a
bound that is too low fails the suite run on them (.ci/run's lowest-versions job).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
_REQ = re.compile(r"^\s*([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*(.*)$")


def lowest(requirement: str) -> str | None:
    """``name==lowest`` for one requirement string, or None when it states no lower bound."""
    m = _REQ.match(requirement.split(";")[0])
    if not m:
        raise SystemExit(f"pyproject.toml: requirement {requirement!r} is not understood")
    name, spec = m.group(1), m.group(3)
    for clause in (c.strip() for c in spec.split(",") if c.strip()):
        if clause.startswith(("==", ">=")):
            return f"{name}=={clause[2:].strip()}"
    return None


def main(extras: list[str]) -> int:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in extras:
        if extra not in project["optional-dependencies"]:
            raise SystemExit(f"pyproject.toml: no extra {extra!r} (extras: {', '.join(project['optional-dependencies'])})")
        requirements += project["optional-dependencies"][extra]
    print("\n".join(constraints(requirements)))
    return 0


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version))


def constraints(requirements: list[str]) -> list[str]:
    """The ``name==lowest`` lines of ``requirements``, one per package (its highest lower bound), sorted."""
    pins: dict[str, str] = {}
    for req in requirements:
        if (pin := lowest(req)) is not None:
            key = pin.split("==")[0].lower()
            if key not in pins or _version_key(pin.split("==")[1]) > _version_key(pins[key].split("==")[1]):
                pins[key] = pin
    return sorted(pins.values(), key=str.lower)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["test"]))
