"""Every test sees an empty user folder: nothing measured on this machine (``flamingo-sim
profile``) or left in ``~/.local/share/flamingo-sim`` changes what a test finds."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _empty_user_home(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("FLAMINGO_SIM_HOME", str(tmp_path_factory.mktemp("flamingo-sim-home")))
