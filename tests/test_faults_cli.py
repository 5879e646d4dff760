"""Every command's --out: a user's file or directory is refused in one line, an OS error is one line."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from flamingo_sim.cli import main
from flamingo_sim.io import MANIFEST
from tests.traces.trace_helpers import regular_device, table_of

REFUSE = "refusing to replace it - choose a new or empty directory"


def _err(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.fixture
def dump(tmp_path):
    pq.write_table(table_of([regular_device(1, 29, 120), regular_device(2, 29, 120)]), tmp_path / "g.parquet")
    return tmp_path / "g.parquet"


def _prep(dump, out):
    return main(["prep-traces", str(dump), "--out", str(out), "--max-date", "2026-01-01", "--shifts", "2"])


def test_prep_traces_refuses_a_user_file_and_a_directory_of_user_files(dump, tmp_path, capsys):
    user_file = tmp_path / "thesis.tex"
    user_file.write_text("chapter 1")
    assert _prep(dump, user_file) == 2
    assert _err(capsys) == (f"flamingo-sim prep-traces: error: --out {user_file}: exists and is not a directory; "
                            "refusing to replace it - choose a new directory path")
    assert user_file.read_text() == "chapter 1"
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.md").write_text("mine")
    assert _prep(dump, home) == 2
    assert _err(capsys) == f"flamingo-sim prep-traces: error: --out {home}: holds files flamingo-sim did not write (no {MANIFEST}); {REFUSE}"
    assert [p.name for p in home.iterdir()] == ["notes.md"]
    # its own output is replaced, again and again
    assert _prep(dump, tmp_path / "ts") == 0 and _prep(dump, tmp_path / "ts") == 0
    assert sorted(p.name for p in (tmp_path / "ts").iterdir()) == [MANIFEST, "clients.parquet", "devices.parquet", "report.json"]


def test_synth_greenhub_refuses_a_layout_directory_of_user_files(tmp_path, capsys):
    (tmp_path / "kaggle").mkdir()
    (tmp_path / "kaggle" / "data.csv").write_text("mine")
    assert main(["synth-greenhub", "--out", str(tmp_path), "--devices", "2", "--layouts", "parquet"]) == 2
    assert _err(capsys).endswith(f"--out {tmp_path / 'kaggle'}: holds files flamingo-sim did not write (no {MANIFEST}); {REFUSE}")
    assert (tmp_path / "kaggle" / "data.csv").read_text() == "mine"


def test_profile_refuses_to_overwrite_a_file_that_is_not_a_profile(tmp_path, capsys):
    user_file = tmp_path / "config.yaml"
    user_file.write_text("important: true\n")
    rc = main(["profile", "--model", "logreg", "--out", str(user_file), "--profiles-dir", str(tmp_path / "p"), "--idle-s", "0"])
    err = _err(capsys)
    if "needs Linux" in err:
        pytest.skip("flamingo-sim profile needs Linux")
    assert rc == 2
    assert err == (f"flamingo-sim profile: error: --out {user_file}: exists and is not a flamingo-sim profile; "
                            "refusing to replace it - choose another file path")
    assert user_file.read_text() == "important: true\n"


@pytest.mark.parametrize("command", ["prep-traces", "synth-greenhub", "run"])
def test_out_under_a_file_is_one_line_before_any_work(dump, tmp_path, capsys, command):
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    out = blocker / "sub" / "out"
    argv = {
        "prep-traces": ["prep-traces", str(dump), "--out", str(out)],
        "synth-greenhub": ["synth-greenhub", "--out", str(out), "--devices", "2"],
        "run": ["run", "experiments/openimage_mobilenet.yaml", "--out", str(out), "--set", "fl.rounds=1"],
    }[command]
    assert main(argv) == 2
    assert _err(capsys) == f"flamingo-sim {command}: error: {out}: {blocker} is a file: Not a directory (ENOTDIR)"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocker", "g.parquet"]


def test_out_in_proc_is_one_line(dump, capsys):
    assert _prep(dump, "/proc/flamingo-traces") == 2
    err = _err(capsys)
    assert err.startswith("flamingo-sim prep-traces: error: /proc/flamingo-traces: cannot write in /proc: ") and err.endswith(")")


def test_run_out_names_the_path_given_then_the_reason(capsys):
    """Issue 22: `--out /proc/x` said `/proc: No such file or directory`, naming the parent, not the path given."""
    assert main(["run", "experiments/openimage_mobilenet.yaml", "--out", "/proc/x"]) == 2
    assert _err(capsys) == "flamingo-sim run: error: /proc/x: cannot write in /proc: No such file or directory (ENOENT)"
    assert not Path("/proc/x").exists()


def test_prep_traces_on_a_full_disk_is_one_line_and_leaves_nothing(dump, tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = ("import resource, runpy, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
            "resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000)); sys.argv = sys.argv[1:]; "
            "runpy.run_module('flamingo_sim', run_name='__main__')")
    out = tmp_path / "ts"
    env = {**os.environ, "FLAMINGO_SIM_QUIET": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run([sys.executable, "-c", code, "flamingo-sim", "prep-traces", str(dump), "--out", str(out), "--max-date", "2026-01-01"],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"flamingo-sim prep-traces: error: {out}: File too large (EFBIG); the disk is full (or a quota or "
                                   "file-size limit is reached): free space, nothing half-written was kept")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.parquet"]  # no staging directory, no partial trace set


def test_run_out_onto_a_file_is_one_line(tmp_path, capsys):
    target = tmp_path / "results.csv"
    target.write_text("a,b\n")
    assert main(["run", "experiments/openimage_mobilenet.yaml", "--out", str(target)]) == 2
    assert _err(capsys) == f"flamingo-sim run: error: {target}: Not a directory (ENOTDIR)"
    assert target.read_text() == "a,b\n"


_LEAVE_SCRIPT = r'''
import atexit, sys, threading, time
from pathlib import Path

out = Path(sys.argv[1])


class Native:  # stands for a native library's state that the interpreter's tear-down destroys
    def __del__(self):
        (out / "torn-down").write_text("yes")


sys.modules["native_state"] = Native()  # freed only by the interpreter's tear-down
atexit.register(lambda: (out / "atexit").write_text("ran"))


def late():
    time.sleep(0.3)
    (out / "thread").write_text("joined")


threading.Thread(target=late).start()  # non-daemon: the interpreter waits for it, and so must the CLI
from concurrent.futures import ThreadPoolExecutor

idle = ThreadPoolExecutor(1)  # never shut down: its non-daemon worker ends only on threading's own exit call
idle.submit(int).result()
sys.argv = ["flamingo-sim", *sys.argv[2:]]
print("before main", flush=False)
from flamingo_sim.cli import main

raise SystemExit(main())
'''


@pytest.mark.parametrize("argv, code", [(["profiles", "--json"], 0), (["run", "no-such-experiment.yaml"], 2)], ids=["ok", "error"])
def test_the_command_leaves_after_python_s_own_end_but_before_the_native_tear_down(tmp_path, argv, code):
    """``python -m flamingo_sim`` and the console script leave through ``cli._leave``: other threads are
    joined, atexit handlers run and output is flushed, with the command's exit code, but the interpreter's
    tear-down (where Arrow's parquet thread pool can abort a finished run with SIGABRT) never runs."""
    import subprocess
    import sys

    from tests.cli_runs import cli_env

    script = tmp_path / "leave.py"
    script.write_text(_LEAVE_SCRIPT)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path), *argv], capture_output=True, text=True, env=cli_env(), timeout=60)
    assert proc.returncode == code, proc.stderr
    assert proc.stdout.startswith("before main\n")  # buffered output flushed
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "thread").read_text() == "joined"
    assert not (tmp_path / "torn-down").exists()
    if code:
        assert proc.stderr.strip().splitlines()[-1].startswith("flamingo-sim run: error: "), proc.stderr
