"""The process group of a run launched by ``torchrun``: who we are, and the collectives we use.

``torchrun`` (or ``flamingo-sim run --nproc N``, which starts the same launcher) sets ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` in every
process it starts; :func:`world_from_env` reads them, :func:`start` joins the group: gloo on the
CPU, NCCL on GPUs (each process on ``cuda:LOCAL_RANK``). Every collective goes through
:class:`Comm`, which

- counts the seconds spent in collectives (apart from the time spent waiting for the slowest
  rank to finish its share, which a barrier before each gather measures) and the bytes
  that crossed between processes (payloads, as rank 0 sees them: what it broadcasts to the
  others and what it gathers from them);
- turns a failure into one line naming this rank, the collective and why: another rank died
  (its connection closed) or the collective timed out (``timeout_s``, the group's timeout, which
  :func:`start` sets: a hung collective never waits forever).

Payloads are tensors only (headers are int64 tensors, states are flat buffers per dtype): nothing
is pickled between processes except the one-line agreement of :meth:`Comm.agree`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Callable

import torch
import torch.distributed as dist

from flamingo_sim.errors import ConfigError, FlamingoError

__all__ = ["World", "Comm", "CollectiveError", "world_from_env", "start", "describe_world", "DEFAULT_TIMEOUT_S", "LAUNCHER_ENV",
           "PEER_EXIT"]

#: Seconds a collective may wait for the slowest rank before it fails (--collective-timeout-s).
DEFAULT_TIMEOUT_S = 300.0
#: Set by ``flamingo-sim run --nproc`` in its workers' environment: the launcher reports failures.
LAUNCHER_ENV = "FLAMINGO_SIM_LAUNCHED"
#: Exit code of a rank that stopped because another one failed (the launcher names the other one).
PEER_EXIT = 3

_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


class CollectiveError(FlamingoError):
    """A collective failed: another rank went away, or it timed out. ``peer``: another rank's
    failure caused it (this rank itself is fine)."""

    def __init__(self, message: str, peer: bool) -> None:
        super().__init__(message)
        self.peer = peer


@dataclass(frozen=True)
class World:
    """This process's place in the group (from torchrun's environment)."""

    rank: int
    size: int
    local_rank: int
    local_size: int

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def world_from_env(env: dict[str, str] | None = None) -> World | None:
    """The :class:`World` torchrun describes in ``env`` (default ``os.environ``); None outside torchrun."""
    env = dict(os.environ) if env is None else env
    if not all(k in env for k in _ENV):
        return None
    values = {}
    for key, default in (("RANK", None), ("WORLD_SIZE", None), ("LOCAL_RANK", "0"), ("LOCAL_WORLD_SIZE", "1")):
        text = env.get(key, default) or ""
        if not text.isdigit():
            raise ConfigError(f"environment: {key}={text!r} is not a count (torchrun sets it; are RANK and WORLD_SIZE exported by hand?)")
        values[key] = int(text)
    world = World(values["RANK"], values["WORLD_SIZE"], values["LOCAL_RANK"], values["LOCAL_WORLD_SIZE"])
    if world.size < 1 or world.rank >= world.size or world.local_rank >= max(world.local_size, 1):
        raise ConfigError(f"environment: RANK {world.rank} / WORLD_SIZE {world.size} (LOCAL_RANK {world.local_rank} / "
                          f"LOCAL_WORLD_SIZE {world.local_size}) do not describe a process group")
    return world


def start(world: World, timeout_s: float) -> "Comm":
    """Join the process group with collectives timing out after ``timeout_s``: gloo for CPU
    tensors, and NCCL for CUDA ones where torch has CUDA (the process's GPU, ``torch.cuda.set_device``)."""
    from flamingo_sim.fl.config import COLLECTIVE_TIMEOUT_MAX_S

    if not 0 < timeout_s <= COLLECTIVE_TIMEOUT_MAX_S:
        raise ConfigError(f"--collective-timeout-s: expected seconds in (0, {COLLECTIVE_TIMEOUT_MAX_S:g}], got {timeout_s}")
    backend = "cpu:gloo,cuda:nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"
    try:
        dist.init_process_group(backend, rank=world.rank, world_size=world.size, timeout=timedelta(seconds=timeout_s))
    except (RuntimeError, ValueError) as exc:
        raise CollectiveError(f"rank {world.rank}: could not join the process group ({backend}): {_first_line(exc)}", peer=False) from None
    return Comm(world, torch.device("cpu"), backend, timeout_s)


def _first_line(exc: BaseException, limit: int = 200) -> str:
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class Comm:
    """Collectives over the default process group, counted and with one-line failures."""

    world: World
    device: torch.device  # where collective buffers live (the GPU when training on one: NCCL)
    backend: str
    timeout_s: float
    seconds: float = 0.0  # in collectives moving data, on this rank
    wait_s: float = 0.0  # in barriers before a gather: waiting for the slowest rank's share
    bytes_moved: int = 0  # payload bytes between processes (counted on rank 0)
    calls: int = 0
    train_jobs: int = 0  # rounds (FedBuff: start versions) whose training went through the group
    eval_jobs: int = 0
    context: str = "set-up"  # what the group is doing, for messages ("round 12 of baseline seed 0")

    # -- failures --------------------------------------------------------------------------------
    def _call(self, what: str, fn: Callable[[], object], moved: int = 0) -> None:
        began = time.perf_counter()
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 -- every backend raises its own kind
            raise self._failure(what, exc) from None
        self.seconds += time.perf_counter() - began
        self.calls += 1
        if self.world.is_main:
            self.bytes_moved += moved

    def _failure(self, what: str, exc: BaseException) -> CollectiveError:
        text = _first_line(exc)
        where = f"rank {self.world.rank}: {what} ({self.context})"
        if "timed out" in text.lower() or "timeout" in text.lower():
            return CollectiveError(f"{where} timed out after {self.timeout_s:g} s waiting for the other ranks "
                                   f"(--collective-timeout-s; a rank is stuck or gone): {text}", peer=False)
        return CollectiveError(f"{where} failed: another rank stopped ({text})", peer=True)

    # -- collectives -----------------------------------------------------------------------------
    def wait(self, what: str) -> None:
        """A barrier, timed apart (:attr:`wait_s`): what a gather after it then takes is the transfer alone."""
        before = self.seconds
        self._call(what, lambda: dist.barrier())
        self.wait_s += self.seconds - before
        self.seconds = before

    def broadcast(self, tensor: torch.Tensor, what: str) -> torch.Tensor:
        """``tensor`` from rank 0 into every rank's ``tensor`` (in place; same shape and dtype everywhere)."""
        moved = tensor.numel() * tensor.element_size() * (self.world.size - 1)
        self._call(what, lambda: dist.broadcast(tensor, src=0), moved)
        return tensor

    def gather(self, tensor: torch.Tensor, what: str) -> list[torch.Tensor] | None:
        """Every rank's ``tensor`` (same shape everywhere) on rank 0, in rank order; None elsewhere."""
        out = [torch.empty_like(tensor) for _ in range(self.world.size)] if self.world.is_main else None
        moved = tensor.numel() * tensor.element_size() * (self.world.size - 1)
        self._call(what, lambda: dist.gather(tensor, out, dst=0), moved)
        return out

    def send(self, tensors: list[torch.Tensor], what: str) -> None:
        """``tensors`` to rank 0 (which :meth:`receive` s them in this order)."""
        def go() -> None:
            for work in [dist.isend(t.contiguous(), dst=0) for t in tensors]:
                if work is not None:
                    work.wait()

        self._call(what, go)

    def receive(self, shapes: dict[int, list[tuple[int, int, torch.dtype]]], what: str) -> dict[int, list[torch.Tensor]]:
        """Rank 0: from each rank ``r`` of ``shapes`` its tensors of the given ``(rows, cols, dtype)``."""
        out = {r: [torch.empty(n, w, dtype=dt, device=self.device) for n, w, dt in spec] for r, spec in shapes.items()}

        def go() -> None:
            for work in [dist.irecv(t, src=r) for r, ts in out.items() for t in ts]:
                if work is not None:
                    work.wait()

        moved = sum(t.numel() * t.element_size() for ts in out.values() for t in ts)
        self._call(what, go, moved)
        return out

    def agree(self, step: Callable[[], None]) -> None:
        """Run ``step`` on every rank, then make every rank fail alike if any rank's failed.

        The first failing rank's :class:`~flamingo_sim.errors.FlamingoError` is raised on rank 0
        (prefixed by its rank unless every rank failed the same way); the others leave quietly
        with :data:`PEER_EXIT`, so that a bad config gives one line, not one per rank.
        """
        error: str | None = None
        try:
            step()
        except FlamingoError as exc:
            error = str(exc)
        errors: list[str | None] = [None] * self.world.size
        self._call("agreement", lambda: dist.all_gather_object(errors, error))
        failed = [(r, e) for r, e in enumerate(errors) if e is not None]
        if not failed:
            return
        if not self.world.is_main:
            raise SystemExit(PEER_EXIT)
        rank, message = failed[0]
        same = len(failed) == self.world.size and all(e == message for _, e in failed)
        raise FlamingoError(message if same else f"rank {rank}: {message}")

    def stats(self, rounds: int) -> dict[str, float]:
        """Per round: seconds in collectives and MB moved, for the log line and the benchmark."""
        n = max(rounds, 1)
        return {"ranks": self.world.size, "rounds": rounds, "collective_s_per_round": self.seconds / n, "wait_s_per_round": self.wait_s / n,
                "mb_per_round": self.bytes_moved / n / 1e6, "calls": self.calls}


def describe_world(comm: Comm, training: str) -> str:
    """The line that says where the run trains, for a group."""
    via = "nccl" if comm.device.type == "cuda" else "gloo"
    return f"{comm.world.size} processes ({via}, collectives time out after {comm.timeout_s:g} s); rank 0 {training}"
