"""The readings the paper leaves to its reader, as one named setting each (``--readings paper``).

Flamingo (Singapuram et al., DistributedML '23) decides some of its large-scale evaluation's
choices in words and leaves others open. :data:`READINGS` lists those the paper's text decides,
with the paper's words, the simulator's default and why it differs; :data:`SILENT` the choices
the paper does not make at all (the simulator's own, as knobs). ``--readings paper`` on ``run``
and ``reproduce`` sets every reading of :data:`READINGS` to the paper's text
(:func:`readings_overrides`); ``--readings default`` (the default) changes nothing, so a run
without the option is the simulator's default, bit for bit.

A reading is a config key (``policy.exploration``, ...), switched by a ``--set`` override before
the user's own. ``rerun`` says whether switching it needs new runs (it changes what the
simulation does) or only a new reading of the same metrics (the target rule).

Exploration is read two ways by the paper itself: section 5.1's profiles "benchmarked" before the
evaluation (``none``, the ``paper`` setting) and Appendix B's explore-then-share (the first client
of a phone model benchmarks it, then every other client reuses the profile: ``packed`` with
sharing, the default). ``reproduce --readings paper`` runs and reports both
(:data:`EXPLORE_THEN_SHARE`).

Table 3's comparison is no reading: the paper compares Flamingo "against the Energy-Aware
Scheduler", which is PyTorch's default as stock Android (EAS) schedules it, the ``baseline``
policy under the ``android`` interference model (:mod:`flamingo_sim.devices.scheduling`), in
every setting.
"""

from __future__ import annotations

from dataclasses import dataclass

from flamingo_sim.errors import ConfigError

__all__ = ["Reading", "READINGS", "SILENT", "READING_SETS", "EXPLORE_THEN_SHARE", "readings_overrides", "config_overrides"]


@dataclass(frozen=True)
class Reading:
    """One choice the paper's text decides, the simulator's default, and why they differ."""

    name: str  # short name (the attribution's step)
    key: str  # config key, or reproduce.<key>
    paper: str  # the value that reads the paper's text
    default: str  # the simulator's default value
    words: str  # the paper's words
    section: str  # where the paper says it
    why: str  # why the simulator's default is what it is
    rerun: bool  # switching it changes the simulation (True) or only how its metrics are read (False)

    def override(self, value: str) -> str:
        return f"{self.key}={value}"


#: The readings the paper's text decides, in the order the attribution walks them (the target first: under the paper's
#: 'highest' the weaker policy may never reach it, and every later step has a defined ratio).
READINGS: tuple[Reading, ...] = (
    Reading("target", "target_accuracy", "highest", "highest_common",
            "\"We set the target accuracy to be the highest achieved by either the baseline or Flamingo\"",
            "5.1 (Metrics)",
            "the highest accuracy both policies reach, so both have a time to it (under 'highest' the weaker policy may "
            "never reach the target and the ratio has no value)",
            False),
    Reading("exploration", "policy.exploration", "none", "packed",
            "exploration \"can be eliminated by leveraging the central coordinator(s)\"; \"We benchmark (see App B) the energy "
            "usage and latency for each DL model on 5 mobile-devices ... to obtain their performance profiles\" and \"emulate "
            "device behavior\"",
            "4.2, 5.1",
            "the profiles are discovered in the run, so the one-time cost of discovering them on the fleet is charged to "
            "Flamingo and visible (the report prints it); the paper's large-scale runs started from benchmarked profiles",
            True),
    Reading("charge_state", "traces.charge_state", "level", "charger",
            "\"we set the battery_state to reflect whether the battery is charging(1), not discharging(0), or discharging(-1). "
            "This depends on the sign of the difference between the current battery_level and the previous\"",
            "appendix A.2",
            "a phone held full on the charger is powered by the charger, as the trace's plug column says; from level changes "
            "only it counts as unplugged, so its training draws on the battery budget and Flamingo treats it as unplugged",
            True),
    Reading("runtime", "policy.interference.runtime", "libomp", "pthreadpool",
            "\"PyTorch 1.8.1 ... built in Termux\" with OpenMP: Termux's clang links LLVM's OpenMP (libomp), whose idle "
            "threads spin KMP_BLOCKTIME (200 ms by default) at a barrier, then sleep",
            "appendix B",
            "an app ships PyTorch's Android build, which runs operators on pthreadpool (scripts/build_android.sh: "
            "USE_OPENMP=OFF), whose idle workers spin about a millisecond, then sleep; the paper measured its own Termux build",
            True),
    Reading("curve", "target.curve", "raw", "smoothed",
            "the text reads the accuracy as measured (no smoothing is mentioned)",
            "5.1 (Metrics)",
            "the mean of the last 3 evaluations, so that one lucky evaluation cannot move the time to target",
            False),
    Reading("margin", "target.margin", "0", "0.01",
            "the target is \"the highest achieved\" (no margin below it is mentioned)",
            "5.1 (Metrics)",
            "a computed target 0.01 below the best, so that a policy need not match its own best evaluation to the sample",
            False),
)

#: Choices the paper does not make at all (the simulator's own, knobs): key -> (default, what it is).
SILENT: dict[str, tuple[str, str]] = {
    "fl.participants_per_round": ("100", "K, the participants a round keeps"),
    "fl.overcommit": ("1.3", "over-commitment: ceil(K x 1.3) selected, the K fastest kept (FedScale's rule)"),
    "fl.local_steps": ("20", "local steps per round"),
    "phones.mix": ("equal shares of the five phones", "the phone mix of the fleet"),
    "policy.min_battery_pct": ("30", "the battery level below which Flamingo declines while the phone is in use"),
    "traces.min_pct": ("10", "the energy threshold below which a client is offline (the paper: \"a minimum threshold\")"),
    "policy.interference": ("android: Android's scheduling of the two apps on each phone's cpusets, training a foreground "
                            "service, the owner's app 2 busy threads", "the interference model"),
}

#: The named settings: name -> reading name -> value (every reading of :data:`READINGS`).
READING_SETS: dict[str, dict[str, str]] = {
    "default": {r.name: r.default for r in READINGS},
    "paper": {r.name: r.paper for r in READINGS},
}


def _check(name: str) -> dict[str, str]:
    if name not in READING_SETS:
        raise ConfigError(f"--readings: expected one of {', '.join(READING_SETS)}, got {name!r}")
    return READING_SETS[name]


def readings_overrides(name: str) -> tuple[str, ...]:
    """The ``--set`` overrides of the named setting: every reading whose value differs from the default
    (none for ``default``, so a run without ``--readings`` is unchanged)."""
    values = _check(name)
    return tuple(r.override(values[r.name]) for r in READINGS if values[r.name] != r.default)


def config_overrides(values: dict[str, str]) -> tuple[str, ...]:
    """The ``--set`` overrides of a mix of readings (reading name -> value), default values left out."""
    by_name = {r.name: r for r in READINGS}
    return tuple(by_name[n].override(v) for n, v in values.items() if v != by_name[n].default)


#: The paper's readings with Appendix B's explore-then-share instead of section 5.1's benchmarked profiles.
EXPLORE_THEN_SHARE = config_overrides({**READING_SETS["paper"], "exploration": READING_SETS["default"]["exploration"]})
