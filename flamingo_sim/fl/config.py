"""The experiment config: one YAML file per experiment, validated once by :mod:`flamingo_sim.config`.

A shipped example is ``experiments/openimage_mobilenet.yaml``; every key is documented on the
dataclass fields below. A file may build on another with ``extends:`` (a shipped experiment's
name or a file; :mod:`flamingo_sim.fl.extends`). Paths in the file are resolved relative to the
current directory first, then to the experiment file's directory (and its parent), then to those of
the files it extends, then among the shipped data (:func:`flamingo_sim.resources.data_root`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Optional, Union

from flamingo_sim.config import PLUGIN_PARAMS, FieldError, apply_overrides, check_ranges, from_mapping
from flamingo_sim.devices.policies import PolicyConfig
from flamingo_sim.errors import ConfigError
from flamingo_sim.resources import data_root

#: The paper's five phones with an equal share each (override ``phones.mix`` in the YAML).
DEFAULT_PHONE_MIX = {
    "galaxy_tab_s6": 0.2,
    "oneplus_8": 0.2,
    "pixel_3": 0.2,
    "galaxy_s10e": 0.2,
    "mi_10": 0.2,
}


@dataclass(frozen=True)
class TracesConfig:
    #: The client traces: a ``prep-traces`` output directory (the shipped synthetic set by default).
    path: Path = Path("traces/synthetic")
    #: Battery level (%) below which a client goes offline: the paper's rule.
    min_pct: float = 10.0
    #: Level (%) at which an offline client comes back once charging lifts it; null: ``min_pct``,
    #: as in the paper (a higher value adds a hysteresis the paper does not have).
    reentry_pct: Optional[float] = None
    #: Whether a phone is on the charger: "charger" (the trace's plug column where it has one, so a phone held
    #: full on the charger counts as plugged) or "level" (only a rising battery level, the paper's appendix A.2).
    charge_state: Literal["charger", "level"] = "charger"

    def __post_init__(self) -> None:
        reentry_pct = self.min_pct if self.reentry_pct is None else self.reentry_pct
        object.__setattr__(self, "reentry_pct", reentry_pct)
        check_ranges(self, min_pct="[0, 100]", reentry_pct="[0, 100]")
        if not self.min_pct <= reentry_pct:
            raise ValueError(f"need min_pct <= reentry_pct, got {self.min_pct} and {reentry_pct}")

    @property
    def reentry_level_pct(self) -> float:
        """The level at which an offline client comes back (``reentry_pct``, resolved: ``min_pct`` when null)."""
        return self.min_pct if self.reentry_pct is None else self.reentry_pct


@dataclass(frozen=True)
class PhonesConfig:
    #: Phone -> share of the clients; or ``from_traces``: each client plays its trace device's
    #: real phone, mapped from the device model by the table ``phones.models``.
    mix: Union[dict[str, float], Literal["from_traces"]] = field(default_factory=lambda: dict(DEFAULT_PHONE_MIX))
    #: Directories searched for phones and profiles before the shipped ones; null: the user's
    #: profiles directory, where ``flamingo-sim profile`` writes.
    profiles_dir: Union[Path, list[Path], None] = None
    #: ``paper`` (Table 1's ratios matched) or ``anchored`` (plausible absolute values everywhere).
    profile_set: str = "paper"
    #: The device-model -> phone table of ``mix: from_traces``; null: the shipped ``profiles/phone_models.yaml``.
    models: Optional[Path] = None

    def __post_init__(self) -> None:
        from flamingo_sim.devices.profiles import PROFILE_SETS

        if self.profile_set not in PROFILE_SETS:
            raise ValueError(f"profile_set: expected one of {', '.join(PROFILE_SETS)}, got {self.profile_set!r}")
        if self.mix == "from_traces":
            return
        if not self.mix:
            raise FieldError("mix", "at least one phone with its share", self.mix)
        check_ranges(self, mix=">= 0")
        total = sum(self.mix.values())
        if total <= 0:
            raise FieldError("mix", "shares that sum to > 0", self.mix)
        if abs(total - 1.0) > MIX_SUM_TOLERANCE:  # never renormalised silently: say what they sum to
            raise FieldError("mix", f"each phone's share of the fleet, summing to 1 (these sum to {total:.6g})", self.mix)


#: How far ``phones.mix``'s shares may sum from 1 (six written decimals, as 0.666667 + 0.333333).
MIX_SUM_TOLERANCE = 1e-5


#: The proxy task's models (vmap-trainable, see :mod:`flamingo_sim.fl.training.trainer`) and the
#: fewest samples its clients have (``SyntheticFederated``'s ``min_samples``).
PROXY_MODELS = ("mlp", "logreg")
PROXY_MIN_SAMPLES = 16
#: The smallest image side the torchvision networks get: below it nothing of the image is left
#: after their first strided layers.
MIN_IMAGE_SIZE = 8


@dataclass(frozen=True)
class ProxyConfig:
    """The generated non-IID task used when the real data is absent (LEAF Synthetic(alpha, beta))."""

    #: Clients of the generated task (OpenImage's 14,477 by default).
    n_clients: int = 14477
    #: Classes of the generated task.
    n_classes: int = 10
    #: Features per sample.
    n_features: int = 60
    #: LEAF Synthetic's alpha: how much the clients' models differ.
    alpha: float = 1.0
    #: LEAF Synthetic's beta: how much the clients' inputs differ.
    beta: float = 1.0
    #: Mean samples per client, heavy-tailed (OpenImage: 1,672,231 samples / 14,477 clients).
    mean_samples: float = 115.5
    #: The network trained on the proxy task (no BatchNorm): ``mlp`` or ``logreg``.
    model: str = "mlp"
    #: Seed of the task itself, fixed across run seeds like a real dataset.
    seed: int = 0

    def __post_init__(self) -> None:
        check_ranges(self, n_clients=">= 1", n_classes=">= 2", n_features=">= 1", alpha=">= 0", beta=">= 0",
                     mean_samples=f"> {PROXY_MIN_SAMPLES}", seed=">= 0")
        if self.model not in PROXY_MODELS:
            raise FieldError("model", f"one of {', '.join(map(repr, PROXY_MODELS))}", self.model)


@dataclass(frozen=True)
class DataConfig:
    #: The data set: FedScale's ``openimage`` or ``google_speech``, ``synthetic`` (the proxy
    #: task), or your own ``arrays`` or ``leaf`` files.
    name: Literal["openimage", "google_speech", "synthetic", "arrays", "leaf"] = "openimage"
    #: The data set's directory (FedScale's layout, a pack, or your own files); null: ``data.fallback``.
    root: Optional[Path] = None
    #: With ``root`` null: ``proxy`` trains the generated task, ``error`` refuses to run.
    fallback: Literal["proxy", "error"] = "proxy"
    #: Real images (speech: log-mel spectrograms) are resized to image_size x image_size.
    image_size: int = 64
    #: OpenImage preprocessing: ``default`` (ImageNet mean/std, no augmentation: cheap on a CPU)
    #: or ``fedscale`` (FedScale's mean/std and a random horizontal flip in training).
    transform: Literal["default", "fedscale"] = "default"
    #: Google Speech input: 3 (log-mel image repeated to 3 channels, torchvision's ResNet-34)
    #: or 1 (FedScale's 1 x 32 x 32 input and its one-channel ResNet-34).
    speech_channels: Literal[1, 3] = 3
    #: Real data: drop clients with fewer samples (FedScale's filter_less; its benchmarks use 21).
    filter_less: int = 16
    #: Real data: use only the first N clients; null: all.
    max_clients: Optional[int] = None
    #: Test samples evaluated (the first N of the test set); null: all.
    max_test_samples: Optional[int] = 2000
    #: Threads decoding real images and clips; null: the usable cores.
    decode_workers: Optional[int] = None
    #: Decoded, resized real samples kept in memory (GiB, least recently used first out).
    cache_gb: float = 4.0
    #: On a GPU: clients' samples kept on the device (GiB, LRU), so a round moves only clients
    #: not already there; null: a quarter of the GPU memory free at the start; 0: off.
    device_cache_gb: Optional[float] = None
    #: The generated task trained when ``root`` is null (LEAF's Synthetic(alpha, beta), non-IID).
    proxy: ProxyConfig = field(default_factory=ProxyConfig)
    #: ``arrays``/``leaf``: the network trained, a built-in name or ``package.module:Factory``.
    model: str = "mlp"

    def __post_init__(self) -> None:
        check_ranges(self, image_size=f">= {MIN_IMAGE_SIZE}", max_clients=">= 1", max_test_samples=">= 1", filter_less=">= 1",
                     decode_workers=">= 1", cache_gb="> 0", device_cache_gb=">= 0")


@dataclass(frozen=True)
class NetworkConfig:
    """How a client's model download (at the task's start) and upload (at its end) are priced.
    The sources of every value and the model itself: the modelling notes, section "Network"."""

    #: Size of one model transfer, each way (MB); null: the parameters of ``model`` x 4 bytes (float32).
    model_size_mb: Optional[float] = None
    #: ``lognormal``: each client one bandwidth, both ways, no radio energy (the default, as before).
    #: ``traces``: each transfer on the network the client's trace shows then (WiFi, cellular or none),
    #: each direction's bandwidth of that network, and the radio's energy (Huang et al., MobiSys 2012).
    model: Literal["lognormal", "traces"] = "lognormal"
    #: ``lognormal``: median client bandwidth (Mbit/s); per-client values are log-normal around it (an assumption, no source).
    bandwidth_mbps: float = 20.0
    #: ``lognormal``: standard deviation of log(bandwidth) across clients (an assumption, no source).
    bandwidth_sigma: float = 0.5
    #: ``traces``: mean download on WiFi (Mbit/s): Ookla Speedtest Global Index, November 2017, global mean fixed-broadband download.
    wifi_down_mbps: float = 40.11
    #: ``traces``: mean upload on WiFi (Mbit/s): the same index, global mean fixed-broadband upload.
    wifi_up_mbps: float = 19.96
    #: ``traces``: mean download on cellular (Mbit/s): the same index, global mean mobile download.
    cellular_down_mbps: float = 20.28
    #: ``traces``: mean upload on cellular (Mbit/s): the same index, global mean mobile upload.
    cellular_up_mbps: float = 8.65
    #: ``traces``: each client's WiFi and its cellular bandwidth are the means x a log-normal factor of mean 1 and this
    #: log standard deviation (one factor per client and network, both directions; the ``lognormal`` model's spread, an assumption).
    spread_sigma: float = 0.5
    #: The share of clients on WiFi where the trace does not tell (a trace set without network columns, or a slot
    #: further than prep-traces' hold from a reading); each client is on WiFi or cellular for all its unknown slots. 0.5:
    #: OpenSignal, US smartphone users on WiFi roughly half the time in Q1 2017 (43-54 % by operator).
    unknown_wifi_share: float = 0.5
    #: Train only on an unmetered network (Bonawitz et al., MLSys 2019): a client on cellular or without network at the round's
    #: start is not reachable, and (``model: traces``) a transfer pauses while the phone is off WiFi. Off by default: the paper does not say.
    unmetered_only: bool = False
    #: FedScale's device-capacity file (a pickled dict client id -> {'computation': ms/sample, 'communication': kbit/s}, read
    #: without executing it): each client's bandwidth, both ways and on every network, replaces the drawn ones; null: none.
    fedscale_capacity_file: Optional[Path] = None

    def __post_init__(self) -> None:
        check_ranges(self, model_size_mb="> 0", bandwidth_mbps="> 0", bandwidth_sigma=">= 0", wifi_down_mbps="> 0", wifi_up_mbps="> 0",
                     cellular_down_mbps="> 0", cellular_up_mbps="> 0", spread_sigma=">= 0", unknown_wifi_share="[0, 1]")


#: The torch CPU threads of a run with ``fl.threads`` null, in words (``run --help`` says it; the rule is
#: :func:`flamingo_sim.fl.training.device.default_threads`, and a test holds the two together).
THREADS_DEFAULT = "OMP_NUM_THREADS if set, else 1 for the proxy task, else the usable cores"

#: The longest ``--collective-timeout-s`` taken, in seconds: a week. A collective waiting longer is a hung run, and
#: torch's timeout is a ``timedelta`` (``inf`` or 1e15 s overflowed it: a traceback in every rank).
COLLECTIVE_TIMEOUT_MAX_S = 7 * 86400.0


@dataclass(frozen=True)
class FLConfig:
    #: K: the client updates aggregated each round.
    participants_per_round: int = 100
    #: Select ceil(K x overcommit) clients, keep the K fastest (FedScale's over-commitment).
    overcommit: float = 1.3
    #: Local SGD steps per client and round.
    local_steps: int = 20
    #: Minibatch size of a local step.
    batch_size: int = 16
    #: Learning rate of the clients' plain SGD.
    lr: float = 0.05
    #: Stop after this many rounds; null: run to ``horizon_h`` (at least one of the two is set).
    rounds: Optional[int] = 100
    #: Stop at this virtual time (hours), whichever of it and ``rounds`` comes first; null: no limit.
    horizon_h: Optional[float] = None
    #: Evaluate the global model every this many rounds (and after round 1 and the last round).
    eval_every: int = 5
    #: Who is selected: ``uniform``, ``battery``, ``oort`` or ``package.module:Selector``.
    selection: str = "uniform"
    #: Drop clients that finish later than this (seconds) after the round starts; null: no deadline.
    deadline_s: Optional[float] = None
    #: How a cohort trains: ``auto`` picks per (model, image size, device); ``batched`` = ``vmap``;
    #: ``sequential`` is the per-client reference loop; ``streams``: CUDA streams; ``threads``: CPU threads.
    train_mode: Literal["auto", "batched", "vmap", "streams", "threads", "sequential"] = "auto"
    #: ``auto`` (a CUDA GPU when one is visible, else the CPU), ``cpu``, ``cuda`` or ``cuda:N``.
    device: str = "auto"
    #: Torch CPU threads, set once per run; null: OMP_NUM_THREADS if set, else 1 for the proxy task, else the usable cores.
    threads: Optional[int] = None
    #: ``fp32``; or, when asked (CUDA), ``tf32`` matmuls/convolutions or ``bf16`` autocast.
    precision: Literal["fp32", "tf32", "bf16"] = "fp32"
    #: Capture the batched step as a CUDA graph and replay it (CUDA only).
    cuda_graphs: bool = False
    #: Memory per vmap chunk (GiB); null: 80 % of the free GPU memory, or half the available RAM.
    memory_budget_gb: Optional[float] = None
    #: ``sync`` rounds, or ``fedbuff``: FedBuff's buffered asynchronous aggregation (section ``fedbuff``).
    mode: Literal["sync", "fedbuff"] = "sync"
    #: CPU kernels: ``portable`` (ATen's default kernels: the same numbers on every x86-64 CPU), ``native``
    #: (the CPU's widest SIMD) or ``auto`` (portable for the proxy task, native for real data).
    cpu_kernels: Literal["auto", "portable", "native"] = "auto"

    def __post_init__(self) -> None:
        check_ranges(self, participants_per_round=">= 1", overcommit=">= 1", local_steps=">= 1", batch_size=">= 1",
                     lr="> 0, float32", rounds=">= 1", horizon_h="> 0", eval_every=">= 1", deadline_s="> 0",
                     threads=">= 1", memory_budget_gb="> 0")
        if self.rounds is None and self.horizon_h is None:
            raise ValueError("set rounds, horizon_h or both (both are null: the run would never end)")
        if not self.selection:
            raise FieldError("selection", "a selector name or package.module:Class", self.selection)
        text = self.device.strip().lower()
        if not (text in ("auto", "cpu", "cuda") or (text.startswith("cuda:") and text[5:].isdigit())):
            raise FieldError("device", "auto, cpu, cuda or cuda:N", self.device)


@dataclass(frozen=True)
class AggregationConfig:
    """How the server aggregates (:mod:`flamingo_sim.fl.strategy.aggregators`): its name, the weighting, and beside
    them the aggregator's own parameters (``mu: 0.1`` for fedprox), checked by its ``Params``; unset ones take their default."""

    #: ``fedavg``, ``fedprox``, ``fedadam``, ``fedyogi``, an installed aggregator or ``package.module:Class``.
    name: str = "fedavg"
    #: ``samples``: the mean weighted by the clients' samples (FedAvg); ``uniform``: the plain mean (FedScale's).
    weighting: Literal["samples", "uniform"] = "samples"
    #: The aggregator's parameters: the section's other keys (see the aggregators' tables below).
    params: dict[str, Any] = field(default_factory=dict, metadata=PLUGIN_PARAMS)

    def __post_init__(self) -> None:
        if not self.name:
            raise FieldError("name", "an aggregator name or package.module:Class", self.name)

    def parameters(self) -> dict[str, Any]:
        """The aggregator parameters that are set."""
        return dict(self.params)


@dataclass(frozen=True)
class SelectorConfig:
    """Parameters of the selector named in ``fl.selection``, checked by its ``Params`` (see the selectors' tables below)."""

    #: The selector's parameters: every key of the section.
    params: dict[str, Any] = field(default_factory=dict, metadata=PLUGIN_PARAMS)

    def parameters(self) -> dict[str, Any]:
        """The selector parameters that are set."""
        return dict(self.params)


@dataclass(frozen=True)
class FedBuffConfig:
    """``fl.mode: fedbuff`` (:mod:`flamingo_sim.fl.sim.fedbuff`); a "round" is one server update."""

    #: M: client updates per server update.
    buffer_size: int = 10
    #: Clients training at once; null: ceil(K x overcommit).
    concurrency: Optional[int] = None
    #: An update's weight is (1 + staleness) ** -staleness_exponent.
    staleness_exponent: float = 0.5
    #: global += server_lr x the mean of the weighted client deltas.
    server_lr: float = 1.0
    #: A slot with nobody to run (or a declined request) is retried this many seconds later.
    retry_s: float = 60.0

    def __post_init__(self) -> None:
        check_ranges(self, buffer_size=">= 1", concurrency=">= 1", staleness_exponent=">= 0", server_lr="> 0, float32", retry_s="> 0")


@dataclass(frozen=True)
class DevicesConfig:
    """Two device limits beyond the profiles: heat and memory (:mod:`flamingo_sim.fl.sim.limits`);
    both on by default, in synchronous rounds and under FedBuff (each dispatch as a round of one).
    With both ``none`` the engine never builds them: a run is then exactly one without them."""

    #: ``rc``: each phone's battery temperature is the trace's plus the heat its training adds (a
    #: first-order thermal circuit from the phone catalogue's ``body``, heated by the physical power
    #: model), and a core cluster above its ``throttle`` threshold slows down; monitoring policies read
    #: the modelled temperature. ``none``: the trace's only. Null: ``rc``.
    thermal: Optional[Literal["none", "rc"]] = None
    #: A client whose training does not fit its phone's app memory limit: ``drop`` (dropped, reason
    #: ``out_of_memory``), ``shrink_batch`` (trains with the largest minibatch that fits), ``none`` (not checked).
    #: Null: ``shrink_batch``.
    memory: Optional[Literal["none", "drop", "shrink_batch"]] = None
    #: thermal: one throttling threshold (degC) for every core cluster of every phone; null: the catalogue's per-SoC values.
    throttle_threshold_c: Optional[float] = None
    #: thermal: multiplies every phone's heat capacity, so its time constant (the steady-state temperature stays).
    time_constant_factor: float = 1.0
    #: memory: multiplies every phone's app memory limit (the low-memory killer's, or ``memory.app_limit_gib`` in the catalogue).
    memory_limit_factor: float = 1.0
    #: memory: input side (px) of the network the phones train; null: the side its profiles were priced at (224; ResNet-34: 32).
    input_size: Optional[int] = None

    def __post_init__(self) -> None:
        check_ranges(self, throttle_threshold_c="[-50, 150]", time_constant_factor="> 0", memory_limit_factor="> 0",
                     input_size=f">= {MIN_IMAGE_SIZE}")

    @property
    def enabled(self) -> bool:
        """Either model is on."""
        return self.thermal != "none" or self.memory != "none"

    def resolved(self, mode: str) -> "DevicesConfig":
        """The defaults (null) made explicit for ``fl.mode`` (both on, in either mode)."""
        return dataclasses.replace(self, thermal=self.thermal or "rc", memory=self.memory or "shrink_batch")


@dataclass(frozen=True)
class TrackingConfig:
    """Optional logging of every round's metrics (:mod:`flamingo_sim.fl.runner.tracking`)."""

    #: Write TensorBoard event files in RUN/tensorboard/<policy>-seed<k>/.
    tensorboard: bool = False
    #: Log one MLflow run per (policy, seed).
    mlflow: bool = False
    #: MLflow tracking URI; null: an SQLite store, RUN/mlflow.db.
    mlflow_tracking_uri: Optional[str] = None
    #: MLflow experiment; null: the experiment's name.
    mlflow_experiment: Optional[str] = None


@dataclass(frozen=True)
class TargetConfig:
    """How time to ``target_accuracy`` is read from the accuracy curves (:mod:`flamingo_sim.fl.metrics.target`).

    The default reads a smoothed curve and sets a computed target a margin below the reading, so
    that one test sample cannot move the headline; ``curve: raw`` with ``margin: 0`` is the raw rule.
    """

    #: the curve compared with the target: "smoothed" (mean of the last ``window`` evaluations) or "raw" (each evaluation)
    curve: Literal["smoothed", "raw"] = "smoothed"
    #: evaluations averaged by the smoothed curve (trailing, so the value at a round is known at that round)
    window: int = 3
    #: accuracy subtracted from a computed target (highest, highest_common); a number in target_accuracy is used as given
    margin: float = 0.01

    def __post_init__(self) -> None:
        check_ranges(self, window=">= 1", margin="[0, 1)")


#: Seeds are stored as int64 (metrics.parquet's ``seed`` column): each below 2**63.
SEED_LIMIT = 2**63


@dataclass(frozen=True)
class ExperimentConfig:
    #: The experiment's name: it names the run directory (no slashes).
    name: str
    #: Free text, shown in reports.
    description: str = ""
    #: The DNN whose phone profiles price every local step (``mobilenet_v2``, ``shufflenet_v2_x2``, ``resnet34``, ...).
    model: str = "mobilenet_v2"
    #: The client traces and the battery rule that takes clients offline.
    traces: TracesConfig = field(default_factory=TracesConfig)
    #: Which phones the clients play, and where their profiles are found.
    phones: PhonesConfig = field(default_factory=PhonesConfig)
    #: The federated data and the network trained on it.
    data: DataConfig = field(default_factory=DataConfig)
    #: Model transfers: size, the clients' bandwidths, the network each transfer runs on and its radio energy.
    network: NetworkConfig = field(default_factory=NetworkConfig)
    #: The FL job: rounds, participants, local training, selection, the device it trains on.
    fl: FLConfig = field(default_factory=FLConfig)
    #: How the server combines the round's updates.
    aggregation: AggregationConfig = field(default_factory=AggregationConfig)
    #: Parameters of the selector named in ``fl.selection``; unset ones take its default.
    selector: SelectorConfig = field(default_factory=SelectorConfig)
    #: Optional logging of every round's metrics to TensorBoard or MLflow.
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    #: FedBuff's parameters, used with ``fl.mode: fedbuff`` (a "round" is one server update).
    fedbuff: FedBuffConfig = field(default_factory=FedBuffConfig)
    #: The target: a number in (0, 1], ``highest`` (the paper's words, "the highest achieved by either": the
    #: higher of the policies' bests, which a weaker policy may never reach) or ``highest_common`` (one reading
    #: of them: the highest accuracy every policy reaches, the lower of the bests, so every policy has a time).
    target_accuracy: Union[float, Literal["highest", "highest_common"]] = "highest_common"
    #: How time to ``target_accuracy`` is read: the curve (smoothed or raw) and the margin below a computed target.
    target: TargetConfig = field(default_factory=TargetConfig)
    #: The policies compared: ``baseline``, ``flamingo``, ``least_energy``, an installed policy or ``package.module:Class``.
    policies: list[str] = field(default_factory=lambda: ["baseline", "flamingo"])
    #: Parameters every policy is built with.
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    #: Each policy's own parameters, by its name in ``policies`` (``least_energy: {margin: 0.7}``), checked by its ``Params``.
    policy_params: dict[str, dict[str, Any]] = field(default_factory=dict, metadata={"plugins": "policy"})
    #: Device limits beyond the profiles: heat (thermal throttling) and memory; both on by default (none switches either off).
    devices: DevicesConfig = field(default_factory=DevicesConfig)
    #: The run seeds (phones drawn from the mix, bandwidths, selection, initial model, minibatches).
    seeds: list[int] = field(default_factory=lambda: [0])
    #: Rounds between checkpoints (and metrics.parquet rewrites).
    checkpoint_every: int = 10

    def __post_init__(self) -> None:
        if not self.name or self.name != self.name.strip() or any(c in self.name for c in "/\\\0"):
            raise FieldError("name", "a non-empty name without slashes (it names the run directory)", self.name)
        if not self.model:
            raise FieldError("model", "the name of a profiled DNN model, e.g. mobilenet_v2", self.model)
        check_ranges(self, checkpoint_every=">= 1", seeds=f"[0, {SEED_LIMIT})")
        if isinstance(self.target_accuracy, float):
            check_ranges(self, target_accuracy="(0, 1]")
        if not self.policies:
            raise FieldError("policies", "at least one policy", self.policies)
        if len(set(self.policies)) != len(self.policies):
            raise FieldError("policies", "each policy once", self.policies)
        if not self.seeds:
            raise FieldError("seeds", "at least one seed", self.seeds)
        if len(set(self.seeds)) != len(self.seeds):
            raise FieldError("seeds", "each seed once", self.seeds)
        object.__setattr__(self, "devices", self.devices.resolved(self.fl.mode))
        if self.fl.mode == "fedbuff" and self.aggregation != AggregationConfig():
            raise ValueError("aggregation: fl.mode 'fedbuff' updates the server with FedBuff's own step (fedbuff.server_lr); leave aggregation at its default")
        unused = [k for k in self.policy_params if k not in self.policies]
        if unused:
            raise ValueError(f"policy_params.{unused[0]}: not a policy of this experiment (policies: {', '.join(self.policies)})")
        self._check_builtin_params()

    def _check_builtin_params(self) -> None:
        """The plug-ins' names and the shipped ones' parameters, checked with the file (the others' once they are
        imported, before the run): :func:`flamingo_sim.fl.plugins.check_names`."""
        from flamingo_sim.fl.plugins import check_names

        check_names(self)


def load_experiment(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> ExperimentConfig:
    """Load and validate an experiment YAML (with every file it ``extends`` merged in), ``--set`` overrides applied first."""
    from flamingo_sim.fl.extends import load_extended

    data = apply_overrides(load_extended(path), overrides, source=str(path))
    return from_mapping(ExperimentConfig, data, source=str(path))


def with_seeds(cfg: ExperimentConfig, n_seeds: int | None) -> ExperimentConfig:
    """``cfg`` with ``n_seeds`` seeds counted from its first one (``--seeds N``); ``cfg`` itself for None."""
    if n_seeds is None:
        return cfg
    if n_seeds < 1:
        raise ConfigError(f"n_seeds: expected a count >= 1, got {n_seeds}")
    if n_seeds > MAX_SEEDS:
        raise ConfigError(f"n_seeds: expected at most {MAX_SEEDS:,} (each seed a run of every policy), got {n_seeds:,}")
    if cfg.seeds[0] + n_seeds > SEED_LIMIT:
        raise ConfigError(f"n_seeds: {n_seeds:,} seeds from seeds[0] {cfg.seeds[0]} run past the largest seed, {SEED_LIMIT - 1}")
    return replace(cfg, seeds=[cfg.seeds[0] + i for i in range(n_seeds)])


#: The most seeds ``--seeds N`` takes: each is a run of every policy, a unit of work and an entry of the summary.
#: ``--seeds 1000000000`` built its list of a billion seeds (24 GB) before any check, and the process was killed.
MAX_SEEDS = 100_000


def resolve_path(value: Path, experiment_path: str | Path | None) -> Path:
    """Find a path named in a config: as given, beside the experiment (or in its parent), or among the shipped data."""
    if value.is_absolute() or value.exists():
        return value
    candidates = []
    if experiment_path is not None:
        from flamingo_sim.fl.extends import experiment_files

        for file in experiment_files(experiment_path):  # the experiment, then each file it extends
            exp_dir = file.resolve().parent
            candidates += [exp_dir / value, exp_dir.parent / value]
    candidates.append(data_root() / value)
    for cand in candidates:
        if cand.exists():
            return cand
    return value


def require_path(value: Path, experiment_path: str | Path | None, key: str, what: str) -> Path:
    path = resolve_path(value, experiment_path)
    if not path.exists():
        raise ConfigError(f"{experiment_path}: {key}: {what} {str(value)!r} not found")
    return path
