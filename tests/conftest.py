"""Every test sees an empty user folder: nothing measured on this machine (``flamingo-sim
profile``) or left in ``~/.local/share/flamingo-sim`` changes what a test finds.

Under ``FLAMINGO_SIM_REQUIRE_ALL=1`` (set by ``.ci/run``) a test skipped for want of a component
CI must have fails instead: a skip whose reason matches :data:`REQUIRED` (an extra that is not
installed, Chromium or its driver, a user namespace for the mount tests). Skips for what a
machine may lack by nature (a GPU, a CPU's kernels) stay skips."""

from __future__ import annotations

import os
import re

import pytest

#: the variable that turns a missing required component into a failure
REQUIRE_ALL = "FLAMINGO_SIM_REQUIRE_ALL"
#: skip reasons that name a component CI installs: the extras ("... is not installed", "pip install
#: 'flamingo-sim[...]'"), Chromium and its driver, and the user namespace the mount tests need
REQUIRED = re.compile(r"not installed|pip install|user namespace with mounts")


@pytest.fixture(autouse=True)
def _empty_user_home(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("FLAMINGO_SIM_HOME", str(tmp_path_factory.mktemp("flamingo-sim-home")))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if os.environ.get(REQUIRE_ALL) != "1" or not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if REQUIRED.search(reason):
        report.outcome = "failed"
        report.longrepr = f"{REQUIRE_ALL}=1 and a required component is missing: {reason}"
