"""``FLAMINGO_SIM_REQUIRE_ALL=1`` (CI) turns the skip of a required component into a failure, and
leaves other skips alone; without it both skip (tests/conftest.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]

INNER = '''
import pytest

def test_needs_an_extra():
    pytest.importorskip("no_such_module_xyz", reason="the xyz extra is not installed: pip install 'flamingo-sim[xyz]'")

@pytest.mark.skipif(True, reason="no user namespace with mounts (unshare -rm) to make a small or read-only tmpfs")
def test_needs_mounts():
    pass

@pytest.mark.skipif(True, reason="CUDA graphs need a GPU")
def test_needs_a_gpu():
    pass

def test_bare_importorskip():
    pytest.importorskip("no_such_module_abc")

def test_too_old():
    pytest.importorskip("pytest", minversion="999")
'''

MODULE_LEVEL = '''
import pytest

pytest.importorskip("no_such_module_def")

def test_never_collected():
    pass
'''


# a skip in a test's body fails the test; one from a skipif mark (at set-up) makes an error: either fails the run
@pytest.mark.parametrize("required, failed, errors, skipped", [("1", 3, 1, 1), ("", 0, 0, 5)])
def test_required_skips_fail_only_under_the_variable(pytester, monkeypatch, required, failed, errors, skipped):
    shutil.copy(ROOT / "tests" / "conftest.py", pytester.path / "conftest.py")
    pytester.makepyfile(test_inner=INNER)
    monkeypatch.setenv("FLAMINGO_SIM_REQUIRE_ALL", required)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=failed, errors=errors, skipped=skipped)
    if failed:
        result.stdout.fnmatch_lines(["*FLAMINGO_SIM_REQUIRE_ALL=1 and a required component is missing: *xyz extra is not installed*"])


@pytest.mark.parametrize("required, errors, skipped", [("1", 1, 0), ("", 0, 1)])
def test_a_module_skipped_at_collection_fails_too(pytester, monkeypatch, required, errors, skipped):
    """A module-level importorskip skips the whole module at collection; under the variable it fails the run."""
    shutil.copy(ROOT / "tests" / "conftest.py", pytester.path / "conftest.py")
    pytester.makepyfile(test_module=MODULE_LEVEL, test_other="def test_passes():\n    pass\n")
    monkeypatch.setenv("FLAMINGO_SIM_REQUIRE_ALL", required)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=errors, skipped=skipped)
    assert result.ret == (1 if required else 0)  # the run fails, though the other module's test passed
