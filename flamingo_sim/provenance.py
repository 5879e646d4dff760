"""What wrote a results file: the commit, the command, the machine, and the code it depends on.

Every writer of a results file calls :func:`stamp` after writing it: the file gets an entry in
``provenance.json`` (:data:`MANIFEST`) in its folder, with

- ``commit``: the checkout's ``git`` HEAD (None outside a git checkout), and ``dirty``: whether
  tracked code differed from it (then the commit alone does not name the code);
- ``command``: the command line that wrote the file;
- ``machine``: CPU model, cores, the CPU's vector-instruction flags, the OS, and the versions of
  Python and of the numerical libraries (numpy and its BLAS, scipy, pandas, torch): what decides
  the last bits of a floating-point result;
- ``sources``: the SHA-256 of each file the results depend on most directly (the writer names
  them), so that a results file older than the code it describes can be found (:func:`stale`);
- ``sha256``: the file's own digest, so that an entry describes exactly the bytes it stamped
  (:func:`check`).

Entries for files written before this existed say how they were reconstructed (``backfilled``).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from flamingo_sim.errors import FlamingoError
from flamingo_sim.io import atomic_path

#: the name of the manifest in each results folder
MANIFEST = "provenance.json"
#: its ``format`` field
FORMAT = "flamingo-sim provenance 1"
#: the repository root of a source checkout (the package's parent folder)
ROOT = Path(__file__).resolve().parents[1]
#: the CPU flags that choose numerical kernels (BLAS, ATen, numpy's SIMD loops)
SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512_vnni",
              "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "neon", "asimd", "sve")
#: the fields every entry has
FIELDS = ("commit", "dirty", "command", "machine", "sources", "sha256")


def sha256(path: str | Path) -> str:
    """The SHA-256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _git(*args: str, root: Path = ROOT) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


#: what is not code: results, documentation and tests (a results file being written makes no checkout dirty)
NOT_CODE = (":(exclude)docs", ":(exclude)benchmarks/results", ":(exclude)tests", ":(exclude)*.md")


def commit(root: Path = ROOT) -> tuple[str | None, bool]:
    """(HEAD's hash, whether tracked code differs from it: anything but :data:`NOT_CODE`); outside a
    git checkout, ``FLAMINGO_SIM_COMMIT`` (set by whoever copied the tree) or None, and False."""
    head = _git("rev-parse", "HEAD", root=root)
    if head is None:  # a copy of the tree without git (a device machine): the commit its sender named, if any
        return os.environ.get("FLAMINGO_SIM_COMMIT") or None, False
    return head, bool(_git("status", "--porcelain", "--untracked-files=no", "--", ".", *NOT_CODE, root=root))


def _cpu() -> tuple[str, list[str]]:
    model, flags = platform.processor() or platform.machine(), set[str]()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model") and model in ("", platform.machine(), platform.processor()):
                model = value.strip()
            elif key.strip() in ("flags", "Features") and not flags:
                flags = set(value.split())
    except OSError:
        pass
    return model, [f for f in SIMD_FLAGS if f in flags]


def _version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _blas() -> str | None:
    try:
        import numpy as np

        info = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{info.get('name')} {info.get('version')}"
    except Exception:  # numpy before 1.26 has no dicts mode: the version of numpy then says the rest
        return None


def machine() -> dict[str, Any]:
    """The machine and the numerical libraries, as far as they decide a floating-point result."""
    model, flags = _cpu()
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "cpu_flags": flags,
        "os": platform.platform(),
        "python": platform.python_version(),
        "libraries": {name: _version(name) for name in ("numpy", "scipy", "pandas", "torch")} | {"blas": _blas()},
    }


def _files(source: str, root: Path) -> list[Path]:
    path = root / source
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts and not p.name.startswith("."))
    return [path]


def sources_digest(sources: Sequence[str], root: Path = ROOT) -> dict[str, str]:
    """{path relative to ``root``: SHA-256} of each source file (a folder: each file in it)."""
    out = {}
    for source in sources:
        for f in _files(source, root):
            if not f.is_file():
                raise FlamingoError(f"provenance: source {source}: no file {f}")
            out[f.relative_to(root).as_posix()] = sha256(f)
    return out


def describe(command: str, sources: Sequence[str] = (), root: Path = ROOT) -> dict[str, Any]:
    """The provenance of a file written now by ``command`` from code whose key files are ``sources``
    (paths relative to the repository root; omitted where the package is not a source checkout)."""
    head, dirty = commit(root)
    checkout = (root / "pyproject.toml").is_file() and (root / "flamingo_sim").is_dir()  # not an installed package
    return {"commit": head, "dirty": dirty, "command": command, "machine": machine(),
            "sources": sources_digest(sources, root) if checkout else {}}


def command_line(argv: Sequence[str] | None = None, program: str | None = None) -> str:
    """This process's command line as a person would type it: ``program`` (default: the script's path
    relative to the repository root, after ``python``) and the arguments."""
    import shlex

    argv = list(sys.argv if argv is None else argv)
    if program is None:
        script = Path(argv[0]).resolve()
        program = "python " + (script.relative_to(ROOT).as_posix() if script.is_relative_to(ROOT) else argv[0])
    return " ".join([program, *(shlex.quote(a) for a in argv[1:])])


def read(folder: str | Path) -> dict[str, dict[str, Any]]:
    """The entries of ``folder``'s manifest ({} where it has none); one line for one not written by :func:`stamp`."""
    path = Path(folder) / MANIFEST
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise FlamingoError(f"{path}: not a provenance manifest ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("files"), dict):
        raise FlamingoError(f"{path}: not a provenance manifest (expected format {FORMAT!r}); it was not written by flamingo-sim, left as it is")
    return data["files"]


def stamp(files: Iterable[str | Path], command: str, sources: Sequence[str] = (), *,
          backfilled: str | None = None, record: Mapping[str, Any] | None = None) -> None:
    """Record ``files`` (just written by ``command``) in the manifest of each one's folder.

    ``record`` replaces :func:`describe`'s answer (a backfilled entry); ``backfilled`` says how it
    was reconstructed. An existing manifest is read first, so its other entries are kept."""
    entry = dict(record) if record is not None else describe(command, sources)
    if backfilled is not None:
        entry["backfilled"] = backfilled
    by_folder: dict[Path, list[Path]] = {}
    for f in map(Path, files):
        by_folder.setdefault(f.parent, []).append(f)
    for folder, paths in by_folder.items():
        entries = read(folder)
        for p in paths:
            entries[p.name] = {**entry, "sha256": sha256(p)}
        with atomic_path(folder / MANIFEST) as tmp:
            tmp.write_text(json.dumps({"format": FORMAT, "files": dict(sorted(entries.items()))}, indent=1) + "\n")


def sources_at(commit: str, sources: Sequence[str], root: Path = ROOT) -> tuple[dict[str, str], list[str]]:
    """``({path: SHA-256}, absent)``: each source file as it was at ``commit`` (a folder: each file git tracked in it
    then), and the sources that commit did not have."""
    out: dict[str, str] = {}
    absent: list[str] = []
    for source in sources:
        names = _git("ls-tree", "-r", "--name-only", commit, "--", source, root=root)
        if not names:
            absent.append(source)
            continue
        for name in names.splitlines():
            if "__pycache__" in name.split("/"):
                continue
            blob = subprocess.run(["git", "-C", str(root), "show", f"{commit}:{name}"], capture_output=True, timeout=60)
            if blob.returncode != 0:
                raise FlamingoError(f"provenance: cannot read {name} at commit {commit[:10]}: {blob.stderr.decode(errors='replace').strip()}")
            out[name] = hashlib.sha256(blob.stdout).hexdigest()
    return out, absent


def add_sources(files: Iterable[str | Path], sources: Sequence[str], at: str | None = None, root: Path = ROOT) -> None:
    """Name the sources of files stamped without them, keeping everything else their entries say (commit, command,
    machine, the file's digest): each source's digest as it was at the commit that wrote the file (``at``, where the entry's
    ``commit`` is not the one it was measured at), so that :func:`stale` finds it older than today's code exactly when that
    code changed since. The entry's ``backfilled`` says it was done after the fact. Only a file unchanged since it was
    stamped, whose commit is known and holds at least one of ``sources``."""
    for f in map(Path, files):
        entry = read(f.parent).get(f.name)
        if entry is None:
            raise FlamingoError(f"{f}: no entry in {MANIFEST} to name sources in (stamp it when it is written)")
        if entry.get("sha256") != sha256(f):
            raise FlamingoError(f"{f}: changed since it was stamped; measure it again instead")
        commit_id = at or entry.get("commit")
        if not commit_id:
            raise FlamingoError(f"{f}: its entry names no commit to read the sources at")
        digests, absent = sources_at(commit_id, sources, root)
        if not digests:
            raise FlamingoError(f"{f}: none of {', '.join(sources)} is in commit {commit_id[:10]}")
        note = (f"sources named after the fact, as they were at commit {commit_id[:10]}"
                + (f" (not there then: {', '.join(absent)})" if absent else ""))
        record = {k: v for k, v in entry.items() if k != "sha256"}
        record["sources"] = {**entry.get("sources", {}), **digests}
        record["backfilled"] = f"{entry['backfilled']}; {note}" if entry.get("backfilled") else note
        stamp([f], str(entry.get("command", "")), record=record)


def check(folder: str | Path) -> list[str]:
    """What is wrong with ``folder``'s manifest against its files: a file without an entry, an
    entry missing a field, naming no commit, or whose digest is not the file's; an entry for no file."""
    folder = Path(folder)
    entries = read(folder)
    problems = []
    for f in sorted(p for p in folder.iterdir() if p.is_file() and p.name != MANIFEST and not p.name.startswith(".")):
        e = entries.get(f.name)
        if e is None:
            problems.append(f"{f}: no entry in {MANIFEST}")
            continue
        if missing := [k for k in FIELDS if k not in e]:
            problems.append(f"{f}: its entry lacks {', '.join(missing)}")
        elif not e["commit"] or not e["command"] or not e["machine"]:
            problems.append(f"{f}: its entry names no commit, command or machine")
        elif e["sha256"] != sha256(f):
            problems.append(f"{f}: changed since it was stamped (sha256 differs from {MANIFEST})")
    problems += [f"{folder / name}: in {MANIFEST} but no such file" for name in sorted(entries) if not (folder / name).is_file()]
    return problems


def stale(folder: str | Path, root: Path = ROOT) -> list[str]:
    """The files of ``folder`` written by code older than today's: a source the entry names whose
    content now differs from what it was when the file was written (or that is gone)."""
    out = []
    for name, e in sorted(read(folder).items()):
        changed = []
        for src, digest in e.get("sources", {}).items():
            path = root / src
            if not path.is_file() or sha256(path) != digest:
                changed.append(src)
        if changed:
            out.append(f"{Path(folder) / name}: written by code older than today's {', '.join(changed)} "
                       f"(commit {str(e.get('commit'))[:10]}); regenerate it with: {e.get('command')}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m flamingo_sim.provenance stamp --command CMD [--source PATH]... FILE...``: stamp files
    copied by hand (from a run directory into docs/results); ``add-sources --source PATH... [--at COMMIT] FILE...``: name
    the sources of files stamped without them (:func:`add_sources`); ``check FOLDER...``: report problems."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m flamingo_sim.provenance", description=main.__doc__)
    sub = ap.add_subparsers(dest="action", required=True)
    s = sub.add_parser("stamp")
    s.add_argument("--command", required=True)
    s.add_argument("--source", action="append", default=[])
    s.add_argument("files", nargs="+", type=Path)
    c = sub.add_parser("check")
    c.add_argument("folders", nargs="+", type=Path)
    a = sub.add_parser("add-sources", help="name the sources of files stamped without them (their digests at the file's commit)")
    a.add_argument("--source", action="append", required=True)
    a.add_argument("--at", help="the commit the files were measured at, where their entries name another")
    a.add_argument("files", nargs="+", type=Path)
    args = ap.parse_args(argv)
    try:
        if args.action == "stamp":
            stamp(args.files, args.command, args.source)
            return 0
        if args.action == "add-sources":
            add_sources(args.files, args.source, args.at)
            return 0
        problems = [p for f in args.folders for p in check(f) + stale(f)]
    except FlamingoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(problems) or "ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
