"""What a resume must find unchanged: the run's config and the files it reads.

:func:`record_inputs` keeps a SHA-256 of every input file a run depends on (the trace set, the
phone catalogue and profiles, FedScale's capacity file, the dataset's mapping files) in the run
directory's ``inputs.json`` when the run starts, and :func:`check_inputs` refuses a resume (one
line naming the input) when one changed or is gone, so that ``--resume`` never mixes two
experiments; :func:`config_diff` names the config keys a resume would change. The run directory's
guard (:func:`flamingo_sim.fl.runner.rundir.run_guard`) calls them; the checkpoints' own format is
:mod:`flamingo_sim.fl.runner.checkpoint`'s.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flamingo_sim.errors import ConfigError
from flamingo_sim.io import write_json

if TYPE_CHECKING:
    from flamingo_sim.fl.config import ExperimentConfig

__all__ = ["INPUTS_FILE", "input_files", "record_inputs", "check_inputs", "config_diff"]

INPUTS_FILE = "inputs.json"


def input_files(cfg: ExperimentConfig, experiment: str | Path | None) -> dict[str, Path]:
    """Every input file the run reads, by a name for messages: trace set, catalogue, profiles, FedScale's capacity file, dataset mapping.

    The dataset's samples themselves are not hashed (too many); its mapping files name them.
    """
    from flamingo_sim.fl.config import resolve_path

    files: dict[str, Path] = {}
    traces = resolve_path(cfg.traces.path, experiment)
    for name in ("devices.parquet", "clients.parquet"):
        files[f"traces.path {name}"] = traces / name
    from flamingo_sim.fl.compose.parts import profile_dirs

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
