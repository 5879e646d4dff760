"""Checkpoints that are verified before they are trusted, and the inputs a resume must find unchanged.

:func:`resume_simulation` loads a run's checkpoint into its simulation and :class:`Checkpointer`
(a callback of the run loop) writes it every ``checkpoint_every`` rounds.

A checkpoint file is a two-line header and a ``torch.save`` payload::

    FLAMINGO-SIM-CHECKPOINT 1
    sha256 <hex digest of the payload> <payload length in bytes>
    <payload>

The payload holds tensors and plain data only (numpy arrays and scalars are stored as byte
tensors with their dtype and shape) and is read with ``torch.load(weights_only=True)``, so a
file can never run code. :func:`save_checkpoint` writes the new file beside the old one,
re-reads and verifies it on disk, and only then moves the old one to ``NAME.prev`` and the new
one into place; :func:`load_checkpoint` verifies the length and the checksum first and falls
back to ``NAME.prev`` (saying so) when the newest is damaged.

:func:`record_inputs` / :func:`check_inputs` keep a SHA-256 of every input file a run depends
on (the trace set, the phone catalogue and profiles, the dataset's mapping files) in
``inputs.json``, so that ``--resume`` refuses to mix two experiments.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from flamingo_sim.errors import ConfigError, FlamingoError
from flamingo_sim.fl.runner.callbacks import Callback
from flamingo_sim.fl.sim.records import RoundRecord
from flamingo_sim.io import atomic_path, write_json

if TYPE_CHECKING:
    from flamingo_sim.fl.config import ExperimentConfig
    from flamingo_sim.fl.sim.simulation import Simulation

__all__ = ["CheckpointError", "Checkpointer", "check_inputs", "config_diff", "input_files", "load_checkpoint", "record_inputs",
           "resume_simulation", "save_checkpoint"]

MAGIC = b"FLAMINGO-SIM-CHECKPOINT 1\n"
INPUTS_FILE = "inputs.json"
_ARRAY = "__ndarray__"


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


def _read(path: Path) -> Any:
    """The verified content of ``path``; raises :class:`CheckpointError` naming the file."""
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
    try:
        state = torch.load(io.BytesIO(payload), weights_only=True, map_location="cpu")
    except (pickle.UnpicklingError, RuntimeError, ValueError, TypeError, EOFError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"{path}: holds more than tensors and plain data, refused ({first[:160]})") from None
    return _decode(state)


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> None:
    """Write ``state`` to ``path``; the previous checkpoint stays as ``NAME.prev`` until the new one is verified on disk."""
    path = Path(path)
    data = _serialise(state)
    prev = prev_path(path)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if tmp.read_bytes() != data:
            raise CheckpointError(f"{path}: the checkpoint read back differs from what was written")
        if path.exists():
            try:
                _read(path)
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
        if not (isinstance(state, dict) and {"simulation", "rows"} <= state.keys()):
            errors.append(CheckpointError(f"{candidate}: not a run checkpoint (no simulation state and rows)"))
            continue
        if errors:
            log(f"WARNING: {errors[0]}; resuming from the previous checkpoint {candidate}")
        return state
    if errors:
        raise CheckpointError(f"{errors[0]}; no good earlier checkpoint - start the run again with another out_dir")
    return None


# -- inputs a resume depends on ------------------------------------------------------------------
def input_files(cfg: ExperimentConfig, experiment: str | Path | None) -> dict[str, Path]:
    """Every input file the run reads, by a name for messages: trace set, catalogue, profiles, FedScale's capacity file, dataset mapping.

    The dataset's samples themselves are not hashed (too many); its mapping files name them.
    """
    from flamingo_sim.fl.config import resolve_path

    files: dict[str, Path] = {}
    traces = resolve_path(cfg.traces.path, experiment)
    for name in ("devices.parquet", "clients.parquet"):
        files[f"traces.path {name}"] = traces / name
    from flamingo_sim.fl.runner.compose import profile_dirs

    search = profile_dirs(cfg, experiment)
    if cfg.phones.mix == "from_traces":  # any phone of the catalogue may play a trace's phone; the table decides
        from flamingo_sim.resources import shipped

        table = cfg.phones.models
        files["phones.models"] = shipped("profiles/phone_models.yaml") if table is None else resolve_path(table, experiment)
        phones = [p for p in search.phones() if search.find(p, cfg.model) is not None]
    else:
        phones = [p for p, share in cfg.phones.mix.items() if share > 0]
    for d in search.dirs:  # the phone catalogue: every directory of the search path
        files[f"phones.profiles_dir {d / 'phones.yaml'}"] = d / "phones.yaml"
        for phone in phones:
            files[f"phones.profiles_dir {d / 'phones.d' / phone}.yaml"] = d / "phones.d" / f"{phone}.yaml"
    for phone in phones:  # the profile the run uses: the first one found on the search path
        files[f"phones.profiles_dir {phone}/{cfg.model}.yaml"] = search.path(phone, cfg.model)
    if cfg.network.fedscale_capacity_file is not None:
        files["network.fedscale_capacity_file"] = resolve_path(cfg.network.fedscale_capacity_file, experiment)
    if cfg.data.root is not None:
        root = resolve_path(cfg.data.root, experiment)
        for split in ("train", "test"):
            files[f"data.root client_data_mapping/{split}.csv"] = root / "client_data_mapping" / f"{split}.csv"
    return {k: v.resolve() for k, v in files.items() if v.is_file()}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def record_inputs(run_dir: Path, cfg: ExperimentConfig, experiment: str | Path | None) -> None:
    """Write ``inputs.json``: path and SHA-256 of every input file."""
    write_json(run_dir / INPUTS_FILE, {k: {"path": str(p), "sha256": _sha256(p)} for k, p in input_files(cfg, experiment).items()})


def check_inputs(run_dir: Path, cfg: ExperimentConfig, experiment: str | Path | None) -> None:
    """Refuse a resume (one line naming the input) when an input recorded at the start changed or is gone."""
    recorded_path = run_dir / INPUTS_FILE
    if not recorded_path.is_file():
        return  # a run from before inputs were recorded
    recorded = json.loads(recorded_path.read_text())
    now = input_files(cfg, experiment)
    for key, entry in recorded.items():
        path = now.get(key)
        if path is None:
            raise ConfigError(f"{run_dir}: cannot resume: input {key} ({entry['path']}) is gone since the run started")
        if _sha256(path) != entry["sha256"]:
            raise ConfigError(
                f"{run_dir}: cannot resume: input {key} ({path}) changed since the run started; "
                "restore it or start a new run with another out_dir"
            )


def config_diff(before: Any, after: Any, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two config mappings, as ``key (old -> new)``."""
    if isinstance(before, dict) and isinstance(after, dict):
        out: list[str] = []
        for key in list(before) + [k for k in after if k not in before]:
            dotted = f"{prefix}{key}"
            if key not in after:
                out.append(f"{dotted} (only in the run)")
            elif key not in before:
                out.append(f"{dotted} (not in the run)")
            else:
                out += config_diff(before[key], after[key], dotted + ".")
        return out
    return [] if before == after else [f"{prefix.rstrip('.')} ({before!r} -> {after!r})"]


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


class Checkpointer(Callback):
    """Writes the run's checkpoint every ``every`` rounds, at its last round and at its end."""

    def __init__(self, path: Path, every: int) -> None:
        self.path, self.every = path, every

    def on_run_begin(self, sim: "Simulation", records: Sequence[RoundRecord]) -> None:
        self.records = list(records)
        self.saved_round = sim.round

    def on_round_end(self, sim: "Simulation", record: RoundRecord) -> bool:
        self.records.append(record)
        if sim.round % self.every == 0 or sim.is_done():
            self._save(sim)
        return False

    def on_run_end(self, sim: "Simulation", records: Sequence[RoundRecord]) -> None:
        if self.saved_round != sim.round:  # stopped early by a callback
            self._save(sim)

    def _save(self, sim: "Simulation") -> None:
        save_checkpoint(self.path, {"simulation": sim.state_dict(), "rows": [r.to_row() for r in self.records]})
        self.saved_round = sim.round
