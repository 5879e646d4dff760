"""The grid FlamingoStrategy runs Flower's round loop on: one that can be stopped, and the view of it the inner strategy gets.

- :class:`StoppableGrid`: Flower's grid with a ``send_and_receive`` that gives up (raising
  :class:`RunEnds`) once its ``stop`` event is set: an interrupted simulation stops delivering
  replies, and Flower's own loop would wait for them until its timeout, keeping the process alive;
- :class:`KeptNodes`: the same grid with only the round's kept nodes connected, which the inner
  strategy samples from when it configures a round.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

from flwr.app import Message, RecordDict
from flwr.serverapp import Grid

__all__ = ["RunEnds", "StoppableGrid", "KeptNodes"]


class RunEnds(Exception):
    """Raised from the evaluation hook to leave Flower's round loop (the run is done or a callback stopped it)."""


class StoppableGrid(Grid):
    """The grid Flower hands the ServerApp, with a ``send_and_receive`` that gives up when :attr:`stop`
    is set: an interrupted simulation (Ctrl-C) stops delivering replies, and Flower's own loop
    would wait for them until its timeout, keeping the process alive."""

    def __init__(self, grid: Grid, stop: threading.Event, poll_s: float = 0.05) -> None:
        self.grid, self.stop, self.poll_s = grid, stop, poll_s

    def set_run(self, run: Any) -> None:
        self.grid.set_run(run)

    @property
    def run(self) -> Any:
        return self.grid.run

    def create_message(self, content: RecordDict, message_type: str, dst_node_id: int, group_id: str, ttl: float | None = None) -> Message:
        return self.grid.create_message(content, message_type, dst_node_id, group_id, ttl)

    def get_node_ids(self) -> Iterable[int]:
        return self.grid.get_node_ids()

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        return self.grid.push_messages(messages)

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return self.grid.pull_messages(message_ids)

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        waiting = set(self.push_messages(messages))
        deadline = None if timeout is None else time.monotonic() + timeout
        replies: list[Message] = []
        while waiting and (deadline is None or time.monotonic() < deadline):
            if self.stop.is_set():
                raise RunEnds
            got = list(self.pull_messages(waiting))
            replies += got
            waiting -= {m.metadata.reply_to_message_id for m in got}
            if waiting:
                time.sleep(self.poll_s)
        return replies


class KeptNodes(StoppableGrid):
    """The grid as the inner strategy sees it in ``configure_train``: only the kept clients' nodes are connected."""

    def __init__(self, grid: StoppableGrid, nodes: list[int]) -> None:
        super().__init__(grid.grid, grid.stop, grid.poll_s)
        self.nodes = nodes

    def get_node_ids(self) -> Iterable[int]:
        return list(self.nodes)
