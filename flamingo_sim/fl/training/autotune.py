"""``fl.train_mode: auto`` on a GPU: the fastest strategy that keeps the run's numbers, measured on the run's own model.

On a CUDA device :class:`Tuner` runs once per (GPU, torch, model, input size, batch, steps,
learning rate, precision), in the run's first round, on the first :data:`MEASURE_CLIENTS`
clients of that round's cohort:

1. **The reference and its own rounding.** The per-client loop (``sequential``, the reference
   strategy) trains those clients twice: from the global model, and from the global model with
   every parameter perturbed at float32's unit roundoff (``w * (1 + 2**-24 * N(0, 1))``, fixed
   generator). How far the second lands from the first is the *rounding floor*: how much float32
   rounding alone moves this model's local training (after 20 steps of a BatchNorm network at
   batch 16 it can be most of the update; a stable model barely moves).
2. **The check.** Each candidate (:func:`gpu_candidates`: vmap, vmap + CUDA graph, a CUDA graph
   per client, model copies on 4 streams, the same in ``channels_last``, and vmap + graph in
   bf16 when the run asks for fp32) trains the same clients from the same model; its
   *deviation* is the largest, over the clients, of ``||dw_c - dw_r|| / ||dw_r||``, its update
   ``dw_c`` against the reference's ``dw_r`` (trainable parameters). Dropout is off in the check
   and the floor (every strategy draws its own masks; the check is about arithmetic).
3. **The bound.** A candidate keeps the run's numbers when its deviation is at most
   :data:`BOUND_FACTOR` (4) times the rounding floor: it moves the result no more than float32
   rounding already does. bf16 is a candidate like the others and is taken only where this
   bound holds; a candidate that fails (out of memory, an operation the strategy cannot run) is
   reported, not fatal.
4. **The timing.** Each candidate that passed trains the clients again, warmed up (CUDA graph
   capture, cuDNN's autotuning and vmap's tracing happen in an untimed pass), and the fastest
   per client wins; ties go to the earlier candidate of the list, the loop first.

The choice is logged in one line (which strategy, its time against the loop's, the bound and the
floor it was checked against, the candidates refused and why) and recorded in the run's summary
(``train_mode``), and kept in a JSON cache (:class:`TuneCache`, ``$FLAMINGO_SIM_TUNE_CACHE`` or
``~/.cache/flamingo-sim/train_auto.json``; ``FLAMINGO_SIM_TUNE_CACHE=off`` turns it off) keyed by
all of the above, so the check runs once per GPU: a cached entry is verified (its format, its
key, the chosen candidate among the trials and within the recorded bound) before it is trusted,
and never executed. Whether measured or read from the cache, the round's cohort then trains with
the chosen strategy, so a run's numbers do not depend on which.

On the CPU ``auto`` is :func:`~flamingo_sim.fl.training.trainer.choose_strategy`'s rule, unchanged.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import torch
from torch import Tensor, nn

from flamingo_sim.fl.training.trainer import CohortResult, CohortTask, CohortTrainer, supports_batched

__all__ = ["Candidate", "Trial", "Choice", "Tuner", "TuneCache", "gpu_candidates", "select", "deviation", "make_tuner", "tuner_for",
           "cache_path", "MEASURE_CLIENTS", "BOUND_FACTOR", "PERTURBATION", "CACHE_ENV", "CACHE_FORMAT", "REFERENCE"]

#: Clients of the first round's cohort the candidates are checked and timed on.
MEASURE_CLIENTS = 8
#: A candidate's deviation from the reference may be this many times the reference's own rounding floor.
BOUND_FACTOR = 4.0
#: Relative perturbation of the parameters that measures the rounding floor: float32's unit roundoff.
PERTURBATION = 2.0**-24
#: The environment variable naming the cache file (``off``: no cache).
CACHE_ENV = "FLAMINGO_SIM_TUNE_CACHE"
#: The cache file's format and kind.
CACHE_FORMAT = 1
CACHE_KIND = "flamingo-sim train_mode auto"
#: The reference strategy's candidate name.
REFERENCE = "loop"


@dataclass(frozen=True)
class Candidate:
    """One way to train a cohort: a strategy and its switches (:class:`~flamingo_sim.fl.training.trainer.CohortTrainer`'s)."""

    name: str
    strategy: str
    cuda_graphs: bool = False
    channels_last: bool = False
    precision: str = "fp32"
    max_clients: int | None = None
    n_streams: int = 4

    def trainer(self, model: nn.Module, memory_budget_bytes: int | None = None) -> CohortTrainer:
        """A fresh trainer of ``model`` with these settings (its own CUDA graphs)."""
        return CohortTrainer(model, strategy=self.strategy, precision=self.precision, memory_budget_bytes=memory_budget_bytes,
                             max_batched_clients=self.max_clients, cuda_graphs=self.cuda_graphs, n_streams=self.n_streams,
                             channels_last=self.channels_last)


def _has_conv(model: nn.Module) -> bool:
    return any(isinstance(m, nn.Conv2d) for m in model.modules())


def gpu_candidates(model: nn.Module, precision: str = "fp32") -> list[Candidate]:
    """The candidates for ``model`` on a GPU at the run's ``precision``, the reference (the loop) first.

    bf16 (vmap + CUDA graph under bfloat16 autocast) is a candidate only when the run asks for
    fp32; it is taken only where its deviation keeps to the bound, like every other.
    """
    p = precision
    out = [Candidate(REFERENCE, "sequential", precision=p)]
    if supports_batched(model):
        out += [Candidate("vmap", "vmap", precision=p), Candidate("vmap+graph", "vmap", cuda_graphs=True, precision=p),
                Candidate("graph per client", "vmap", cuda_graphs=True, max_clients=1, precision=p)]
    out.append(Candidate("4 streams", "streams", precision=p))
    if _has_conv(model):
        out.append(Candidate("4 streams channels_last", "streams", channels_last=True, precision=p))
    if p == "fp32" and supports_batched(model):
        out.append(Candidate("vmap+graph bf16", "vmap", cuda_graphs=True, precision="bf16"))
    return out


@dataclass(frozen=True)
class Trial:
    """One candidate measured: seconds per client (timed pass), deviation from the reference, or why it failed."""

    candidate: str
    s_per_client: float | None = None
    deviation: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class Choice:
    """What ``auto`` chose for one (model, input, batch) on one GPU, and on what grounds."""

    candidate: Candidate
    trials: tuple[Trial, ...]
    floor: float
    bound_factor: float
    where: str
    source: str = "measured"
    key: str = ""

    @property
    def bound(self) -> float:
        return self.bound_factor * self.floor

    def _trial(self, name: str) -> Trial | None:
        return next((t for t in self.trials if t.candidate == name), None)

    def refused(self) -> list[str]:
        """Each candidate not taken for a reason other than speed, with that reason."""
        out = []
        for t in self.trials:
            if t.error is not None:
                out.append(f"{t.candidate} ({t.error})")
            elif t.deviation is not None and t.deviation > self.bound:
                out.append(f"{t.candidate} (deviation {t.deviation:.1e} > bound {self.bound:.1e})")
        return out

    def why(self) -> str:
        """Why this candidate: its time against the loop's and how many passed."""
        mine, loop = self._trial(self.candidate.name), self._trial(REFERENCE)
        passed = [t for t in self.trials if t.error is None and t.deviation is not None and t.deviation <= self.bound]
        speed = ""
        if mine is not None and mine.s_per_client and loop is not None and loop.s_per_client:
            speed = f"{mine.s_per_client:.4g} s per client, {loop.s_per_client / mine.s_per_client:.2f}x the per-client loop; "
        return f"{speed}fastest of the {len(passed)} of {len(self.trials)} candidates within the bound"

    def line(self) -> str:
        """The log line: the choice, why, the bound it was checked against, what was refused."""
        bound = (f"bound: update deviation from the per-client loop <= {self.bound_factor:g} x float32 rounding's own "
                 f"({self.floor:.1e} -> {self.bound:.1e}), checked on {self.where}")
        refused = self.refused()
        source = "" if self.source == "measured" else f" [{self.source}]"
        return (f"train_mode auto: {self.candidate.name} ({self.why()}); {bound}"
                + (f"; refused: {', '.join(refused)}" if refused else "") + source)

    def record(self) -> dict[str, Any]:
        """What the run's summary keeps (``train_mode``)."""
        return {"chosen": self.candidate.name, "settings": asdict(self.candidate), "why": self.why(),
                "bound": {"rule": f"update deviation from the per-client loop <= {self.bound_factor:g} x float32 rounding's own",
                          "floor": self.floor, "factor": self.bound_factor, "value": self.bound},
                "checked_on": self.where, "source": self.source, "refused": self.refused(),
                "trials": [asdict(t) for t in self.trials]}


def select(trials: Sequence[Trial], candidates: Sequence[Candidate], floor: float, bound_factor: float = BOUND_FACTOR, *,
           where: str = "", source: str = "measured", key: str = "") -> Choice:
    """The fastest candidate whose deviation keeps to ``bound_factor x floor`` (ties: the earlier candidate).

    The reference (:data:`REFERENCE`) keeps to any bound (its deviation is 0), so there is always a choice.
    """
    by_name = {c.name: c for c in candidates}
    bound = bound_factor * floor
    best: tuple[float, int] | None = None
    chosen = by_name[REFERENCE]
    order = {c.name: i for i, c in enumerate(candidates)}
    for t in trials:
        if t.error is not None or t.s_per_client is None or t.deviation is None or t.deviation > bound or t.candidate not in by_name:
            continue
        rank = (t.s_per_client, order[t.candidate])
        if best is None or rank < best:
            best, chosen = rank, by_name[t.candidate]
    return Choice(chosen, tuple(trials), floor, bound_factor, where, source, key)


def deviation(model: nn.Module, result: CohortResult, reference: CohortResult, start: dict[str, Tensor]) -> float:
    """Largest over the clients of ``||dw - dw_ref|| / ||dw_ref||``, the updates from ``start`` (trainable parameters, float64)."""
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    worst = 0.0
    for i in range(reference.n_clients):
        num = den = 0.0
        for n in names:
            s = start[n].detach().to(reference.params[n].device, torch.float64)
            d_ref = reference.params[n][i].to(torch.float64) - s
            d = result.params[n][i].to(torch.float64) - s
            num += float(((d - d_ref) ** 2).sum())
            den += float((d_ref**2).sum())
        rel = (num**0.5) / (den**0.5) if den > 0 else (0.0 if num == 0 else float("inf"))
        worst = max(worst, rel)
    return worst


def _perturbed(model: nn.Module, state: dict[str, Tensor], seed: int = 0) -> dict[str, Tensor]:
    """``state`` with every trainable parameter times ``1 + PERTURBATION * N(0, 1)`` (a fixed generator on the CPU)."""
    gen = torch.Generator().manual_seed(seed)
    names = {n for n, p in model.named_parameters() if p.requires_grad}
    out = dict(state)
    for n in names:
        v = state[n]
        noise = torch.randn(v.shape, generator=gen, dtype=torch.float64).to(v.device)
        out[n] = (v.to(torch.float64) * (1.0 + PERTURBATION * noise)).to(v.dtype)
    return out


def _dropouts(model: nn.Module) -> list[nn.modules.dropout._DropoutNd]:
    return [m for m in model.modules() if isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0]


@contextlib.contextmanager
def _dropout_off(model: nn.Module) -> Iterator[None]:
    """Every dropout layer of ``model`` at p = 0 (restored on exit): the check compares arithmetic, not masks."""
    layers = _dropouts(model)
    saved = [m.p for m in layers]
    for m in layers:
        m.p = 0.0
    try:
        yield
    finally:
        for m, p in zip(layers, saved):
            m.p = p


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def wall_timer(device: torch.device) -> Callable[[str, Callable[[], Any]], float]:
    """Seconds ``fn()`` takes on ``device`` (synchronised before and after on CUDA)."""

    def timer(_name: str, fn: Callable[[], Any]) -> float:
        _sync(device)
        t0 = time.perf_counter()
        fn()
        _sync(device)
        return time.perf_counter() - t0

    return timer


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def model_key(model: nn.Module) -> str:
    """The model's class, parameter count and a digest of its state's names and shapes."""
    shapes = [(n, tuple(v.shape), str(v.dtype)) for n, v in model.state_dict().items()]
    digest = hashlib.sha256(repr(shapes).encode()).hexdigest()[:16]
    return f"{type(model).__name__} {sum(p.numel() for p in model.parameters())} params {digest}"


def cache_path() -> Path | None:
    """``$FLAMINGO_SIM_TUNE_CACHE`` (``off``: None), else ``$XDG_CACHE_HOME`` or ``~/.cache``, ``flamingo-sim/train_auto.json``."""
    env = os.environ.get(CACHE_ENV, "")
    if env.strip().lower() in ("off", "0", "none"):
        return None
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "flamingo-sim" / "train_auto.json"


class TuneCache:
    """The measured choices, one JSON file (:data:`CACHE_FORMAT`); entries verified when read, written atomically under a lock.

    A file that is not this cache's (unreadable, another format or kind) is never overwritten:
    the choice is then made without a cache and :attr:`note` says why.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.note: str | None = None

    def _read(self) -> dict[str, Any] | None:
        """The file's entries ({} when absent); None when the file is not this cache's (never overwritten then)."""
        if not self.path.exists():
            return {}
        try:
            raw = json.loads(self.path.read_text())
        except (OSError, ValueError) as exc:
            self.note = f"{self.path}: not read ({_one_line(exc)}); left as it is"
            return None
        if not (isinstance(raw, dict) and raw.get("format") == CACHE_FORMAT and raw.get("kind") == CACHE_KIND and isinstance(raw.get("entries"), dict)):
            self.note = f"{self.path}: not a {CACHE_KIND} cache of format {CACHE_FORMAT}; left as it is"
            return None
        return raw["entries"]

    def get(self, key: str, candidates: Sequence[Candidate], bound_factor: float) -> Choice | None:
        """The verified entry for ``key`` as a :class:`Choice` (source ``cache``), else None (absent or not trusted: :attr:`note`)."""
        entries = self._read()
        if not entries or key not in entries:
            return None
        try:
            return _entry_choice(entries[key], key, candidates, bound_factor, self.path)
        except (KeyError, TypeError, ValueError) as exc:
            self.note = f"{self.path}: entry not trusted ({exc}); measuring again"
            return None

    def put(self, choice: Choice) -> None:
        """Add (or replace) ``choice``'s entry; nothing when the file is not this cache's."""
        import fcntl

        from flamingo_sim.io import atomic_path

        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            entries = self._read()
            if entries is None:
                return
            entries[choice.key] = {"chosen": choice.candidate.name, "floor": choice.floor, "bound_factor": choice.bound_factor,
                                   "where": choice.where, "trials": [asdict(t) for t in choice.trials],
                                   "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
            with atomic_path(self.path) as tmp:
                tmp.write_text(json.dumps({"format": CACHE_FORMAT, "kind": CACHE_KIND, "entries": entries}, indent=1) + "\n")


def _number(value: Any, what: str, none: bool = False) -> float | None:
    if value is None and none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value == value or value < 0:
        raise ValueError(f"{what} is {value!r}, expected a number >= 0")
    return float(value)


def _entry_choice(entry: Any, key: str, candidates: Sequence[Candidate], bound_factor: float, path: Path) -> Choice:
    """A cache entry checked field by field against the candidates and the bound of this run."""
    if not isinstance(entry, dict):
        raise ValueError("not an object")
    names = {c.name: c for c in candidates}
    trials = []
    for t in entry["trials"]:
        if not isinstance(t, dict) or not isinstance(t.get("candidate"), str) or t["candidate"] not in names:
            raise ValueError(f"trial {t!r} names no candidate of this run")
        error = t.get("error")
        if error is not None and not isinstance(error, str):
            raise ValueError(f"trial {t['candidate']}: error {error!r}")
        trials.append(Trial(t["candidate"], _number(t.get("s_per_client"), "s_per_client", True), _number(t.get("deviation"), "deviation", True), error))
    floor = _number(entry["floor"], "floor")
    assert floor is not None
    if _number(entry["bound_factor"], "bound_factor") != bound_factor:
        raise ValueError(f"bound factor {entry['bound_factor']!r}, this run's is {bound_factor:g}")
    again = select(trials, candidates, floor, bound_factor, where=str(entry.get("where", "")), source=f"cached in {path}", key=key)
    if again.candidate.name != entry["chosen"]:
        raise ValueError(f"chosen {entry['chosen']!r}, but its trials choose {again.candidate.name!r}")
    return again


@dataclass
class Tuner:
    """Measures the candidates on a run's first cohort and picks one (see the module docstring).

    ``candidates``: reference first (:func:`gpu_candidates`); ``cache``: where choices are kept
    (None: measured every run); ``device_name``: the GPU's name (part of the cache key);
    ``timer(name, fn)``: seconds ``fn()`` takes (default: wall time, synchronised on CUDA);
    ``log``: gets the choice's line and the cache's notes.
    """

    candidates: Sequence[Candidate]
    cache: TuneCache | None = None
    device_name: str = "cpu"
    measure_clients: int = MEASURE_CLIENTS
    bound_factor: float = BOUND_FACTOR
    timer: Callable[[str, Callable[[], Any]], float] | None = None
    log: Callable[[str], None] = field(default=lambda _m: None)

    def key(self, model: nn.Module, task: CohortTask) -> str:
        shape = "x".join(map(str, task.client_datas[0][0].shape[1:]))
        names = ",".join(c.name for c in self.candidates)
        return (f"{self.device_name} | torch {torch.__version__} | {model_key(model)} | input {shape} | batch {task.batch_size} | "
                f"steps {task.n_steps} | lr {task.lr!r} | prox {task.prox_mu!r} | precision {self.candidates[0].precision} | "
                f"clients {self.measure_clients} | candidates {hashlib.sha256(names.encode()).hexdigest()[:12]}")

    def choose(self, trainer: CohortTrainer, global_params: dict[str, Tensor], task: CohortTask) -> Choice:
        """The candidate for ``trainer``'s model and ``task``'s cohort: from the cache, else measured (and cached)."""
        key = self.key(trainer.model, task)
        choice = self.cache.get(key, self.candidates, self.bound_factor) if self.cache is not None else None
        if self.cache is not None and self.cache.note:
            self.log(f"train_mode auto: {self.cache.note}")
            self.cache.note = None
        if choice is None:
            trials, floor, where = self.measure(trainer, global_params, task)
            choice = select(trials, self.candidates, floor, self.bound_factor, where=where, key=key)
            if self.cache is not None:
                self.cache.put(choice)
                if self.cache.note:
                    self.log(f"train_mode auto: {self.cache.note} (the choice was not cached)")
                    self.cache.note = None
        self.log(choice.line())
        return choice

    def measure(self, trainer: CohortTrainer, global_params: dict[str, Tensor], task: CohortTask) -> tuple[list[Trial], float, str]:
        """Every candidate checked against the reference and timed; the trials, the rounding floor and where it was measured."""
        model, budget = trainer.model, trainer.memory_budget_bytes
        k = min(len(task.client_ids), max(1, self.measure_clients))
        sub = replace(task, client_datas=list(task.client_datas[:k]), client_ids=list(task.client_ids[:k]))
        start = trainer.start_state(global_params)
        timer = self.timer or wall_timer(trainer.device)
        dropout = bool(_dropouts(model))
        ref, *others = self.candidates
        with _dropout_off(model):
            ref_trainer = ref.trainer(model, budget)
            floor_result = ref_trainer.train(_perturbed(model, start), sub)
            reference = ref_trainer.train(start, sub)
        floor = deviation(model, floor_result, reference, start)
        trials = []
        for cand in (ref, *others):
            try:
                if cand is ref:
                    dev = 0.0
                    timed = ref_trainer
                else:
                    timed = cand.trainer(model, budget)
                    with _dropout_off(model):
                        dev = deviation(model, timed.train(start, sub), reference, start)
                if dropout:  # the check ran without dropout: a fresh trainer (its graphs captured with it) warmed up with it
                    timed = cand.trainer(model, budget)
                    timed.train(start, sub)
                secs = timer(cand.name, partial(timed.train, start, sub))
                trials.append(Trial(cand.name, secs / k, dev))
            except (torch.OutOfMemoryError, RuntimeError, ValueError) as exc:
                trials.append(Trial(cand.name, error=_one_line(exc)))
            finally:
                if trainer.device.type == "cuda":
                    torch.cuda.empty_cache()
        where = f"{k} clients of round {task.round_idx} on {self.device_name}"
        return trials, floor, where


def tuner_for(device: torch.device, train_mode: str, model: nn.Module, precision: str, log: Callable[[str], None]) -> Tuner | None:
    """A run's tuner: :func:`make_tuner` for ``train_mode: auto`` on a CUDA device; None otherwise (the CPU keeps its rule)."""
    if train_mode != "auto" or device.type != "cuda":
        return None
    return make_tuner(device, model, precision, log)


def make_tuner(device: torch.device, model: nn.Module, precision: str, log: Callable[[str], None]) -> Tuner:
    """The tuner of a run on ``device`` (a GPU): :func:`gpu_candidates`, the cache at :func:`cache_path`, the GPU's name."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    where = cache_path()
    return Tuner(gpu_candidates(model, precision), TuneCache(where) if where is not None else None, name, log=log)
