"""``reproduce`` refuses a bad ``--out``, executor or setting with one line and nothing on stdout: its phase header is
printed only once the phase's checks have passed (issue 50: ``== phase 1 of 1 ==`` came before five kinds of refusal)."""

from __future__ import annotations

import pytest

from flamingo_sim.cli import main


@pytest.mark.parametrize("args,expected", [
    (["--out", "{d}/afile"], "{d}/afile: Not a directory (ENOTDIR)"),
    (["--out", "{d}/r", "--executor", "bogus"], "--executor: unknown executor 'bogus'"),
    (["--out", "{d}/r", "--set", "fl.batch_size=100000"], "reproduce: run openimage_mobilenet: openimage_mobilenet: fl.batch_size: expected at most"),
    (["--out", "{d}/r", "--set", "phones.mix={nophone: 1.0}"], "reproduce: run openimage_mobilenet:"),
], ids=["out-a-file", "executor", "batch", "mix"])
def test_a_refusal_is_the_only_line(tmp_path, capsys, args, expected):
    (tmp_path / "afile").write_text("x")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert main(["reproduce", "--quick", *[a.replace("{d}", str(tmp_path)) for a in args]]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith(f"flamingo-sim reproduce: error: {expected.format(d=tmp_path)}"), err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
