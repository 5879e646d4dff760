"""Naming the sources of a results file stamped without them (issue 50: 93 of 94 entries named none, so the staleness
check could flag one file): :func:`flamingo_sim.provenance.add_sources` records each source as it was at the file's
commit, keeps the rest of the entry, and the file is then found stale exactly when that source changed since."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from flamingo_sim import provenance
from flamingo_sim.errors import FlamingoError


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A checkout whose first commit has bench.py and lib/a.py; the timing file was stamped then, with no sources."""
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "config", "user.email", "t@example.org")
    _git(tmp_path, "config", "user.name", "t")
    (tmp_path / "lib").mkdir()
    (tmp_path / "bench.py").write_text("print(1)\n")
    (tmp_path / "lib" / "a.py").write_text("A = 1\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "first")
    out = tmp_path / "results"
    out.mkdir()
    (out / "t.json").write_text('{"s": 1.5}\n')
    entry = {"commit": _git(tmp_path, "rev-parse", "HEAD"), "dirty": False, "command": "python bench.py --json t.json",
             "machine": {"cpu": "x"}, "sources": {}}
    provenance.stamp([out / "t.json"], entry["command"], record=entry)
    return tmp_path


def test_sources_are_recorded_as_they_were_at_the_files_commit(repo: Path):
    first = _git(repo, "rev-parse", "HEAD")
    (repo / "bench.py").write_text("print(2)\n")  # changed since, not committed: the digest must be the commit's
    provenance.add_sources([repo / "results" / "t.json"], ["bench.py", "lib", "gone.py"], root=repo)
    entry = provenance.read(repo / "results")["t.json"]
    assert entry["sources"] == {"bench.py": hashlib.sha256(b"print(1)\n").hexdigest(), "lib/a.py": hashlib.sha256(b"A = 1\n").hexdigest()}
    assert (entry["commit"], entry["command"], entry["machine"]) == (first, "python bench.py --json t.json", {"cpu": "x"})
    assert entry["backfilled"] == f"sources named after the fact, as they were at commit {first[:10]} (not there then: gone.py)"
    assert entry["sha256"] == provenance.sha256(repo / "results" / "t.json")  # the file's bytes untouched
    (line,) = provenance.stale(repo / "results", root=repo)  # bench.py changed since that commit
    assert "t.json: written by code older than today's bench.py" in line
    (repo / "bench.py").write_text("print(1)\n")
    assert provenance.stale(repo / "results", root=repo) == []
    (repo / "lib" / "a.py").write_text("A = 2\n")
    assert "lib/a.py" in provenance.stale(repo / "results", root=repo)[0]


def test_a_file_changed_since_its_stamp_or_without_an_entry_is_refused(repo: Path):
    (repo / "results" / "t.json").write_text('{"s": 9.9}\n')
    with pytest.raises(FlamingoError, match="changed since it was stamped; measure it again instead"):
        provenance.add_sources([repo / "results" / "t.json"], ["bench.py"], root=repo)
    (repo / "results" / "u.json").write_text("{}\n")
    with pytest.raises(FlamingoError, match="no entry in provenance.json"):
        provenance.add_sources([repo / "results" / "u.json"], ["bench.py"], root=repo)
    provenance.stamp([repo / "results" / "t.json"], "cmd", record={"commit": _git(repo, "rev-parse", "HEAD"), "dirty": False,
                                                                    "command": "cmd", "machine": {}, "sources": {}})
    with pytest.raises(FlamingoError, match="none of nothing.py is in commit"):
        provenance.add_sources([repo / "results" / "t.json"], ["nothing.py"], root=repo)
    assert json.loads((repo / "results" / "provenance.json").read_text())["files"]["t.json"]["sources"] == {}
