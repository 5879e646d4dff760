"""Tests that need a real read-only or small filesystem make one: a tmpfs mounted inside an
unprivileged user namespace (``unshare -rm``), which works for root and other users alike."""

from __future__ import annotations

import shutil
import subprocess

import pytest


def userns_mounts() -> bool:
    """Whether this machine lets an unprivileged user namespace mount a tmpfs (unshare -rm)."""
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"], capture_output=True, check=False) \
        if shutil.which("unshare") else None
    return probe is not None and probe.returncode == 0


needs_mounts = pytest.mark.skipif(not userns_mounts(), reason="no user namespace with mounts (unshare -rm) to make a small or read-only tmpfs")
