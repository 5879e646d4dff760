"""Outputs never replace a user's files, honour the umask, leave no stale temporaries; OS errors are one line."""

from __future__ import annotations

import errno
import os
import shlex
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flamingo_sim.errors import FlamingoError
from flamingo_sim.faults import check_writable, describe_os_error, run_lock
from flamingo_sim.io import (
    MANIFEST,
    OutputError,
    atomic_dir,
    atomic_path,
    check_out_dir,
    clean_stale,
)
from tests.mounts import needs_mounts

ROOT = Path(__file__).resolve().parents[1]


def test_atomic_path_honours_the_umask(tmp_path):
    umask = os.umask(0o027)
    try:
        with atomic_path(tmp_path / "a.txt") as tmp:
            tmp.write_text("x")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == 0o640  # not mkstemp's 0600


def test_atomic_dir_refuses_a_file_and_a_directory_of_user_files(tmp_path):
    user_file = tmp_path / "notes.txt"
    user_file.write_text("mine")
    with pytest.raises(OutputError, match=r"^out_dir .*notes.txt: exists and is not a directory; refusing to replace it - choose a new directory path$"), \
            atomic_dir(user_file, "trace-set"):
        pass
    assert user_file.read_text() == "mine"
    user_dir = tmp_path / "photos"
    user_dir.mkdir()
    (user_dir / "cat.jpg").write_text("meow")
    with pytest.raises(OutputError, match=r"holds files flamingo-sim did not write \(no \.flamingo-sim\.json\); refusing to replace it - choose a new or empty directory$"), \
            atomic_dir(user_dir, "trace-set"):
        pass
    assert (user_dir / "cat.jpg").read_text() == "meow"
    # another kind of this tool's output is refused too; an empty directory and the same kind are replaced
    with atomic_dir(tmp_path / "rep", "report") as stage:
        (stage / "a").write_text("1")
    with pytest.raises(OutputError, match="holds a flamingo-sim report, not a trace-set"):
        check_out_dir(tmp_path / "rep", "trace-set")
    (tmp_path / "empty").mkdir()
    with atomic_dir(tmp_path / "empty", "trace-set") as stage:
        (stage / "b").write_text("2")
    assert sorted(p.name for p in (tmp_path / "empty").iterdir()) == [MANIFEST, "b"]


def test_stale_temporaries_of_a_dead_writer_are_removed_on_the_next_write(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    pid = int(dead.stdout)
    stale_tmp = tmp_path / f".metrics.parquet.{pid}.abc123.tmp"
    stale_tmp.write_text("half")
    stale_stage = tmp_path / f".traces.{pid}.x1y2.staging"
    stale_stage.mkdir()
    (stale_stage / "devices.parquet").write_text("half")
    stale_old = tmp_path / ".traces.k9_z.old"  # written before PIDs were recorded
    stale_old.mkdir()
    live = tmp_path / f".metrics.parquet.{os.getpid()}.live01.tmp"  # a writer that is alive stays
    live.write_text("busy")
    other = tmp_path / f".other.{pid}.abc.tmp"  # not this name: left for its own writer
    other.write_text("x")
    with atomic_path(tmp_path / "metrics.parquet") as tmp:
        tmp.write_text("new")
    assert not stale_tmp.exists() and live.exists() and other.exists()
    with atomic_dir(tmp_path / "traces", "trace-set") as stage:
        (stage / "a").write_text("1")
    assert not stale_stage.exists() and not stale_old.exists()
    assert clean_stale(tmp_path) == [other]


@pytest.mark.parametrize("case", ["under_a_file", "proc", "read_only"])
def test_check_writable_decides_before_any_work(tmp_path, case):
    if case == "under_a_file":
        (tmp_path / "f").write_text("x")
        target, code = tmp_path / "f" / "run", errno.ENOTDIR
    elif case == "proc":
        target, code = Path("/proc/flamingo-run"), None
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes into a read-only directory (the read-only mount test below covers root)")
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        target, code = ro / "run", errno.EACCES
    with pytest.raises(OSError) as info:
        check_writable(target)
    if code is not None:
        assert info.value.errno == code
    line = describe_os_error(info.value)
    assert "\n" not in line and line.endswith(f"({errno.errorcode[info.value.errno]})")
    assert not list(tmp_path.glob(".flamingo-sim-probe*"))


@needs_mounts
def test_check_writable_refuses_a_read_only_mount_as_any_user(tmp_path):
    """The read_only case above for root too (root writes through a directory's mode): a tmpfs
    mounted read-only in a user namespace refuses everyone, as the disk-full tests' mounts do."""
    mnt = tmp_path / "ro"
    mnt.mkdir()
    code = textwrap.dedent(f"""
        import errno
        from pathlib import Path
        from flamingo_sim.faults import check_writable, describe_os_error
        try:
            check_writable(Path({str(mnt / "run")!r}))
        except OSError as exc:
            print(errno.errorcode[exc.errno])
            print(describe_os_error(exc))
        else:
            print("writable")
    """)
    script = f"mount -t tmpfs -o ro,size=64k tmpfs {mnt} && {shlex.quote(sys.executable)} -c {shlex.quote(code)} && ls -A {mnt}"
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    # the path given first, then the directory that refused it (issue 22); nothing left in the mount
    assert proc.stdout.splitlines() == ["EROFS", f"{mnt / 'run'}: cannot write in {mnt}: Read-only file system (EROFS)"]
    assert not list(tmp_path.glob(".flamingo-sim-probe*"))


def test_describe_os_error_names_path_reason_and_errno():
    exc = OSError(errno.ENOSPC, "No space left on device", "/data/run/metrics.parquet")
    assert describe_os_error(exc) == (
        "/data/run/metrics.parquet: No space left on device (ENOSPC); the disk is full (or a quota or file-size limit "
        "is reached): free space, nothing half-written was kept"
    )
    # pyarrow puts the errno only in its message
    assert describe_os_error(OSError("Error writing bytes to file. Detail: [errno 13] Permission denied"), "x.parquet") == (
        "x.parquet: Permission denied (EACCES)"
    )


def test_second_writer_is_refused_naming_the_holder(tmp_path):
    code = textwrap.dedent(f"""
        import sys, time
        from flamingo_sim.faults import run_lock
        with run_lock({str(tmp_path / 'run')!r}):
            print("locked", flush=True)
            time.sleep(30)
    """)
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(FlamingoError) as info, run_lock(tmp_path / "run"):
            pass
        assert str(info.value) == (
            f"{tmp_path / 'run'}: another flamingo-sim process (PID {holder.pid}) is writing this run directory; "
            "wait for it to end or choose another out_dir"
        )
    finally:
        holder.kill()
        holder.wait()
    with run_lock(tmp_path / "run"):  # the lock dies with its holder
        assert (tmp_path / "run" / ".lock").read_text().strip() == str(os.getpid())
