"""A run's dataset from its ``data`` section: the generated proxy, the user's own arrays, FedScale's layouts, packs.

Every lookup that can fail on user input (a dataset that is not there, a pack decoded with
other settings, a model with no trainable architecture) raises a
:class:`~flamingo_sim.errors.ConfigError` naming the experiment file and the key.
:func:`pack_experiment` decodes the data an experiment reads into a pack (``flamingo-sim pack-data``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from flamingo_sim.errors import ConfigError, InputDataError
from flamingo_sim.fl.config import PROXY_MIN_SAMPLES, ExperimentConfig, resolve_path
from flamingo_sim.fl.data.base import FederatedDataset

if TYPE_CHECKING:
    from flamingo_sim.fl.data.pipeline import PackInfo

__all__ = ["ARCHITECTURES", "make_dataset", "pack_experiment", "pack_settings", "proxy_line"]


#: Profile model name -> torchvision architecture trained on real data.
ARCHITECTURES = {"mobilenet_v2": "mobilenet_v2", "shufflenet_v2_x2": "shufflenet_v2_x2_0", "resnet34": "resnet34"}


def make_dataset(cfg: ExperimentConfig, experiment_path: str | Path | None, log: Callable[[str], None]) -> tuple[FederatedDataset, str]:
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
    _check_proxy_memory(cfg, 0, src)  # the per-client arrays and the shared teacher, allocated with the dataset
    try:
        ds = SyntheticFederated(
            n_clients=px.n_clients, n_classes=px.n_classes, n_features=px.n_features,
            alpha=px.alpha, beta=px.beta, seed=px.seed, mean_samples=px.mean_samples, min_samples=PROXY_MIN_SAMPLES,
        )
    except ValueError as exc:
        raise ConfigError(f"{src}: data.proxy.{exc}") from None  # "mean_samples 1e+308: ...": a mean so large its draw overflows
    _check_proxy_memory(cfg, int(ds.samples_per_client.max()), src)
    log(proxy_line(cfg))
    return ds, px.model


def proxy_line(cfg: ExperimentConfig) -> str:
    """The line a run on the generated proxy task says: asked for (``data.name: synthetic``), or in place of real data."""
    if cfg.data.name == "synthetic":
        return "data: the generated proxy task (data.name: synthetic), not real data"
    return (f"WARNING: data.root is null, so no real {cfg.data.name} data is read: training the generated proxy task instead "
            f"(data.fallback: proxy); point data.root at the data to train on it")


#: Bytes every client of the proxy task holds at least: its sample count as drawn (float64, then floored and cast to
#: int64: three arrays of 8 bytes a client at once) and the population's trace, phone and bandwidth (8 bytes each).
PROXY_BYTES_PER_CLIENT = 48


def _check_proxy_memory(cfg: ExperimentConfig, largest_samples: int, src: str) -> None:
    """The proxy task, one client of it generated, and its network must fit this machine's memory: a bound from below
    (the per-client arrays, the shared and the client's teacher, the client's samples and their logits in float64,
    the model's parameters; training needs more)."""
    import torch

    from flamingo_sim.fl.training.memory import total_memory_bytes
    from flamingo_sim.models import MLP_HIDDEN_UNITS

    px = cfg.data.proxy
    c, f = float(px.n_classes), float(px.n_features)
    params = f * c + c if px.model == "logreg" else f * MLP_HIDDEN_UNITS + MLP_HIDDEN_UNITS * (1 + c) + c
    parts = {f"{px.n_clients:,} clients' arrays": PROXY_BYTES_PER_CLIENT * float(px.n_clients),
             f"teachers of n_classes {px.n_classes:,} x n_features {px.n_features:,}": 2 * 8 * c * f,
             f"the largest client's {largest_samples:,} samples": largest_samples * (8 * f + 4 * f + 8 * c),
             f"the {px.model}'s parameters": 4 * params}
    need = sum(parts.values())
    memory = total_memory_bytes(torch.device("cpu"))
    if memory is not None and need > memory:
        gib = float(1 << 30)
        listed = "; ".join(f"{what}: {size / gib:,.1f} GiB" for what, size in parts.items() if size >= 0.05 * gib)
        raise ConfigError(f"{src}: data.proxy: the proxy task needs at least {need / gib:,.1f} GiB ({listed}), more than the "
                          f"{memory / gib:.1f} GiB of memory of this machine; lower data.proxy.n_clients, n_classes, n_features or mean_samples")


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


def pack_settings(cfg: ExperimentConfig) -> dict[str, Any]:
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
        return pack_dataset(reader, out_dir, workers or data.decode_workers or usable_cores(), say, pack_settings(cfg))
    except InputDataError as exc:  # an unreadable image or clip, found while decoding
        raise ConfigError(f"{src}: data.root: {exc}") from None
