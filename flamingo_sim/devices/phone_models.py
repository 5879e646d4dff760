"""Each trace's real phone: GreenHub device models -> phones of the catalogue (``phones.mix: from_traces``).

The table (``profiles/phone_models.yaml``, documented in the file) holds ordered rules of
case-insensitive glob patterns on the device model; a rule names a catalogue phone or an SoC
class (``soc_classes`` names the phone that plays each class); unmatched or unknown models play
``fallback``. :func:`map_trace_phones` gives every trace client its phone and a report of how
many devices and clients each rule matched.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

import numpy as np

from flamingo_sim.config import from_mapping, load_yaml
from flamingo_sim.errors import ConfigError

__all__ = ["ModelRule", "PhoneModelTable", "load_phone_models", "map_trace_phones", "FALLBACK_RULE"]

#: The rule name reported for devices no rule matches (or without a known model).
FALLBACK_RULE = "fallback"


@dataclass(frozen=True)
class ModelRule:
    name: str
    patterns: list[str]
    phone: Optional[str] = None  # a catalogue phone ...
    soc: Optional[str] = None  # ... or an SoC class of ``soc_classes``

    def __post_init__(self) -> None:
        if (self.phone is None) == (self.soc is None):
            raise ValueError(f"rule {self.name!r}: give exactly one of phone, soc")
        if not self.patterns:
            raise ValueError(f"rule {self.name!r}: give at least one pattern")

    def matches(self, model: str) -> bool:
        m = model.strip().lower()
        return any(fnmatch.fnmatchcase(m, p.strip().lower()) for p in self.patterns)


@dataclass(frozen=True)
class PhoneModelTable:
    rules: list[ModelRule]
    fallback: str
    soc_classes: dict[str, str] = field(default_factory=dict)  # SoC class -> catalogue phone

    def __post_init__(self) -> None:
        names = [r.name for r in self.rules]
        twice = sorted({n for n in names if names.count(n) > 1} | ({FALLBACK_RULE} & set(names)))
        if twice:
            raise ValueError(f"rules: rule name {twice[0]!r} used twice (or reserved)")
        for r in self.rules:
            if r.soc is not None and r.soc not in self.soc_classes:
                raise ValueError(f"rules: rule {r.name!r}: soc {r.soc!r} is not under soc_classes (known: {', '.join(self.soc_classes) or 'none'})")

    def phone_of_rule(self, rule: ModelRule) -> str:
        return rule.phone if rule.phone is not None else self.soc_classes[rule.soc]  # type: ignore[index]

    def classify(self, model: str | None) -> tuple[str, str]:
        """``(rule name, phone)`` of a device ``model`` (``None``: unknown, the fallback)."""
        if model is not None and model.strip():
            for rule in self.rules:
                if rule.matches(model):
                    return rule.name, self.phone_of_rule(rule)
        return FALLBACK_RULE, self.fallback


def load_phone_models(path: str | Path, catalogue: Mapping[str, Any]) -> PhoneModelTable:
    """Read and check a mapping table against ``catalogue`` (phone name -> :class:`~flamingo_sim.devices.soc.Phone`)."""
    table = from_mapping(PhoneModelTable, load_yaml(path), source=str(path))
    known = ", ".join(sorted(catalogue))
    for r in table.rules:
        if r.phone is not None and r.phone not in catalogue:
            raise ConfigError(f"{path}: rules: rule {r.name!r}: unknown phone {r.phone!r} (known: {known})")
    for soc, phone in table.soc_classes.items():
        if phone not in catalogue:
            raise ConfigError(f"{path}: soc_classes.{soc}: unknown phone {phone!r} (known: {known})")
        if catalogue[phone].soc.name != soc:
            raise ConfigError(f"{path}: soc_classes.{soc}: phone {phone!r} has SoC {catalogue[phone].soc.name!r}, not {soc!r}")
    if table.fallback not in catalogue:
        raise ConfigError(f"{path}: fallback: unknown phone {table.fallback!r} (known: {known})")
    return table


def map_trace_phones(
    table: PhoneModelTable, device_ids: np.ndarray, models: Mapping[int, str | None], client_device: np.ndarray,
    n_fl_clients: int,
) -> tuple[np.ndarray, tuple[str, ...], dict[str, Any]]:
    """Phones of the trace clients, and the mapping report.

    ``device_ids`` are the trace set's devices, ``client_device`` each trace client's row into
    them; FL client ``i`` replays trace client ``i mod n_trace_clients`` (see
    :mod:`flamingo_sim.fl.sim.population`). Returns ``(phone index per trace client, phone names,
    report)``; phone names are in order of first use by a device. The report counts, per rule
    (in table order, then ``fallback``), the phone it gives, the devices and FL clients it
    matched and the models seen; ``phones`` counts FL clients per phone.
    """
    rule_of_dev, phone_of_dev, names = [], [], []
    for d in device_ids.tolist():
        rule, phone = table.classify(models.get(int(d)))
        rule_of_dev.append(rule)
        phone_of_dev.append(phone)
        if phone not in names:
            names.append(phone)
    phone_idx_dev = np.array([names.index(p) for p in phone_of_dev], dtype=np.int64)
    n_trace = client_device.size
    fl_per_trace = np.bincount(np.arange(n_fl_clients) % n_trace, minlength=n_trace) if n_trace else np.zeros(0, np.int64)
    fl_per_dev = np.bincount(client_device, weights=fl_per_trace, minlength=device_ids.size).astype(np.int64)
    rules: dict[str, Any] = {
        r.name: {"phone": table.phone_of_rule(r), "devices": 0, "clients": 0, "models": {}} for r in table.rules
    }
    rules[FALLBACK_RULE] = {"phone": table.fallback, "devices": 0, "clients": 0, "models": {}}
    for i, d in enumerate(device_ids.tolist()):
        entry = rules[rule_of_dev[i]]
        entry["devices"] += 1
        entry["clients"] += int(fl_per_dev[i])
        model = models.get(int(d)) or "(unknown)"
        entry["models"][model] = entry["models"].get(model, 0) + 1
    for entry in rules.values():
        entry["models"] = dict(sorted(entry["models"].items()))
    phones = {p: int(fl_per_dev[phone_idx_dev == k].sum()) for k, p in enumerate(names)}
    report = {"fallback": table.fallback, "rules": rules, "phones": phones}
    return phone_idx_dev[client_device], tuple(names), report
