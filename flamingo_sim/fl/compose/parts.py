"""A seed's parts: an experiment config -> traces, phones, data, model, population and network.

:func:`build_components` loads them (traces, profiles, the dataset of
:mod:`flamingo_sim.fl.compose.datasets`, the model, the population, the network) once per
(experiment, seed); :func:`flamingo_sim.fl.compose.assemble.compose` puts a policy, a selector and
an aggregator on them. Every lookup that can fail on user input (a missing trace set, an unknown
phone or DNN model, a dataset that is not there) raises a :class:`~flamingo_sim.errors.ConfigError`
naming the experiment file and the key.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from flamingo_sim.devices.catalogue import ProfileDirs
from flamingo_sim.errors import ConfigError, FlamingoError, InputDataError
from flamingo_sim.fl.compose.checks import check_fit
from flamingo_sim.fl.compose.datasets import ARCHITECTURES, make_dataset
from flamingo_sim.fl.config import ExperimentConfig, require_path
from flamingo_sim.fl.sim.network import Network
from flamingo_sim.fl.sim.population import Population, build_population
from flamingo_sim.fl.sim.simulation import Components
from flamingo_sim.models import build_model, check_forward
from flamingo_sim.resources import shipped, user_profiles_dir

__all__ = ["build_components", "profile_dirs", "update_size_mb", "experiment_population", "experiment_network", "phone_assignment"]


def profile_dirs(cfg: ExperimentConfig, experiment_path: str | Path | None) -> ProfileDirs:
    """The experiment's profile search path: ``phones.profiles_dir`` (default: the user's
    profiles directory, if it exists), then the shipped profiles."""
    given = cfg.phones.profiles_dir
    if given is None:
        dirs = [user_profiles_dir()]
    else:
        key = "phones.profiles_dir"
        dirs = [require_path(p, experiment_path, key, "profiles directory") for p in (given if isinstance(given, list) else [given])]
        for p, path in zip(given if isinstance(given, list) else [given], dirs):
            if not path.is_dir():
                raise ConfigError(f"{experiment_path}: {key}: {str(p)!r} is a file, not a directory of profiles")
    return ProfileDirs.of([*dirs, shipped("profiles")])


def build_components(cfg: ExperimentConfig, experiment_path: str | Path | None, seed: int, log: Callable[[str], None]) -> Components:
    """Load traces, profiles and data; assign traces, phones and bandwidths to clients.

    The lines for ``log`` (the proxy task's warning, the data, the model update, the network) are held until every
    part is built: a setting refused part way (an unknown phone, a batch no client holds) is the only line its
    command prints, never after a warning about a run that will not happen."""
    from flamingo_sim.rng import derive_seed
    from flamingo_sim.traces.store import load_client_traces

    held = _HeldLog(log)
    log = held
    src = str(experiment_path)
    traces_dir = require_path(cfg.traces.path, experiment_path, "traces.path", "trace set")
    try:
        traces = load_client_traces(traces_dir)
    except InputDataError as exc:
        raise ConfigError(f"{src}: traces.path: {exc}") from None

    search = profile_dirs(cfg, experiment_path)
    dataset, model_name = make_dataset(cfg, experiment_path, log)
    phones, mix, trace_phones = phone_assignment(cfg, experiment_path, search.phones(), traces, traces_dir, dataset.n_clients)
    if trace_phones is not None:
        log("phones from traces: " + ", ".join(f"{rule} -> {e['phone']}: {e['devices']} devices, {e['clients']} clients"
                                               for rule, e in trace_phones[2]["rules"].items() if e["devices"]))
    pset = cfg.phones.profile_set
    missing = [p for p in phones if search.find(p, cfg.model, pset) is None]
    if missing:
        raise ConfigError(f"{src}: model: no profile of DNN model {cfg.model!r} for phone {missing[0]!r} in profile set "
                          f"{pset!r} (profiled models: {', '.join(search.models())})")
    profiles = search.load_set(phones, cfg.model, pset)

    log(f"data: {dataset.description}")
    beside = [Path(experiment_path).resolve().parent] if experiment_path is not None else []
    try:
        model = build_model(model_name, tuple(dataset.input_shape), dataset.n_classes, seed=derive_seed(seed, "model-init"), search=beside)
    except FlamingoError as exc:
        raise ConfigError(f"{src}: {exc}") from None
    if ":" in model_name:  # your own network: tried on two samples before the run directory exists
        try:
            check_forward(model, model_name, dataset.client_data(0)[0][:2], dataset.n_classes)
        except FlamingoError as exc:
            raise ConfigError(f"{src}: data.model: {exc}") from None
    size_mb, size_source = update_size_mb(cfg, dataset.n_classes, model_name, model)
    check_fit(cfg, dataset.samples_per_client, traces.horizon_s, size_mb, src)
    cfg = replace(cfg, network=replace(cfg.network, model_size_mb=size_mb))
    log(f"model update: {size_mb:.2f} MB each way ({size_source})")
    population = experiment_population(cfg, dataset.n_clients, traces.n_clients, mix, trace_phones, seed)
    parts = Components(
        cfg=cfg,
        traces=traces,
        population=population,
        profiles=profiles,
        dataset=dataset,
        model=model,
        test_data=dataset.test_data(),
        choice_labels=tuple(profiles.labels),
        model_size_source=size_source,
        network=experiment_network(cfg, experiment_path, traces, traces_dir, population, seed, log),
    )
    held.release()
    return parts


class _HeldLog:
    """A ``log`` that holds its lines until :meth:`release` (then says them in order) and passes later ones straight
    on (a decoding cache logs while the run trains)."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self._log = log
        self._held: list[str] | None = []

    def __call__(self, message: str) -> None:
        if self._held is None:
            self._log(message)
        else:
            self._held.append(message)

    def release(self) -> None:
        held, self._held = self._held or [], None
        for message in held:
            self._log(message)


def experiment_network(cfg: ExperimentConfig, experiment_path: str | Path | None, traces: Any, traces_dir: Path, population: Population,
                       seed: int, log: Callable[[str], None]) -> Network:
    """The seed's network (:mod:`flamingo_sim.fl.sim.network`), with FedScale's device-capacity file read (never
    executed) when ``network.fedscale_capacity_file`` names one; says in one line what it runs on."""
    from flamingo_sim.fl.sim.capacity import client_kbps, read_capacity_file

    net, src = cfg.network, str(experiment_path)
    capacity = None
    if net.fedscale_capacity_file is not None:
        path = require_path(net.fedscale_capacity_file, experiment_path, "network.fedscale_capacity_file", "FedScale device-capacity file")
        try:
            table = read_capacity_file(path)
        except InputDataError as exc:
            raise ConfigError(f"{src}: network.fedscale_capacity_file: {exc}") from None
        capacity = client_kbps(table, population.n_clients)
        log(f"network: bandwidths from FedScale's device-capacity file {path} ({len(table):,} clients, median "
            f"{float(np.median(capacity)) / 1000:.2f} Mbit/s)")
    assert net.model_size_mb is not None
    network = Network(net, traces, population, seed, net.model_size_mb, capacity)
    if net.model == "traces" and not network.has_states:
        log(f"network: trace set {traces_dir} has no network columns: every client's network is its draw of "
            f"network.unknown_wifi_share ({net.unknown_wifi_share:g} WiFi)")
    return network


def update_size_mb(cfg: ExperimentConfig, n_classes: int, trained: str, model: torch.nn.Module) -> tuple[float, str]:
    """The size of one model transfer in MB, and where it comes from.

    ``network.model_size_mb`` if set; else the parameters of the DNN ``cfg.model`` names (the
    network the device profiles price) for ``n_classes`` outputs, 4 bytes (float32) each. When
    ``cfg.model`` is no trainable architecture (a user-profiled model), the model trained.
    """
    if cfg.network.model_size_mb is not None:
        return cfg.network.model_size_mb, "network.model_size_mb"
    arch = ARCHITECTURES.get(cfg.model)
    if arch is not None and arch != trained:
        model = build_model(arch, (3, 32, 32), n_classes)  # the input size does not change the parameter count
        trained = arch
    n = sum(p.numel() for p in model.parameters())
    return n * 4 / 1e6, f"derived: {trained} with {n_classes} classes, {n:,} parameters x 4 bytes"


def experiment_population(cfg: ExperimentConfig, n_clients: int, n_trace_clients: int, mix: dict[str, float] | None,
                          trace_phones: Any, seed: int) -> Population:
    """The population an experiment draws for ``seed``: ``mix`` and ``trace_phones`` from
    :func:`phone_assignment`, bandwidths from its ``network`` section."""
    return build_population(n_clients=n_clients, n_trace_clients=n_trace_clients, phone_mix=mix, bandwidth_mbps=cfg.network.bandwidth_mbps,
                            bandwidth_sigma=cfg.network.bandwidth_sigma, seed=seed, trace_phones=trace_phones)


def phone_assignment(
    cfg: ExperimentConfig, experiment_path: str | Path | None, catalogue: Any, traces: Any, traces_dir: Path, n_fl_clients: int,
) -> tuple[list[str], dict[str, float] | None, tuple[Any, tuple[str, ...], dict[str, Any]] | None]:
    """The phones a run uses, and either the mix's shares or (``from_traces``) each trace client's phone.

    ``catalogue`` maps phone names to phones. Returns ``(phones, mix, trace_phones)`` for
    :func:`~flamingo_sim.fl.sim.population.build_population`.
    """
    from flamingo_sim.devices.phone_models import load_phone_models, map_trace_phones
    from flamingo_sim.traces.store import load_device_models

    src = str(experiment_path)
    if cfg.phones.mix == "from_traces":
        given = cfg.phones.models
        table_path = shipped("profiles/phone_models.yaml") if given is None else require_path(given, experiment_path, "phones.models", "phone model table")
        table = load_phone_models(table_path, catalogue)
        models = load_device_models(traces_dir)
        if not models:
            raise ConfigError(f"{src}: phones.mix: from_traces needs device models, and trace set {traces_dir} has none "
                              "(its dump had no devices table); give a mix of phones instead")
        per_trace, names, report = map_trace_phones(table, traces.device_ids, models, traces.client_device, n_fl_clients)
        report = {"table": "profiles/phone_models.yaml (shipped)" if given is None else str(given), **report}
        return list(names), None, (per_trace, names, report)
    unknown = [p for p in cfg.phones.mix if p not in catalogue]
    if unknown:
        raise ConfigError(f"{src}: phones.mix: unknown phone {unknown[0]!r} (known: {', '.join(sorted(catalogue))})")
    mix = {p: share for p, share in cfg.phones.mix.items() if share > 0}
    return list(mix), mix, None
