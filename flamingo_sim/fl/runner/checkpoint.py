"""Checkpoints that are verified before they are trusted: the file format, saving, loading and resuming.

:func:`resume_simulation` loads a unit's checkpoint into its simulation and :func:`save_checkpoint`
writes one (the unit's saver, :class:`flamingo_sim.fl.runner.units.UnitSaver`, every
``checkpoint_every`` rounds). What a resume must find unchanged besides (the config, the input
files) is :mod:`flamingo_sim.fl.runner.inputs`'s.

A checkpoint file is a two-line header and a ``torch.save`` payload::

    FLAMINGO-SIM-CHECKPOINT 1
    sha256 <hex digest of the payload> <payload length in bytes>
    <payload>

The payload holds tensors and plain data only (numpy arrays and scalars are stored as byte
tensors with their dtype and shape) and is read with ``torch.load(weights_only=True)``, so a
file can never run code. A run's checkpoint holds the simulation's state and the rounds so far, each row as
its JSON text (:data:`ROW_TEXTS`). :func:`save_checkpoint` writes the new file beside the old one (its
checksum taken from the bytes in memory, the very bytes written: nothing is read back), checks the
old one's length and checksum on disk, and only then moves the old one to ``NAME.prev`` (a damaged
one never becomes the fallback) and the new one into place; :func:`load_checkpoint` verifies the
length and the checksum first, then unpickles tensors and plain data only, and falls back to
``NAME.prev`` (saying so) when the newest is damaged. So every file is verified before it is
trusted, at the moment it is trusted: a resume reads nothing that has not passed the checksum.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from flamingo_sim.errors import FlamingoError
from flamingo_sim.fl.sim.records import RoundRecord
from flamingo_sim.io import atomic_path

if TYPE_CHECKING:
    from flamingo_sim.fl.sim.simulation import Simulation

__all__ = ["CheckpointError", "ROW_TEXTS", "checkpoint_bytes", "load_checkpoint", "resume_simulation", "save_checkpoint", "write_checkpoint"]

MAGIC = b"FLAMINGO-SIM-CHECKPOINT 1\n"
_ARRAY = "__ndarray__"
#: A run checkpoint's rounds so far, each row as its JSON text (:func:`flamingo_sim.io.json_item_text`, the text the unit's
#: result file holds): the saver encodes a row once, and pickling a list of strings costs a small part of pickling the
#: rows' dicts, which grew every save with the run. :func:`load_checkpoint` gives them back as ``"rows"`` (dicts, as the
#: result file reads back); a checkpoint that holds ``"rows"`` itself (dicts, as earlier versions wrote) loads as it is.
ROW_TEXTS = "row_texts"


class CheckpointError(FlamingoError):
    """A checkpoint that is truncated, altered or holds more than tensors and plain data."""


def prev_path(path: Path) -> Path:
    return path.with_name(path.name + ".prev")


# -- encoding: numpy values as tagged byte tensors -----------------------------------------------
def _encode(obj: Any) -> Any:
    if isinstance(obj, (np.ndarray, np.generic)):
        arr = np.array(obj, order="C")  # keeps 0-d (ascontiguousarray makes them 1-d)
        if arr.dtype.hasobject:
            raise TypeError("object arrays cannot be checkpointed")
        raw = torch.frombuffer(bytearray(arr.tobytes()), dtype=torch.uint8) if arr.nbytes else torch.zeros(0, dtype=torch.uint8)
        return {_ARRAY: raw, "dtype": arr.dtype.str, "shape": list(arr.shape), "scalar": isinstance(obj, np.generic)}
    if isinstance(obj, dict):
        return {k: _encode(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_encode(v) for v in obj)
    return obj


def _decode(obj: Any) -> Any:
    if isinstance(obj, dict):
        if _ARRAY in obj:
            arr = np.frombuffer(obj[_ARRAY].numpy().tobytes(), dtype=np.dtype(obj["dtype"])).reshape(obj["shape"]).copy()
            return arr[()] if obj["scalar"] else arr
        return {k: _decode(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_decode(v) for v in obj)
    return obj


# -- writing and reading -------------------------------------------------------------------------
def _serialise(state: Any) -> bytes:
    buf = io.BytesIO()
    torch.save(_encode(state), buf)
    payload = buf.getvalue()
    return MAGIC + f"sha256 {hashlib.sha256(payload).hexdigest()} {len(payload)}\n".encode() + payload


def _verified_payload(path: Path) -> bytes:
    """The payload of ``path`` once its header, length and checksum are checked (nothing unpickled); raises
    :class:`CheckpointError` naming the file."""
    data = path.read_bytes()
    if not data.startswith(MAGIC):
        raise CheckpointError(f"{path}: not a flamingo-sim checkpoint (no checksum header)")
    head, _, payload = data[len(MAGIC):].partition(b"\n")
    try:
        tag, digest, length = head.decode("ascii").split(" ")
        n = int(length)
    except ValueError:
        raise CheckpointError(f"{path}: damaged checkpoint header") from None
    if tag != "sha256" or len(payload) != n:
        raise CheckpointError(f"{path}: truncated or extended checkpoint ({len(payload)} payload bytes, header says {n})")
    if hashlib.sha256(payload).hexdigest() != digest:
        raise CheckpointError(f"{path}: checkpoint checksum mismatch (the file was altered or damaged)")
    return payload


def _read(path: Path) -> Any:
    """The verified content of ``path`` (:func:`_verified_payload`, then tensors and plain data only); raises
    :class:`CheckpointError` naming the file."""
    payload = _verified_payload(path)
    try:
        state = torch.load(io.BytesIO(payload), weights_only=True, map_location="cpu")
    except (pickle.UnpicklingError, RuntimeError, ValueError, TypeError, EOFError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"{path}: holds more than tensors and plain data, refused ({first[:160]})") from None
    return _decode(state)


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> None:
    """Write ``state`` to ``path`` atomically; the previous checkpoint becomes ``NAME.prev`` if its checksum holds.

    The new file's checksum is that of the bytes in memory, written whole and synced: it is not read back (a
    resume, or the next save, checks it against its header). The old file is checked by its length and checksum
    only: unpickling it (what a resume does) would cost more than the save itself once a run has many rounds,
    and a file whose checksum holds is the one that was written.
    """
    write_checkpoint(path, checkpoint_bytes(state))


def checkpoint_bytes(state: dict[str, Any]) -> bytes:
    """What :func:`save_checkpoint` writes for ``state``: its header (checksum, length) and payload. Made from
    ``state`` when called, so that :func:`write_checkpoint` can write it later, elsewhere, while ``state`` moves on."""
    return _serialise(state)


def write_checkpoint(path: str | Path, data: bytes) -> None:
    """The writing half of :func:`save_checkpoint`: ``data`` (from :func:`checkpoint_bytes`) to ``path``."""
    path = Path(path)
    prev = prev_path(path)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if path.exists():
            try:
                _verified_payload(path)
            except CheckpointError:
                pass  # a damaged newest file never becomes the fallback
            else:
                os.replace(path, prev)
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def load_checkpoint(path: str | Path, log: Callable[[str], None]) -> dict[str, Any] | None:
    """The newest good checkpoint of ``path`` (``path``, else ``NAME.prev``); None if there is none.

    A damaged newest file is reported through ``log`` and the previous one used; when no good
    one exists but a damaged one does, raises :class:`CheckpointError` naming it.
    """
    path = Path(path)
    errors: list[CheckpointError] = []
    for candidate in (path, prev_path(path)):
        if not candidate.exists():
            continue
        try:
            state = _read(candidate)
        except CheckpointError as exc:
            errors.append(exc)
            continue
        if not (isinstance(state, dict) and "simulation" in state and ("rows" in state or ROW_TEXTS in state)):
            errors.append(CheckpointError(f"{candidate}: not a run checkpoint (no simulation state and rows)"))
            continue
        if ROW_TEXTS in state:
            try:
                state = {**{k: v for k, v in state.items() if k != ROW_TEXTS}, "rows": _rows_of(state[ROW_TEXTS])}
            except (TypeError, ValueError) as exc:
                errors.append(CheckpointError(f"{candidate}: its rows are not JSON objects ({str(exc)[:160]})"))
                continue
        if errors:
            log(f"WARNING: {errors[0]}; resuming from the previous checkpoint {candidate}")
        return state
    if errors:
        raise CheckpointError(f"{errors[0]}; no good earlier checkpoint - start the run again with another out_dir")
    return None


def _rows_of(texts: Any) -> list[dict[str, Any]]:
    """The rows of a checkpoint's :data:`ROW_TEXTS` (each a JSON object)."""
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise TypeError(f"{ROW_TEXTS} must be a list of strings, got {type(texts).__name__}")
    rows = [json.loads(t) for t in texts]
    if not all(isinstance(r, dict) for r in rows):
        raise ValueError("a row is not a JSON object")
    return rows


def resume_simulation(sim: "Simulation", ckpt: Path, say: Callable[[str], None]) -> list[RoundRecord]:
    """Load the newest good checkpoint of ``ckpt`` into ``sim``; the rounds it had done (none for a fresh run)."""
    state = load_checkpoint(ckpt, say)
    if state is None:
        return []
    try:
        sim.load_state_dict(state["simulation"])
        return [RoundRecord.from_row(row) for row in state["rows"]]
    except (KeyError, ValueError, TypeError, RuntimeError) as exc:
        raise CheckpointError(f"{ckpt}: does not fit this run ({exc})") from None
