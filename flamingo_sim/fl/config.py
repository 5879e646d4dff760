"""The experiment config: one YAML file per experiment, validated once by :mod:`flamingo_sim.config`.

A shipped example is ``experiments/openimage_mobilenet.yaml``; every key is documented on the
dataclass fields below. Paths in the file are resolved relative to the current directory
first, then to the experiment file's directory (and its parent), then among the shipped data
(:func:`flamingo_sim.resources.data_root`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Optional, Union

from flamingo_sim.config import FieldError, check_ranges, load_config
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
    path: Path = Path("traces/synthetic")  # a prep-traces output directory
    min_pct: float = 10.0  # below this effective battery level a client goes offline (the paper's rule)
    # An offline client comes back once charging lifts it to this level. None (default): min_pct,
    # as in the paper; a higher value adds a hysteresis the paper does not have.
    reentry_pct: Optional[float] = None

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
    # phone -> share of clients, or "from_traces": each client plays its trace device's phone,
    # mapped from the device model by the table ``models`` (see profiles/phone_models.yaml)
    mix: Union[dict[str, float], Literal["from_traces"]] = field(default_factory=lambda: dict(DEFAULT_PHONE_MIX))
    # directories searched for phones and profiles before the shipped ones (null: the user's
    # profiles directory, where `flamingo-sim profile` writes; see flamingo_sim.resources)
    profiles_dir: Union[Path, list[Path], None] = None
    profile_set: str = "paper"  # "paper" (Table 1 matched) or "anchored" (plausible absolute values); see devices/calibrate.py
    # the device-model -> phone table of from_traces (null: the shipped profiles/phone_models.yaml)
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
        if sum(self.mix.values()) <= 0:
            raise FieldError("mix", "shares that sum to > 0", self.mix)


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

    n_clients: int = 14477
    n_classes: int = 10
    n_features: int = 60
    alpha: float = 1.0
    beta: float = 1.0
    mean_samples: float = 115.5  # OpenImage: 1,672,231 samples / 14,477 clients
    model: str = "mlp"  # a proxy model of flamingo_sim.models (no BatchNorm): mlp or logreg
    seed: int = 0  # the task itself is fixed across run seeds, like a real dataset

    def __post_init__(self) -> None:
        check_ranges(self, n_clients=">= 1", n_classes=">= 2", n_features=">= 1", alpha=">= 0", beta=">= 0",
                     mean_samples=f"> {PROXY_MIN_SAMPLES}", seed=">= 0")
        if self.model not in PROXY_MODELS:
            raise FieldError("model", f"one of {', '.join(map(repr, PROXY_MODELS))}", self.model)


@dataclass(frozen=True)
class DataConfig:
    name: Literal["openimage", "google_speech", "synthetic", "arrays", "leaf"] = "openimage"
    root: Optional[Path] = None  # FedScale-layout (or, for arrays/leaf, your own) dataset directory; absent -> fallback
    fallback: Literal["proxy", "error"] = "proxy"
    image_size: int = 64  # real images (speech: log-mel spectrograms) are resized to image_size x image_size
    # OpenImage preprocessing: "default" (ImageNet mean/std, no augmentation: cheap on CPU) or
    # "fedscale" (FedScale's mean/std and a random horizontal flip in training; FedScale uses image_size 256)
    transform: Literal["default", "fedscale"] = "default"
    # Google Speech input: 3 (log-mel image repeated to 3 channels, torchvision ResNet-34) or
    # 1 (FedScale's 1 x 32 x 32 input and its one-channel ResNet-34)
    speech_channels: Literal[1, 3] = 3
    filter_less: int = 16  # real data: drop clients with fewer samples (FedScale's filter_less; its benchmarks: 21)
    max_clients: Optional[int] = None  # use only the first N clients of the real data
    max_test_samples: Optional[int] = 2000
    decode_workers: Optional[int] = None  # threads decoding real images/clips; null: the usable cores
    cache_gb: float = 4.0  # decoded, resized real samples kept in memory (LRU)
    # on a GPU: clients' samples kept on the device (LRU), so a round moves only clients not
    # already there; null: a quarter of the GPU memory free at the start; 0: off
    device_cache_gb: Optional[float] = None
    proxy: ProxyConfig = field(default_factory=ProxyConfig)
    model: str = "mlp"  # arrays/leaf: the network trained, a built-in name or "package.module:Factory"

    def __post_init__(self) -> None:
        check_ranges(self, image_size=f">= {MIN_IMAGE_SIZE}", max_clients=">= 1", max_test_samples=">= 1", filter_less=">= 1",
                     cache_gb="> 0", device_cache_gb=">= 0")


@dataclass(frozen=True)
class NetworkConfig:
    # one model transfer (each way); null: the parameters of ``model`` x 4 bytes (float32)
    model_size_mb: Optional[float] = None
    bandwidth_mbps: float = 20.0  # median client bandwidth; per-client values are log-normal
    bandwidth_sigma: float = 0.5  # sd of log(bandwidth)

    def __post_init__(self) -> None:
        check_ranges(self, model_size_mb="> 0", bandwidth_mbps="> 0", bandwidth_sigma=">= 0")


@dataclass(frozen=True)
class FLConfig:
    participants_per_round: int = 100  # K: the updates aggregated each round
    overcommit: float = 1.3  # select ceil(K x overcommit), keep the K fastest
    local_steps: int = 20
    batch_size: int = 16
    lr: float = 0.05
    rounds: Optional[int] = 100  # stop after this many rounds (null: run to horizon_h)
    horizon_h: Optional[float] = None  # stop at this virtual time (whichever of the two comes first)
    eval_every: int = 5
    selection: str = "uniform"  # or "pkg.module:Selector"
    deadline_s: Optional[float] = None  # drop clients that finish later than this after round start
    # how a cohort trains (flamingo_sim.fl.training.trainer): auto picks per (model, image size, device);
    # batched = vmap; sequential is the per-client reference loop; streams = model copies on CUDA
    # streams; threads = model copies on CPU worker threads
    train_mode: Literal["auto", "batched", "vmap", "streams", "threads", "sequential"] = "auto"
    device: str = "auto"  # auto (a CUDA GPU when one is visible, else the CPU), cpu, cuda or cuda:N
    threads: Optional[int] = None  # torch CPU threads, set once per run; null: OMP_NUM_THREADS if set, else 1 for the proxy task, else the usable cores
    precision: Literal["fp32", "tf32", "bf16"] = "fp32"  # tf32/bf16 only when asked (CUDA)
    cuda_graphs: bool = False  # capture the batched step as a CUDA graph (CUDA only)
    memory_budget_gb: Optional[float] = None  # per vmap chunk; null: 80 % of free GPU memory / half the RAM
    mode: Literal["sync", "fedbuff"] = "sync"  # synchronous rounds, or FedBuff's buffered asynchronous aggregation
    #: CPU kernels: portable (the same numbers on every x86-64 CPU), native (the CPU's widest SIMD) or auto (portable for the proxy task)
    cpu_kernels: Literal["auto", "portable", "native"] = "auto"

    def __post_init__(self) -> None:
        check_ranges(self, participants_per_round=">= 1", overcommit=">= 1", local_steps=">= 1", batch_size=">= 1",
                     lr="> 0", rounds=">= 1", horizon_h="> 0", eval_every=">= 1", deadline_s="> 0",
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
    """How the server aggregates (:mod:`flamingo_sim.fl.strategy.aggregators`); unset parameters take the aggregator's default."""

    name: str = "fedavg"  # fedavg | fedprox | fedadam | fedyogi | "pkg.module:Class"
    weighting: Literal["samples", "uniform"] = "samples"  # sample-weighted mean, or the plain mean
    mu: Optional[float] = None  # fedprox: proximal term weight, >= 0
    server_lr: Optional[float] = None  # fedadam/fedyogi: server learning rate, > 0
    beta1: Optional[float] = None  # fedadam/fedyogi: first-moment decay, in [0, 1)
    beta2: Optional[float] = None  # fedadam/fedyogi: second-moment decay, in [0, 1)
    tau: Optional[float] = None  # fedadam/fedyogi: adaptivity (epsilon), > 0

    def __post_init__(self) -> None:
        from flamingo_sim.fl.strategy.parameters import AGGREGATOR_PARAMETERS as PARAMETERS

        checks = {
            "mu": (lambda x: x >= 0, ">= 0"),
            "server_lr": (lambda x: x > 0, "> 0"),
            "beta1": (lambda x: 0 <= x < 1, "in [0, 1)"),
            "beta2": (lambda x: 0 <= x < 1, "in [0, 1)"),
            "tau": (lambda x: x > 0, "> 0"),
        }
        for key, (ok, what) in checks.items():
            value = getattr(self, key)
            if value is not None and not (math.isfinite(value) and ok(value)):
                raise ValueError(f"{key} must be {what}, got {value}")
        if self.name in PARAMETERS:
            allowed = PARAMETERS[self.name]
            extra = [k for k in self.parameters() if k not in allowed]
            if extra:
                takes = ", ".join(allowed) if allowed else "none besides weighting"
                raise ValueError(f"{extra[0]} is not a parameter of {self.name!r} (its parameters: {takes})")
        elif ":" not in self.name:
            raise ValueError(f"name: unknown aggregator {self.name!r} (known: {', '.join(PARAMETERS)}, or 'package.module:Class')")

    def parameters(self) -> dict[str, float]:
        """The aggregator parameters that are set (not None)."""
        return {k: v for k in ("mu", "server_lr", "beta1", "beta2", "tau") if (v := getattr(self, k)) is not None}


@dataclass(frozen=True)
class SelectorConfig:
    """Parameters of the selector named in ``fl.selection`` (:mod:`flamingo_sim.fl.strategy.selection`); unset ones take its default."""

    floor: Optional[float] = None  # battery: weight of a client at the offline threshold, in (0, 1]
    exploration: Optional[float] = None  # oort: share of the slots for never-seen clients, in [0, 1]
    straggler_penalty: Optional[float] = None  # oort: exponent of the system utility, >= 0
    preferred_duration_s: Optional[float] = None  # oort: preferred round duration T (unset: median reported), > 0

    def __post_init__(self) -> None:
        checks = {
            "floor": (lambda x: 0 < x <= 1, "in (0, 1]"),
            "exploration": (lambda x: 0 <= x <= 1, "in [0, 1]"),
            "straggler_penalty": (lambda x: x >= 0, ">= 0"),
            "preferred_duration_s": (lambda x: x > 0, "> 0"),
        }
        for key, (ok, what) in checks.items():
            value = getattr(self, key)
            if value is not None and not (math.isfinite(value) and ok(value)):
                raise ValueError(f"{key} must be {what}, got {value}")

    def parameters(self) -> dict[str, float]:
        """The selector parameters that are set (not None)."""
        return {k: v for k in ("floor", "exploration", "straggler_penalty", "preferred_duration_s") if (v := getattr(self, k)) is not None}


@dataclass(frozen=True)
class FedBuffConfig:
    """``fl.mode: fedbuff`` (:mod:`flamingo_sim.fl.sim.fedbuff`); a "round" is one server update."""

    buffer_size: int = 10  # M: client updates per server update
    concurrency: Optional[int] = None  # clients training at once; unset: ceil(K x overcommit)
    staleness_exponent: float = 0.5  # weight (1 + staleness) ** -exponent
    server_lr: float = 1.0  # global += server_lr * mean of weighted deltas
    retry_s: float = 60.0  # a slot with nobody to run (or a declined request) is retried this much later

    def __post_init__(self) -> None:
        if self.buffer_size < 1:
            raise ValueError(f"buffer_size must be >= 1, got {self.buffer_size}")
        if self.concurrency is not None and self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")
        if not (math.isfinite(self.staleness_exponent) and self.staleness_exponent >= 0):
            raise ValueError(f"staleness_exponent must be >= 0, got {self.staleness_exponent}")
        if not (math.isfinite(self.server_lr) and self.server_lr > 0):
            raise ValueError(f"server_lr must be > 0, got {self.server_lr}")
        if not (math.isfinite(self.retry_s) and self.retry_s > 0):
            raise ValueError(f"retry_s must be > 0, got {self.retry_s}")


@dataclass(frozen=True)
class TrackingConfig:
    """Optional logging of every round's metrics (:mod:`flamingo_sim.fl.runner.tracking`)."""

    tensorboard: bool = False  # event files in RUN/tensorboard/<policy>-seed<k>/
    mlflow: bool = False  # one MLflow run per (policy, seed)
    mlflow_tracking_uri: Optional[str] = None  # default: an SQLite store, RUN/mlflow.db
    mlflow_experiment: Optional[str] = None  # default: the experiment's name


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


@dataclass(frozen=True)
class ExperimentConfig:
    name: str
    description: str = ""
    model: str = "mobilenet_v2"  # the DNN whose device profiles price every local step
    traces: TracesConfig = field(default_factory=TracesConfig)
    phones: PhonesConfig = field(default_factory=PhonesConfig)
    data: DataConfig = field(default_factory=DataConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    fl: FLConfig = field(default_factory=FLConfig)
    aggregation: AggregationConfig = field(default_factory=AggregationConfig)
    selector: SelectorConfig = field(default_factory=SelectorConfig)  # parameters of fl.selection
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    fedbuff: FedBuffConfig = field(default_factory=FedBuffConfig)  # used with fl.mode: fedbuff
    # a number in (0, 1], "highest" (the paper's words, "the highest achieved by either": the higher of
    # the policies' bests, which a weaker policy may never reach), or "highest_common" (one reading of
    # them: the highest accuracy every policy reaches, the lower of the bests, so every policy has a time)
    target_accuracy: Union[float, Literal["highest", "highest_common"]] = "highest_common"
    #: how time to target_accuracy is read: the curve (smoothed or raw) and the margin below a computed target
    target: TargetConfig = field(default_factory=TargetConfig)
    policies: list[str] = field(default_factory=lambda: ["baseline", "flamingo"])  # names or "pkg.mod:Class"
    policy: PolicyConfig = field(default_factory=PolicyConfig)  # parameters every policy is built with
    seeds: list[int] = field(default_factory=lambda: [0])
    checkpoint_every: int = 10  # rounds between checkpoints (and metrics.parquet rewrites)

    def __post_init__(self) -> None:
        if not self.name or self.name != self.name.strip() or any(c in self.name for c in "/\\\0"):
            raise FieldError("name", "a non-empty name without slashes (it names the run directory)", self.name)
        if not self.model:
            raise FieldError("model", "the name of a profiled DNN model, e.g. mobilenet_v2", self.model)
        check_ranges(self, checkpoint_every=">= 1", seeds=">= 0")
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
        if self.fl.mode == "fedbuff" and self.aggregation != AggregationConfig():
            raise ValueError("aggregation: fl.mode 'fedbuff' updates the server with FedBuff's own step (fedbuff.server_lr); leave aggregation at its default")
        from flamingo_sim.fl.strategy.selection import PARAMETERS as SELECTOR_PARAMETERS

        allowed = SELECTOR_PARAMETERS.get(self.fl.selection)
        extra = [k for k in self.selector.parameters() if allowed is not None and k not in allowed]
        if extra:
            takes = ", ".join(allowed) if allowed else "none"
            raise ValueError(f"selector.{extra[0]}: not a parameter of selection {self.fl.selection!r} (its parameters: {takes})")


def load_experiment(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> ExperimentConfig:
    """Load and validate an experiment YAML, with ``--set`` overrides applied first."""
    return load_config(ExperimentConfig, path, overrides)


def resolve_path(value: Path, experiment_path: str | Path | None) -> Path:
    """Find a path named in a config: as given, beside the experiment (or in its parent), or among the shipped data."""
    if value.is_absolute() or value.exists():
        return value
    candidates = []
    if experiment_path is not None:
        exp_dir = Path(experiment_path).resolve().parent
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
