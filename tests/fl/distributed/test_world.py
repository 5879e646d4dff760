"""torchrun's environment read back, collective failures as one line, and the launcher's report."""

from __future__ import annotations

import signal

import pytest
import torch

from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.distributed.launch import describe_failure
from flamingo_sim.fl.distributed.world import PEER_EXIT, Comm, World, world_from_env

TORCHRUN = {"RANK": "2", "WORLD_SIZE": "3", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}


def test_world_from_torchrun_environment():
    assert world_from_env({}) is None  # not under torchrun: one process, no group
    assert world_from_env({"RANK": "0", "WORLD_SIZE": "1"}) is None  # no rendezvous address
    world = world_from_env(TORCHRUN)
    assert world == World(rank=2, size=3, local_rank=0, local_size=1) and not world.is_main
    with pytest.raises(ConfigError, match=r"RANK='x' is not a count"):
        world_from_env({**TORCHRUN, "RANK": "x"})
    with pytest.raises(ConfigError, match="RANK 3 / WORLD_SIZE 3 .* do not describe a process group"):
        world_from_env({**TORCHRUN, "RANK": "3"})


def test_collective_failures_name_the_rank_the_collective_and_why():
    comm = Comm(World(1, 2, 1, 2), torch.device("cpu"), "gloo", 42.0, context="baseline seed 0")

    def gone():
        raise RuntimeError("[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:4242\nmore")

    def stuck():
        raise RuntimeError("[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 42000ms for recv operation")

    with pytest.raises(Exception) as lost:
        comm._call("gather of trained clients", gone)
    assert lost.value.peer and str(lost.value).startswith("rank 1: gather of trained clients (baseline seed 0) failed: another rank stopped (")
    assert "\n" not in str(lost.value)
    with pytest.raises(Exception) as late:
        comm._call("job header", stuck)
    assert not late.value.peer
    assert "rank 1: job header (baseline seed 0) timed out after 42 s waiting for the other ranks (--collective-timeout-s" in str(late.value)
    assert comm.calls == 0 and comm.seconds == 0.0


def test_launcher_names_the_rank_that_failed_not_those_it_stopped():
    killed = {0: (PEER_EXIT, 100), 1: (-signal.SIGKILL, 101), 2: (-signal.SIGTERM, 102)}
    assert describe_failure(killed) == "rank 1 (pid 101) was killed by SIGKILL; every other rank was stopped"
    assert describe_failure({0: (2, 7), 1: (-signal.SIGTERM, 8)}) == "rank 0 (pid 7) stopped with the error above; every other rank was stopped"
    assert describe_failure({1: (1, 9)}) == "rank 1 (pid 9) exited with code 1; every other rank was stopped"
    assert describe_failure({0: (PEER_EXIT, 5), 1: (PEER_EXIT, 6)}).startswith("rank 0 (pid 5) lost contact with another rank")
