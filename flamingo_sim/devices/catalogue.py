"""A search path of profile directories: the user's measured profiles, then the shipped ones.

Each directory has the layout of the shipped ``profiles/`` (``phones.yaml``, optional
``phones.d/*.yaml``, ``<phone>/<model>.yaml``). A phone or a profile found in an earlier
directory hides one of the same name in a later directory, so a user's measurement of a phone
takes precedence over the shipped, calibrated one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from flamingo_sim.devices.profiles import Profile, ProfileSet, load_profile, profile_path
from flamingo_sim.devices.soc import PHONES_DIR, PHONES_FILE, Phone, load_phones
from flamingo_sim.errors import ConfigError

__all__ = ["ProfileDirs"]


@dataclass(frozen=True)
class ProfileDirs:
    """Profile directories in search order (see the module docstring)."""

    dirs: tuple[Path, ...]

    @classmethod
    def of(cls, dirs: Sequence[str | Path]) -> "ProfileDirs":
        """The directories in order, each once (the first occurrence kept)."""
        seen: list[Path] = []
        for d in map(Path, dirs):
            if not any(_same(d, s) for s in seen):
                seen.append(d)
        return cls(tuple(seen))

    def phones(self) -> dict[str, Phone]:
        """Every phone of every directory's catalogue; the first directory naming a phone wins."""
        out: dict[str, Phone] = {}
        for d in self.dirs:
            if (d / PHONES_FILE).is_file() or (d / PHONES_DIR).is_dir():
                for name, phone in load_phones(d).items():
                    out.setdefault(name, phone)
        return out

    def find(self, phone: str, model: str, profile_set: str = "paper") -> Path | None:
        """The first directory with the profile of ``phone`` for ``model`` in ``profile_set``
        (:func:`~flamingo_sim.devices.profiles.profile_path`), or None."""
        return next((d for d in self.dirs if profile_path(d, phone, model, profile_set).is_file()), None)

    def path(self, phone: str, model: str, profile_set: str = "paper") -> Path:
        """The file of the profile of ``phone`` for ``model`` that the search finds."""
        where = self.find(phone, model, profile_set)
        if where is None:
            raise ConfigError(f"{self}: no profile for phone {phone!r} and model {model!r} in profile set {profile_set!r}")
        return profile_path(where, phone, model, profile_set)

    def models(self) -> list[str]:
        """The DNN models profiled for at least one phone of the catalogue, sorted."""
        names = set(self.phones())
        return sorted({f.stem for d in self.dirs for f in d.glob("*/*.yaml") if f.parent.name in names})

    def load(self, phone: str, model: str, phones: dict[str, Phone] | None = None, profile_set: str = "paper") -> Profile:
        """The profile of ``phone`` for ``model`` (in ``profile_set``) from the first directory that has one."""
        phones = phones if phones is not None else self.phones()
        if phone not in phones:
            raise ConfigError(f"{self}: unknown phone {phone!r} (known: {', '.join(sorted(phones))})")
        self.path(phone, model, profile_set)  # a clear error when no directory has it
        root = self.find(phone, model, profile_set)
        assert root is not None  # path() found it
        return load_profile(root, phones[phone], model, profile_set=profile_set)

    def load_set(self, phones: Sequence[str], model: str, profile_set: str = "paper") -> ProfileSet:
        """A :class:`ProfileSet` of ``model`` for ``phones`` (row order kept) from ``profile_set``."""
        catalogue = self.phones()
        profs = tuple(self.load(name, model, catalogue, profile_set) for name in phones)
        try:
            return ProfileSet(model, tuple(phones), profs)
        except ValueError as exc:
            raise ConfigError(f"{self}: {exc}") from None

    def __str__(self) -> str:
        return " + ".join(str(d) for d in self.dirs) or "(no profile directories)"


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b
