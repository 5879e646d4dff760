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
#: 'flamingo-sim[...]'"), Chromium and its driver, the user namespace the mount tests need, and what a bare
#: ``pytest.importorskip`` says: "could not import 'x'", or with ``minversion`` "x has __version__ 1.0, required is: 2.0"
REQUIRED = re.compile(r"not installed|pip install|user namespace with mounts|could not import|required is:")


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


@pytest.hookimpl(tryfirst=True)
def pytest_collectreport(report):
    """A whole module skipped at collection (a module-level ``importorskip``) fails the same way (before the
    terminal counts it)."""
    if os.environ.get(REQUIRE_ALL) != "1" or not report.skipped:
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if REQUIRED.search(reason):
        report.outcome = "failed"
        report.longrepr = f"{REQUIRE_ALL}=1 and a required component is missing: {reason}"
        _FAILED_COLLECTIONS.append(report.nodeid)


#: the modules whose collection-time skip was turned into a failure (the session's exit status follows them)
_FAILED_COLLECTIONS: list[str] = []


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    """pytest counted the converted collection report after its own bookkeeping: the run must still fail."""
    if _FAILED_COLLECTIONS and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
