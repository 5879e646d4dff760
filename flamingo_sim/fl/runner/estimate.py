"""How long a run will take, said before it starts, and the confirmation a long one needs.

A run's work is its local steps: units (policies x seeds) x rounds x the clients trained each
round (``fl.participants_per_round``, or ``fedbuff.buffer_size`` per server update) x
``fl.local_steps``. Up to :data:`MEASURED_FROM` steps (the main job trains 260,000) a run starts
as it always did. From there, one local step of the run's network on a minibatch of
``fl.batch_size`` samples of its first client is timed on the run's device (after a warm-up, the
median of three, on a copy of the model: the run itself is untouched), and the run's wall time
estimated as steps x that time over the units running at once. A run estimated longer than
:data:`LONG_RUN_S` goes on only when confirmed: ``--yes``, or "y" typed at the question a
terminal asks; otherwise it is refused in one line, before anything is written
(``fl.rounds: 1e9``, ``fl.local_steps: 1e9``). The estimate ignores what a round does besides
training (pricing, evaluation; a few per cent in the main job) and the speed-up of training a
cohort as one batch, so it says "about".
"""

from __future__ import annotations

import time
from typing import Any, Callable

from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.config import ExperimentConfig, FLConfig

__all__ = ["LONG_RUN_S", "MEASURED_FROM", "run_steps", "step_seconds", "check_length", "duration_text"]

#: A run estimated longer than this (seconds) needs a confirmation.
LONG_RUN_S = 24 * 3600.0
#: Runs of fewer local steps than this are not timed (the main job trains 100 x 100 x 20 x 2 = 400,000 at most).
MEASURED_FROM = 1_000_000
#: Each factor of the work and its default, to name the one furthest above it.
_FACTORS = {"fl.rounds": FLConfig.rounds, "fl.participants_per_round": FLConfig.participants_per_round,
            "fl.local_steps": FLConfig.local_steps, "fedbuff.buffer_size": 10}


def run_steps(cfg: ExperimentConfig) -> tuple[int, str, str] | None:
    """The run's local steps, how they were counted, and the key furthest above its default; None without ``fl.rounds``
    (a run to ``fl.horizon_h`` has no round count to multiply)."""
    fl = cfg.fl
    if fl.rounds is None:
        return None
    fedbuff = fl.mode == "fedbuff"
    per_round = cfg.fedbuff.buffer_size if fedbuff else fl.participants_per_round
    units = len(cfg.policies) * len(cfg.seeds)
    steps = units * fl.rounds * per_round * fl.local_steps
    who = "updates" if fedbuff else "clients"
    text = f"{fl.rounds:,} rounds x {per_round:,} {who} x {fl.local_steps:,} local steps x {units} runs (policies x seeds) = {steps:.3g} local steps"
    values = {"fl.rounds": fl.rounds, "fl.local_steps": fl.local_steps,
              "fedbuff.buffer_size" if fedbuff else "fl.participants_per_round": per_round}
    key = max(values, key=lambda k: values[k] / float(_FACTORS[k]))  # type: ignore[arg-type]
    return steps, text, key


def step_seconds(model: Any, dataset: Any, batch_size: int, lr: float, device: Any) -> float:
    """Seconds of one local SGD step of ``model`` on ``batch_size`` samples of ``dataset``'s client 0, on ``device``
    (a copy of the model; torch's random state is restored)."""
    import copy
    import statistics

    import torch

    twin = copy.deepcopy(model).to(device)
    x, y = dataset.client_data(0)
    pick = torch.arange(batch_size) % x.shape[0]
    xb, yb = x[pick].to(device), y[pick].to(device)
    opt = torch.optim.SGD(twin.parameters(), lr=lr)
    times = []
    with torch.random.fork_rng(devices=[]):
        for _ in range(4):
            t0 = time.perf_counter()
            loss = torch.nn.functional.cross_entropy(twin(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            times.append(time.perf_counter() - t0)
    return statistics.median(times[1:])


def duration_text(seconds: float) -> str:
    """``seconds`` in the largest unit that reads well: "40 s", "3.2 h", "12 days", "3.1e+04 years"."""
    for unit, size in (("years", 365.25 * 86400), ("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= 2 * size:
            n = seconds / size
            return f"{n:.3g} {unit}" if n < 1e4 else f"{n:.2g} {unit}"
    return f"{seconds:.0f} s"


def check_length(cfg: ExperimentConfig, parts: Any, parallel: int, src: str,
                 confirm: Callable[[str], bool] | None, say: Callable[[str], None]) -> None:
    """Refuse a run estimated longer than :data:`LONG_RUN_S` unless ``confirm(estimate)`` says yes (see the module docstring).

    ``parts``: the first seed's components (model, dataset, the resolved config); ``parallel``: units at once."""
    counted = run_steps(cfg)
    if counted is None or counted[0] < MEASURED_FROM:
        return
    from flamingo_sim.fl.training.device import resolve_device, set_threads

    steps, text, key = counted
    device = resolve_device(cfg.fl.device)
    set_threads(cfg.fl.threads, small_model=cfg.data.root is None)
    step_s = step_seconds(parts.model, parts.dataset, cfg.fl.batch_size, cfg.fl.lr, device)
    wall_s = steps * step_s / max(1, parallel)
    if wall_s <= LONG_RUN_S:
        return
    line = (f"{key}: {text}, about {duration_text(wall_s)} here (one step of {cfg.fl.batch_size} samples measured at "
            f"{step_s * 1e3:.2g} ms on {device}" + (f", {parallel} runs at once" if parallel > 1 else "") + ")")
    if confirm is not None and confirm(line):
        say(f"{line}: confirmed, running")
        return
    raise ConfigError(f"{src}: {line}; more than {duration_text(LONG_RUN_S)}: confirm with --yes, or lower {key}")
