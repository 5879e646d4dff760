"""The documentation build can fail: ``mkdocs build --strict`` with the site's own configuration
(mkdocs.yml: its plug-ins, hooks and link validation) stops on a broken link or anchor, and
``.ci/run`` runs it without ``--quiet``, which would hide the warnings strict mode counts.

The build here is of a small copy of the site (two pages, the real configuration otherwise), so
it takes seconds; ``.ci/run`` builds the whole site."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _build(tmp_path: Path, pages: dict[str, str]) -> subprocess.CompletedProcess:
    pytest.importorskip("mkdocs", reason="the docs extra is not installed: pip install 'flamingo-sim[docs]'")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in pages.items():
        (docs / name).write_text(text)
    config.update(docs_dir=str(docs), site_dir=str(tmp_path / "site"), nav=list(pages),
                  hooks=[str(ROOT / h) for h in config.get("hooks", [])])
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(tmp_path / "mkdocs.yml")], cwd=ROOT,
                          capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)}, timeout=600)


GOOD = {"index.md": "# Home\n\nSee [the other page](other.md#a-heading).\n", "other.md": "# Other\n\n## A heading\n\ntext\n"}


def test_a_clean_copy_builds(tmp_path):
    done = _build(tmp_path, GOOD)
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr


@pytest.mark.parametrize("link, says", [
    ("missing.md", "contains a link 'missing.md', but the target is not found among documentation files"),
    ("other.md#no-such-heading", "does not contain an anchor '#no-such-heading'"),
])
def test_a_broken_link_fails_the_strict_build(tmp_path, link, says):
    done = _build(tmp_path, {**GOOD, "index.md": f"# Home\n\nSee [there]({link}).\n"})
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert says in said and re.search(r"Aborted with 1 warnings? in strict mode", said), said


def test_ci_builds_strict_and_shows_the_warnings():
    builds = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if "mkdocs build" in line and not line.lstrip().startswith("#")]
    assert builds and all("--strict" in b and "--quiet" not in b and " -q" not in b for b in builds), builds
