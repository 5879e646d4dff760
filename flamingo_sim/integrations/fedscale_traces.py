"""FedScale's own trace files, written from (and read back into) our traces and device profiles.

FedScale reads two pickles in simulation mode; neither ships with its wheel. This module
writes them from a flamingo-sim trace set and phone population, so a FedScale user can run
their own FedScale job on our GreenHub traces, and reads them back as plain arrays. It needs
neither FedScale nor torch.

``device_conf_file``: ``{key: {"computation": ms_per_sample, "communication": kbps}}``.
    FedScale prices a task at ``3 x batch x local_steps x ms_per_sample / 1000`` seconds of
    compute plus ``(upload + download kbit) / kbps`` of transfer. We write
    ``ms_per_sample = step_latency_s x 1000 / (3 x profile batch size)`` so that FedScale's
    compute time equals our profile's for the chosen execution choice (default: PyTorch's
    default ``4567``, the baseline), and ``kbps = bandwidth_mbps x 1000``.
``device_avail_file``: ``{key: {"active": [s, ...], "inactive": [s, ...], "finish_time": s}}``.
    Windows (seconds from the trace's start) in which the client is online by its trace alone
    (battery at or above ``min_pct``, back online at ``reentry_pct``: the same hysteresis as
    :class:`~flamingo_sim.devices.battery.EnergyBudget`); FedScale replays them cyclically with
    period ``finish_time``. Each window is half-open here, ``[active, inactive)``; FedScale's
    check is inclusive at both ends, which differs only at the instant ``inactive``. A client
    that is never online gets the empty window ``[finish_time, finish_time]`` (FedScale crashes
    on an empty list).

Keys: FedScale numbers clients from 1 and looks client ``c`` up at key ``c mod N`` (both files;
the availability file by insertion order). Our client ``i`` is FedScale's ``i + 1``, so key
``k`` holds our client ``(k - 1) mod N``: key 0 holds the last one. :func:`client_of_key` and
:func:`key_of_client` convert.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from flamingo_sim.errors import InputDataError

__all__ = [
    "key_of_client",
    "client_of_key",
    "device_conf",
    "online_grid",
    "device_avail",
    "availability_grid",
    "write_pickle",
    "read_device_conf",
    "read_device_avail",
    "export_fedscale_traces",
]

#: FedScale's assumed ratio of a training step's cost to one inference pass.
FEDSCALE_AUGMENTATION = 3.0


def key_of_client(client: int | np.ndarray, n: int) -> int | np.ndarray:
    """The key of our (0-based) client ``client`` in a FedScale trace file of ``n`` entries."""
    return (np.asarray(client) + 1) % n if isinstance(client, np.ndarray) else (int(client) + 1) % n


def client_of_key(key: int | np.ndarray, n: int) -> int | np.ndarray:
    """Our (0-based) client stored at key ``key`` of a FedScale trace file of ``n`` entries."""
    return (np.asarray(key) - 1) % n if isinstance(key, np.ndarray) else (int(key) - 1) % n


# -- device_conf_file ------------------------------------------------------------------------
def device_conf(population: Any, profiles: Any, choice: str = "baseline") -> dict[int, dict[str, float]]:
    """``device_conf_file`` content for every client of ``population``.

    ``profiles`` is the :class:`~flamingo_sim.devices.profiles.ProfileSet` in the population's
    phone order; ``choice`` is ``"baseline"`` (PyTorch's default cores) or ``"best"``
    (Flamingo's fastest viable choice without interference).
    """
    if choice not in ("baseline", "best"):
        raise ValueError(f"choice must be 'baseline' or 'best', got {choice!r}")
    ms_per_sample = np.array(
        [getattr(p, choice).step_latency_s * 1000.0 / (FEDSCALE_AUGMENTATION * p.batch_size) for p in profiles.profiles]
    )[population.phone_idx]
    kbps = np.asarray(population.bandwidth_mbps, dtype=np.float64) * 1000.0
    n = int(population.n_clients)
    return {
        int(key_of_client(i, n)): {"computation": float(ms_per_sample[i]), "communication": float(kbps[i])}
        for i in range(n)
    }


def read_device_conf(path: str | Path) -> dict[str, np.ndarray]:
    """A ``device_conf_file`` as arrays over our clients: ``ms_per_sample``, ``kbps``."""
    data = _read_pickle(path, "device_conf_file")
    n = len(data)
    ms, kbps = np.empty(n), np.empty(n)
    try:
        for key, entry in data.items():
            i = client_of_key(int(key), n)
            ms[i], kbps[i] = float(entry["computation"]), float(entry["communication"])
    except (KeyError, TypeError, ValueError) as exc:
        raise InputDataError(f"{path}: not a FedScale device_conf_file ({{int: {{'computation', 'communication'}}}}): {exc}") from None
    if sorted(int(k) for k in data) != list(range(n)):
        raise InputDataError(f"{path}: keys must be 0..{n - 1}")
    return {"ms_per_sample": ms, "kbps": kbps}


# -- device_avail_file -----------------------------------------------------------------------
def online_grid(traces: Any, min_pct: float, reentry_pct: float) -> tuple[np.ndarray, np.ndarray]:
    """Whether each trace client is online by its trace alone, at every grid step of one cycle.

    Returns ``(online bool (n_clients, T), length int64 (n_clients,))``: client ``i``'s cycle is
    its device's ``length[i]`` steps of ``traces.step_s``; entries past it are False.
    """
    from flamingo_sim.devices.battery import EnergyBudget

    n = traces.n_clients
    dev = traces.client_device
    length = traces.device_length[dev].astype(np.int64)
    t_max = int(length.max())
    offset = traces.shift_s // traces.step_s

    def level(j: int) -> np.ndarray:
        return traces.level_pct[dev, (j + offset) % length].astype(np.float64)

    budget = EnergyBudget(np.ones(n), min_pct=min_pct, reentry_pct=reentry_pct)
    prev = level(0)
    budget.reset(prev)
    grid = np.zeros((n, t_max), dtype=bool)
    grid[:, 0] = budget.online
    for j in range(1, t_max):
        now = level(j)
        budget.advance(prev, now, np.zeros(n, dtype=np.int8), 0.0)
        grid[:, j] = budget.online
        prev = now
    grid &= np.arange(t_max)[None, :] < length[:, None]
    return grid, length


def _windows(row: np.ndarray, step_s: int) -> tuple[list[float], list[float]]:
    padded = np.concatenate([[False], row, [False]]).astype(np.int8)
    edges = np.diff(padded)
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return [float(s * step_s) for s in starts], [float(e * step_s) for e in ends]


def device_avail(traces: Any, min_pct: float = 10.0, reentry_pct: float = 20.0) -> dict[int, dict[str, Any]]:
    """``device_avail_file`` content for every client of ``traces`` (a ClientTraces)."""
    grid, length = online_grid(traces, min_pct, reentry_pct)
    n, step = grid.shape[0], int(traces.step_s)
    out: dict[int, dict[str, Any]] = {}
    for key in range(n):  # insertion order = key order: FedScale indexes by position
        i = int(client_of_key(key, n))
        finish = float(length[i] * step)
        active, inactive = _windows(grid[i, : length[i]], step)
        if not active:
            active, inactive = [finish], [finish]
        out[key] = {"active": active, "inactive": inactive, "finish_time": finish}
    return out


def read_device_avail(path: str | Path) -> dict[int, dict[str, Any]]:
    """A ``device_avail_file``, checked, as ``{our client: {"active", "inactive", "finish_time"}}``."""
    data = _read_pickle(path, "device_avail_file")
    n = len(data)
    out: dict[int, dict[str, Any]] = {}
    for pos, (key, entry) in enumerate(data.items()):
        try:
            active = [float(a) for a in entry["active"]]
            inactive = [float(b) for b in entry["inactive"]]
            finish = float(entry["finish_time"])
        except (KeyError, TypeError, ValueError) as exc:
            raise InputDataError(f"{path}: entry {key!r} is not {{'active', 'inactive', 'finish_time'}}: {exc}") from None
        if len(active) != len(inactive) or not active:
            raise InputDataError(f"{path}: entry {key!r}: need as many 'active' as 'inactive' times, at least one")
        out[int(client_of_key(pos, n))] = {"active": active, "inactive": inactive, "finish_time": finish}
    return out


def availability_grid(avail: Mapping[int, Mapping[str, Any]], step_s: int) -> np.ndarray:
    """Online (bool ``(n, T)``) of each client at ``t = j x step_s`` within its cycle.

    ``avail`` as :func:`read_device_avail` returns it; ``T`` is the longest cycle in steps;
    a client is online at ``t`` when some window has ``active <= t < inactive``.
    """
    n = len(avail)
    t_max = max(int(round(e["finish_time"] / step_s)) for e in avail.values())
    grid = np.zeros((n, t_max), dtype=bool)
    t = np.arange(t_max) * float(step_s)
    for i, entry in avail.items():
        for a, b in zip(entry["active"], entry["inactive"]):
            grid[i] |= (t >= a) & (t < b)
    return grid


# -- files -----------------------------------------------------------------------------------
def write_pickle(path: str | Path, content: Mapping[Any, Any]) -> Path:
    """Write a trace dict as FedScale reads it (a plain pickle), atomically."""
    from flamingo_sim.io import atomic_path

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            pickle.dump(dict(content), fh, protocol=4)
    return path


def _read_pickle(path: str | Path, what: str) -> dict[Any, Any]:
    path = Path(path)
    if not path.is_file():
        raise InputDataError(f"{path}: {what} not found")
    from flamingo_sim.fl.sim.capacity import load_plain_pickle

    try:
        data = load_plain_pickle(path.read_bytes())  # never executed: a pickle naming any class or function is refused
    except Exception as exc:  # a truncated or foreign file: say which
        raise InputDataError(f"{path}: cannot read {what} as a pickle: {exc}") from None
    if not isinstance(data, dict) or not data:
        raise InputDataError(f"{path}: {what} must be a non-empty dict, got {type(data).__name__}")
    return data


def export_fedscale_traces(
    experiment: str | Path,
    out_dir: str | Path,
    *,
    seed: int | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    choice: str = "baseline",
) -> tuple[Path, Path]:
    """Write ``device_conf.pkl`` and ``device_avail.pkl`` for an experiment's population.

    The population (phones, bandwidths) is the one the experiment draws for ``seed`` (default:
    its first); availability covers the experiment's trace clients with its thresholds. Point
    FedScale's ``--device_conf_file`` and ``--device_avail_file`` at the two files.
    """
    from flamingo_sim.fl.compose import experiment_population, phone_assignment, profile_dirs
    from flamingo_sim.fl.config import load_experiment, require_path
    from flamingo_sim.resources import find_experiment
    from flamingo_sim.traces.store import load_client_traces

    experiment = find_experiment(experiment)
    cfg = load_experiment(experiment, overrides)
    seed = cfg.seeds[0] if seed is None else int(seed)
    traces_dir = require_path(cfg.traces.path, experiment, "traces.path", "trace set")
    traces = load_client_traces(traces_dir)
    search = profile_dirs(cfg, experiment)
    n_clients = cfg.data.proxy.n_clients if cfg.data.root is None else traces.n_clients
    phones, mix, trace_phones = phone_assignment(cfg, experiment, search.phones(), traces, traces_dir, n_clients)
    profiles = search.load_set(phones, cfg.model)
    population = experiment_population(cfg, n_clients, traces.n_clients, mix, trace_phones, seed)
    out = Path(out_dir)
    conf = write_pickle(out / "device_conf.pkl", device_conf(population, profiles, choice))
    avail = write_pickle(out / "device_avail.pkl", device_avail(traces, cfg.traces.min_pct, cfg.traces.reentry_level_pct))
    return conf, avail
