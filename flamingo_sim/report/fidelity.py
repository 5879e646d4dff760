"""``flamingo-sim fidelity``: the shipped profiles against a user's measured ones.

``flamingo-sim profile`` measures a Linux or Termux device into a profiles directory
(``<dir>/<phone>/<model>.yaml``, and the machine's catalogue entry). For every measured profile
whose phone has a shipped counterpart (the same name, or one given with ``--as MEASURED=SHIPPED``),
:func:`compare_profiles` lines up, per execution choice, the simulator's step latency and step
energy (the shipped profile) beside the measured ones, with the relative error
``(simulated - measured) / measured``, and the profile's own ratios (Table 1: speedup and energy
efficiency of the fastest viable choice over the baseline).

With ``--headline`` :func:`headline_change` runs an experiment twice, once on the shipped
profiles and once with the measured ones in their place (written, renamed to the shipped phone,
into a temporary profiles directory searched first), and reports how the headline (time and
energy to the target, speedup, energy efficiency, clients lost) moves.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from flamingo_sim.config import load_yaml
from flamingo_sim.devices.catalogue import ProfileDirs
from flamingo_sim.devices.profiles import PROFILE_SCHEMA, Profile, save_profile
from flamingo_sim.errors import ConfigError

__all__ = ["ChoiceFidelity", "ProfileFidelity", "find_measured", "compare_profiles", "format_fidelity", "check_headline", "headline_change", "run_headline",
           "HeadlinePlan", "parse_as"]


@dataclass(frozen=True)
class ChoiceFidelity:
    """One execution choice: simulated (shipped) and measured step latency and energy."""

    label: str
    sim_latency_s: float
    measured_latency_s: float
    sim_energy_j: float | None
    measured_energy_j: float | None

    @property
    def latency_error(self) -> float:
        return (self.sim_latency_s - self.measured_latency_s) / self.measured_latency_s

    @property
    def energy_error(self) -> float | None:
        if self.sim_energy_j is None or self.measured_energy_j is None:
            return None
        return (self.sim_energy_j - self.measured_energy_j) / self.measured_energy_j


@dataclass(frozen=True)
class ProfileFidelity:
    """A measured profile against the shipped one of its phone."""

    measured_file: Path
    shipped_phone: str
    model: str
    choices: tuple[ChoiceFidelity, ...]
    sim_speedup: float
    measured_speedup: float
    sim_energy_efficiency: float | None
    measured_energy_efficiency: float | None
    only_measured: tuple[str, ...]  # choices the shipped profile lacks
    only_shipped: tuple[str, ...]  # choices the measurement lacks


def parse_as(items: Sequence[str]) -> dict[str, str]:
    """``["my_phone=pixel_3"]`` -> ``{"my_phone": "pixel_3"}``; a malformed item is a one-line ConfigError."""
    out: dict[str, str] = {}
    for item in items:
        measured, sep, shipped = item.partition("=")
        if not sep or not measured.strip() or not shipped.strip():
            raise ConfigError(f"--as {item!r}: expected MEASURED=SHIPPED, for example local_pi=pixel_3")
        out[measured.strip()] = shipped.strip()
    return out


def find_measured(measured_dir: Path, models: Sequence[str] = ()) -> list[Path]:
    """The profile files under ``measured_dir`` (``<phone>/<model>.yaml``, ``provenance: measured``)."""
    if not measured_dir.is_dir():
        raise ConfigError(f"{measured_dir}: not a directory (expected a profiles directory written by flamingo-sim profile)")
    found = []
    for path in sorted(measured_dir.glob("*/*.yaml")):
        doc = load_yaml(path)
        if doc.get("schema") != PROFILE_SCHEMA or doc.get("provenance") != "measured":
            continue
        if models and path.stem not in models:
            continue
        found.append(path)
    if not found:
        raise ConfigError(f"{measured_dir}: no measured profile (<phone>/<model>.yaml with provenance: measured"
                          + (f", model {', '.join(models)}" if models else "") + ")")
    return found


def compare_profiles(measured_dir: Path, shipped_dir: Path, as_phone: dict[str, str], profile_set: str = "paper",
                     models: Sequence[str] = ()) -> list[ProfileFidelity]:
    """Every measured profile of ``measured_dir`` against its shipped counterpart (module docstring)."""
    measured_dirs = ProfileDirs.of([measured_dir, shipped_dir])
    measured_phones = measured_dirs.phones()
    shipped = ProfileDirs.of([shipped_dir])
    shipped_phones = shipped.phones()
    out = []
    for path in find_measured(measured_dir, models):
        phone, model = path.parent.name, path.stem
        target = as_phone.get(phone, phone)
        if target not in shipped_phones:
            raise ConfigError(f"{path}: phone {phone!r} has no shipped counterpart; name one with --as {phone}=SHIPPED "
                              f"(shipped: {', '.join(sorted(shipped_phones))})")
        if phone not in measured_phones:
            raise ConfigError(f"{path}: phone {phone!r} is in no catalogue of {measured_dir} (phones.yaml or phones.d/)")
        meas = ProfileDirs.of([measured_dir]).load(phone, model, measured_phones)
        sim = shipped.load(target, model, shipped_phones, profile_set)
        out.append(_compare(path, target, sim, meas))
    return out


def _compare(path: Path, target: str, sim: Profile, meas: Profile) -> ProfileFidelity:
    by_label = {c.label: c for c in sim.all_choices}
    rows = []
    for c in meas.all_choices:
        s = by_label.get(c.label)
        if s is not None:
            rows.append(ChoiceFidelity(c.label, s.step_latency_s, c.step_latency_s, s.step_energy_j, c.step_energy_j))
    measured_labels = {c.label for c in meas.all_choices}
    return ProfileFidelity(
        measured_file=path, shipped_phone=target, model=meas.model, choices=tuple(rows),
        sim_speedup=sim.speedup, measured_speedup=meas.speedup,
        sim_energy_efficiency=sim.energy_efficiency, measured_energy_efficiency=meas.energy_efficiency,
        only_measured=tuple(c.label for c in meas.all_choices if c.label not in by_label),
        only_shipped=tuple(c.label for c in sim.all_choices if c.label not in measured_labels),
    )


def _pct(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{100.0 * x:+.1f} %"


def _num(x: float | None, digits: int = 2, unit: str = "") -> str:
    return "-" if x is None else f"{x:.{digits}f}{unit}"


def format_fidelity(results: Sequence[ProfileFidelity]) -> str:
    """The comparison as fixed-width tables, one per measured profile."""
    lines: list[str] = []
    for r in results:
        lines.append(f"{r.measured_file} against the shipped {r.shipped_phone}/{r.model} (error = (simulated - measured) / measured)")
        head = f"{'choice':<8} {'sim s/step':>10} {'meas s/step':>11} {'error':>9} {'sim J/step':>10} {'meas J/step':>11} {'error':>9}"
        lines += [head, "-" * len(head)]
        for c in r.choices:
            lines.append(f"{c.label:<8} {c.sim_latency_s:>10.3f} {c.measured_latency_s:>11.3f} {_pct(c.latency_error):>9} "
                         f"{_num(c.sim_energy_j):>10} {_num(c.measured_energy_j):>11} {_pct(c.energy_error):>9}")
        lines.append(f"Table 1: speedup {r.sim_speedup:.2f}x simulated, {r.measured_speedup:.2f}x measured; energy efficiency "
                     f"{_num(r.sim_energy_efficiency)}x simulated, {_num(r.measured_energy_efficiency)}x measured")
        if r.only_measured:
            lines.append(f"measured only (not an execution choice of {r.shipped_phone}'s profile): {', '.join(r.only_measured)}")
        if r.only_shipped:
            lines.append(f"not measured: {', '.join(r.only_shipped)}")
        lines.append("")
    return "\n".join(lines).rstrip()


@dataclass(frozen=True)
class HeadlinePlan:
    """``--headline``'s runs, checked (:func:`check_headline`) and not started: nothing written yet."""

    experiment: Path
    overrides: tuple[str, ...]
    measured_dir: Path
    as_phone: dict[str, str]
    model: str
    profile_set: str
    out_dir: Path | None


def check_headline(experiment: str | Path, measured_dir: Path, as_phone: dict[str, str], *, overrides: Sequence[str] = (),
                   out_dir: Path | None = None) -> HeadlinePlan:
    """Everything the ``--headline`` runs can refuse, checked before anything is printed or written: the experiment
    and its ``overrides``, each measured phone's shipped counterpart, ``out_dir`` (a directory, its two runs' not
    taken), and the run as :func:`~flamingo_sim.fl.runner.plan.prepare_run` checks it on the shipped profiles (its
    first seed's parts built). The command prints the fidelity table only after this (issue 50: a typo in ``--set``
    came after the whole table)."""
    from flamingo_sim.faults import check_writable
    from flamingo_sim.fl.config import load_experiment
    from flamingo_sim.fl.runner.plan import prepare_run
    from flamingo_sim.fl.runner.rundir import check_run_dir
    from flamingo_sim.resources import find_experiment, shipped

    path = find_experiment(experiment)
    cfg = load_experiment(path, list(overrides))
    shipped_phones = ProfileDirs.of([shipped("profiles")]).phones()
    for found in find_measured(measured_dir, [cfg.model]):
        phone = found.parent.name
        if as_phone.get(phone, phone) not in shipped_phones:
            raise ConfigError(f"{found}: phone {phone!r} has no shipped counterpart; name one with --as {phone}=SHIPPED")
    if out_dir is not None:
        check_writable(out_dir)
        for name in ("run-shipped", "run-measured"):
            check_run_dir(Path(out_dir) / name, cfg, resume=False)
    # the shipped profiles searched alone, as the shipped run searches them (an empty directory first)
    prepare_run(path, [*overrides, f"phones.profiles_dir={shipped('profiles')}"], None, None, resume=False, say=lambda _m: None, writes=False)
    return HeadlinePlan(path, tuple(overrides), measured_dir, dict(as_phone), cfg.model, cfg.phones.profile_set, out_dir)


def headline_change(experiment: str | Path, measured_dir: Path, as_phone: dict[str, str], *, overrides: Sequence[str] = (),
                    out_dir: Path | None = None, log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run ``experiment`` on the shipped profiles and on the measured ones in their place; returns
    both runs' headline per policy and the run directories."""
    return run_headline(check_headline(experiment, measured_dir, as_phone, overrides=overrides, out_dir=out_dir), log=log)


def run_headline(plan: HeadlinePlan, log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The two runs of a checked :class:`HeadlinePlan`: both runs' headline per policy and the run directories."""
    from flamingo_sim.devices.soc import Phone
    from flamingo_sim.fl.runner.run import run_experiment
    from flamingo_sim.resources import shipped

    shipped_dir = shipped("profiles")
    shipped_phones = ProfileDirs.of([shipped_dir]).phones()
    measured_phones = ProfileDirs.of([plan.measured_dir, shipped_dir]).phones()
    base = plan.out_dir if plan.out_dir is not None else Path(tempfile.mkdtemp(prefix="flamingo-fidelity-"))
    replaced_dir, empty_dir = base / "measured-profiles", base / "no-user-profiles"
    empty_dir.mkdir(parents=True, exist_ok=True)
    replaced = []
    for path in find_measured(plan.measured_dir, [plan.model]):
        phone = path.parent.name
        target = plan.as_phone.get(phone, phone)
        meas = ProfileDirs.of([plan.measured_dir]).load(phone, plan.model, measured_phones)
        twin: Phone = shipped_phones[target]
        try:
            renamed = replace(meas, phone=twin)
        except ValueError as exc:
            raise ConfigError(f"{path}: cannot stand in for {target}: {exc}") from None
        save_profile(replaced_dir, renamed, plan.profile_set)
        replaced.append(target)
    runs = {}
    for name, profiles_dir in (("shipped", empty_dir), ("measured", replaced_dir)):
        result = run_experiment(plan.experiment, out_dir=base / f"run-{name}", log=log,
                                overrides=[*plan.overrides, f"phones.profiles_dir={profiles_dir}"])
        runs[name] = {"run_dir": str(result.out_dir), "policies": {
            p: {k: e.get(k) for k in ("time_to_target_s", "energy_to_target_j", "speedup", "energy_efficiency", "clients_lost")}
            for p, e in result.summary["policies"].items()}}
    return {"replaced": replaced, **runs}


def format_headline(change: dict[str, Any]) -> str:
    lines = [f"headline with the measured profiles in place of the shipped ones for {', '.join(change['replaced'])}:"]
    head = f"{'policy':<10} {'profiles':<9} {'time to target':>15} {'energy to target':>17} {'speedup':>8} {'energy eff':>10} {'lost':>6}"
    lines += [head, "-" * len(head)]
    for policy in change["shipped"]["policies"]:
        for name in ("shipped", "measured"):
            e = change[name]["policies"].get(policy, {})
            t, j = e.get("time_to_target_s"), e.get("energy_to_target_j")
            lines.append(f"{policy:<10} {name:<9} {_num(None if t is None else t / 3600, 2, ' h'):>15} "
                         f"{_num(None if j is None else j / 1000, 1, ' kJ'):>17} {_num(e.get('speedup'), 2, 'x'):>8} "
                         f"{_num(e.get('energy_efficiency'), 2, 'x'):>10} {_num(e.get('clients_lost'), 0):>6}")
    lines.append(f"runs: {change['shipped']['run_dir']} (shipped), {change['measured']['run_dir']} (measured)")
    return "\n".join(lines)
