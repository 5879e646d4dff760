"""Building a simulation's parts from an experiment config: traces, phones, data, model.

Every lookup that can fail on user input (a missing trace set, an unknown phone or DNN model,
a dataset that is not there) raises a :class:`~flamingo_sim.errors.ConfigError` naming the
experiment file and the key.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import torch

from flamingo_sim.devices.catalogue import ProfileDirs
from flamingo_sim.devices.policies import Policy
from flamingo_sim.devices.policies import make_policy as _make_policy
from flamingo_sim.errors import ConfigError, FlamingoError, InputDataError
from flamingo_sim.fl.config import PROXY_MIN_SAMPLES, ExperimentConfig, require_path, resolve_path
from flamingo_sim.fl.data.base import FederatedDataset
from flamingo_sim.fl.sim.engine import Components
from flamingo_sim.fl.sim.population import Population, build_population
from flamingo_sim.models import build_model, check_forward
from flamingo_sim.resources import shipped, user_profiles_dir

if TYPE_CHECKING:
    from flamingo_sim.fl.data.pipeline import PackInfo

#: Profile model name -> torchvision architecture trained on real data.
ARCHITECTURES = {"mobilenet_v2": "mobilenet_v2", "shufflenet_v2_x2": "shufflenet_v2_x2_0", "resnet34": "resnet34"}


def make_policy(name: str, cfg: ExperimentConfig) -> Policy:
    """A fresh policy instance for one run, configured by the experiment's ``policy`` section."""
    return _make_policy(name, cfg.policy)


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
    """Load traces, profiles and data; assign traces, phones and bandwidths to clients."""
    from flamingo_sim.rng import derive_seed
    from flamingo_sim.traces.store import load_client_traces

    src = str(experiment_path)
    traces_dir = require_path(cfg.traces.path, experiment_path, "traces.path", "trace set")
    try:
        traces = load_client_traces(traces_dir)
    except InputDataError as exc:
        raise ConfigError(f"{src}: traces.path: {exc}") from None

    search = profile_dirs(cfg, experiment_path)
    dataset, model_name = _dataset(cfg, experiment_path, log)
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
    cfg = replace(cfg, network=replace(cfg.network, model_size_mb=size_mb))
    log(f"model update: {size_mb:.2f} MB each way ({size_source})")
    return Components(
        cfg=cfg,
        traces=traces,
        population=experiment_population(cfg, dataset.n_clients, traces.n_clients, mix, trace_phones, seed),
        profiles=profiles,
        dataset=dataset,
        model=model,
        test_data=dataset.test_data(),
        choice_labels=tuple(profiles.labels),
        model_size_source=size_source,
    )


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


def _dataset(cfg: ExperimentConfig, experiment_path: str | Path | None, log: Callable[[str], None]) -> tuple[FederatedDataset, str]:
    """The real dataset at ``data.root``, or the proxy when ``data.root`` is null; returns (dataset, model name)."""
    from flamingo_sim.fl.data.byo import read_arrays, read_leaf
    from flamingo_sim.fl.data.proxy import SyntheticFederated

    own = {"arrays": read_arrays, "leaf": read_leaf}
    data = cfg.data
    src = str(experiment_path)
    if data.root is not None:
        root = _data_root(data.root, experiment_path)
        if data.name in own:
            try:
                return own[data.name](root), data.model
            except InputDataError as exc:
                raise ConfigError(f"{src}: data.root: {exc}") from None
        from flamingo_sim.fl.data.pipeline import DecodedCache, is_packed
        from flamingo_sim.fl.training.device import usable_cores

        arch = _architecture(cfg, src)
        if is_packed(root):
            return _open_pack(cfg, root, src), arch
        workers = data.decode_workers or usable_cores()
        return DecodedCache(_fedscale_reader(cfg, root, src), workers, int(data.cache_gb * (1 << 30)), log=log), arch
    if data.fallback == "error":
        raise ConfigError(f"{src}: data: data.root is null (no real {data.name} data) and data.fallback is 'error'")
    px = data.proxy
    log(f"WARNING: data.root is null: no real {data.name} data; using the generated proxy task (data.fallback: proxy)")
    ds = SyntheticFederated(
        n_clients=px.n_clients, n_classes=px.n_classes, n_features=px.n_features,
        alpha=px.alpha, beta=px.beta, seed=px.seed, mean_samples=px.mean_samples, min_samples=PROXY_MIN_SAMPLES,
    )
    return ds, px.model


def _data_root(given: Path, experiment_path: str | Path | None) -> Path:
    root = resolve_path(given, experiment_path)
    if not root.exists():
        raise ConfigError(f"{experiment_path}: data.root: {str(given)!r} not found (set data.root: null to run the generated proxy task)")
    return root


def _architecture(cfg: ExperimentConfig, src: str) -> str:
    """The torchvision architecture trained on FedScale's ``data.name`` data for ``cfg.model``."""
    if cfg.data.name not in ("openimage", "google_speech"):
        raise ConfigError(f"{src}: data.name: real {cfg.data.name!r} data cannot be read (only 'openimage', 'google_speech', 'arrays', 'leaf'); "
                          "set data.root: null to run the proxy")
    if cfg.model not in ARCHITECTURES:
        raise ConfigError(f"{src}: model: no trainable architecture for {cfg.model!r} (known: {', '.join(ARCHITECTURES)})")
    if cfg.data.name == "google_speech" and cfg.data.speech_channels == 1:
        if cfg.model != "resnet34":
            raise ConfigError(f"{src}: data.speech_channels: 1 (FedScale's input) needs model resnet34, got {cfg.model!r}")
        return "resnet34_speech"
    return ARCHITECTURES[cfg.model]


def _fedscale_reader(cfg: ExperimentConfig, root: Path, src: str) -> FederatedDataset:
    from flamingo_sim.fl.data.openimage import FedScaleImageDataset
    from flamingo_sim.fl.data.speech import FedScaleSpeechDataset

    data = cfg.data
    try:
        if data.name == "openimage":
            return FedScaleImageDataset(root, "train", data.image_size, data.max_clients, data.filter_less, data.max_test_samples,
                                        transform=data.transform)
        return FedScaleSpeechDataset(root, "train", data.image_size, data.max_clients, data.filter_less, data.max_test_samples,
                                     channels=data.speech_channels)
    except InputDataError as exc:
        raise ConfigError(f"{src}: data.root: {exc}") from None


def _pack_settings(cfg: ExperimentConfig) -> dict[str, Any]:
    """The data settings a pack was decoded with (recorded in its manifest; a run reading the pack checks them)."""
    data = cfg.data
    keys = ["name", "image_size", "filter_less", "max_clients", "max_test_samples"]
    keys.append("transform" if data.name == "openimage" else "speech_channels")
    return {f"data.{k}": getattr(data, k) for k in keys}


def _open_pack(cfg: ExperimentConfig, root: Path, src: str) -> FederatedDataset:
    """The pack at ``root``, verified, and checked to hold what the experiment's data settings read."""
    from flamingo_sim.fl.data.pipeline import PackedDataset
    from flamingo_sim.fl.data.speech import CLASSES

    data = cfg.data
    try:
        ds = PackedDataset(root, max_clients=data.max_clients)
    except InputDataError as exc:
        raise ConfigError(f"{src}: data.root: {exc}") from None
    packed_name = ds.settings.get("data.name")  # recorded by pack-data (pack_dataset's callers may record none)
    if packed_name is not None and packed_name != data.name:
        raise ConfigError(f"{src}: data.root: packed dataset {root} holds {packed_name} data, the experiment reads data.name {data.name!r}")
    speech = data.name == "google_speech"
    channels = data.speech_channels if speech else 3
    want = (channels, data.image_size, data.image_size)
    if tuple(ds.input_shape) != want:
        shape = "x".join(map(str, ds.input_shape))
        why = f"data.image_size {data.image_size}, " + (f"data.speech_channels {channels}" if speech else "3 channels")
        key = "data.image_size" if tuple(ds.input_shape[1:]) != want[1:] else "data.speech_channels"
        raise ConfigError(f"{src}: data.root: packed dataset {root} holds inputs of shape {shape}, the experiment reads "
                          f"{'x'.join(map(str, want))} ({why}); pack it again with these settings (flamingo-sim pack-data) or change {key}")
    if speech and ds.n_classes != len(CLASSES):
        raise ConfigError(f"{src}: data.root: packed dataset {root} has {ds.n_classes} classes, the model for "
                          f"Google Speech predicts {len(CLASSES)}; pack the data again")
    packed = ds.settings
    for key in ("transform", "filter_less", "max_test_samples"):  # what changes the samples, not only their shape
        if f"data.{key}" in packed and packed[f"data.{key}"] != getattr(data, key):
            raise ConfigError(f"{src}: data.root: packed dataset {root} was packed with data.{key} {packed[f'data.{key}']!r}, the experiment "
                              f"sets {getattr(data, key)!r}; pack it again with these settings (flamingo-sim pack-data) or set data.{key} to match")
    most = packed.get("data.max_clients")
    if most is not None and (data.max_clients is None or data.max_clients > most):
        raise ConfigError(f"{src}: data.root: packed dataset {root} holds at most {most} clients (data.max_clients {most} when packed), the "
                          f"experiment asks for {data.max_clients or 'all'}; pack it again or set data.max_clients <= {most}")
    return ds


def pack_experiment(experiment: str | Path, out_dir: str | Path, overrides: list[str] | tuple[str, ...] = (),
                    workers: int | None = None, log: Callable[[str], None] | None = None) -> PackInfo:
    """Decode the FedScale data the experiment reads (``data.*``, as ``run`` would) into a pack at ``out_dir``.

    The experiment is found, loaded and validated as ``flamingo-sim run`` does; ``workers``
    decoding threads (default ``data.decode_workers``, else the usable cores). Returns the
    :class:`~flamingo_sim.fl.data.pipeline.PackInfo`.
    """
    from flamingo_sim.fl.config import load_experiment
    from flamingo_sim.fl.data.pipeline import PACK_KIND, is_packed, pack_dataset
    from flamingo_sim.fl.training.device import usable_cores
    from flamingo_sim.io import check_out_dir
    from flamingo_sim.resources import find_experiment

    experiment = find_experiment(experiment)
    cfg = load_experiment(experiment, overrides)
    src, data = str(experiment), cfg.data
    if workers is not None and workers < 1:
        raise ConfigError(f"workers: expected a count >= 1, got {workers}")
    if data.root is None:
        raise ConfigError(f"{src}: data.root: null, the generated proxy task: nothing to pack (set data.root to a FedScale {data.name} layout)")
    root = _data_root(data.root, experiment)
    if data.name in ("arrays", "leaf"):
        raise ConfigError(f"{src}: data.name: {data.name!r} data is read as arrays already: nothing to pack (packing decodes openimage and google_speech)")
    _architecture(cfg, src)
    if is_packed(root):
        raise ConfigError(f"{src}: data.root: {root} is a packed dataset already: nothing to pack")
    check_out_dir(out_dir, PACK_KIND)  # before reading anything
    reader = _fedscale_reader(cfg, root, src)
    say = log or (lambda _m: None)
    say(f"packing {reader.description}")
    try:
        return pack_dataset(reader, out_dir, workers or data.decode_workers or usable_cores(), say, _pack_settings(cfg))
    except InputDataError as exc:  # an unreadable image or clip, found while decoding
        raise ConfigError(f"{src}: data.root: {exc}") from None
