"""Whether a client's training fits its phone's memory, and the largest minibatch that does.

**The limit** (:class:`PhoneMemory`, in the phone catalogue). Android ends processes through its
low-memory killer: when free memory falls below the level of a process's ``oom_adj``, the killer
ends processes at that adj and above. The levels are ``ProcessList.java``'s ``mOomMinFreeHigh``
table for a device with at least 700 MB (AOSP frameworks/base, ``updateOomLevels``), per adj slot
(:data:`LMK_MINFREE_KIB`). So a training app at adj ``a`` may grow until free memory would fall
below its level: its limit is the RAM, less what the system keeps resident (``system_gib``: the
kernel's and the firmware's reserved memory, system_server, SurfaceFlinger, the launcher and the
owner's foreground app, which sit at lower adjs and are not killed first), less that level. The
app state sets the adj (AOSP ``OomAdjuster``): a foreground service ``PERCEPTIBLE_APP_ADJ`` 200, a
background (cached) process 900 and above, the top app 0. Android 12's lmkd reacts to memory
pressure (PSI) rather than fixed levels; the legacy levels are the modelled threshold. A
catalogue entry may give its own ``app_limit_gib`` instead (a measured phone).

**The need.** One client's training of ``fixed + per_sample x batch`` bytes
(:func:`flamingo_sim.fl.sim.limits.training_memory_bytes`: the state four times over, the
activations twice per sample), calibrated at the operating point: times the measured peak over
that estimate for the network at its trained input and batch 16 (:data:`MEASURED_OVER_ESTIMATE`).
:func:`largest_batch` gives the largest batch that fits a limit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flamingo_sim.config import check_ranges

__all__ = ["PhoneMemory", "largest_batch", "GIB", "LMK_MINFREE_KIB", "APP_STATE_ADJ", "SYSTEM_GIB", "MEASURED_OVER_ESTIMATE"]

GIB = float(1 << 30)

#: The low-memory killer's free-memory level (KiB) per oom_adj slot on a device with at least 700 MB: AOSP
#: frameworks/base ProcessList.java, mOomAdj = {FOREGROUND 0, VISIBLE 100, PERCEPTIBLE 200, PERCEPTIBLE_LOW 250,
#: CACHED_APP_MIN 900, CACHED_APP_LMK_FIRST 950} and mOomMinFreeHigh = {73728, 92160, 110592, 129024, 147456,
#: 184320} KiB, the last two raised x1.5 and x1.75 on 64-bit devices (updateOomLevels; 18432 ... 80640 pages of 4 KiB).
LMK_MINFREE_KIB: dict[int, int] = {0: 73728, 100: 92160, 200: 110592, 250: 129024, 900: 147456 * 3 // 2, 950: 184320 * 7 // 4}
#: The training app's state -> its oom_adj (AOSP OomAdjuster): a foreground service PERCEPTIBLE_APP_ADJ, the top app
#: FOREGROUND_APP_ADJ, a background (cached) process CACHED_APP_MIN_ADJ.
APP_STATE_ADJ = {"foreground_service": 200, "top_app": 0, "background": 900}
#: Memory the system keeps resident (GiB): the kernel's and firmware's reserved memory, the system's services and the
#: owner's foreground app. No public per-phone figure exists: an ASSUMPTION, the same on every phone (a knob through
#: devices.memory_limit_factor).
SYSTEM_GIB = 1.5
#: Measured peak resident memory of two training steps at the operating point (the network's trained input, batch
#: 16; x86-64 CPU, PyTorch 2.14.1, one thread, in a fresh process: benchmarks/memory_peaks.py, results file
#: benchmarks/results/memory_peaks_2cores.json) over the structural estimate there.
MEASURED_OVER_ESTIMATE: dict[str, float] = {"mobilenet_v2": 0.6618, "shufflenet_v2_x2": 0.5786, "resnet34": 0.6018}


@dataclass(frozen=True)
class PhoneMemory:
    """A phone model's RAM, and optionally the memory one training app may hold (module docstring)."""

    #: RAM (GiB: the "4 GB" of a phone's specification is 4 GiB of LPDDR) of the base model, the vendor's specification.
    ram_gb: float
    #: Memory (GiB) one training app may hold, where it was measured; null: derived from the low-memory killer's level.
    app_limit_gib: float | None = None
    #: Memory (GiB) the system keeps resident (the kernel and firmware, system services, the owner's app).
    system_gib: float = SYSTEM_GIB

    def __post_init__(self) -> None:
        check_ranges(self, ram_gb="> 0", app_limit_gib="> 0", system_gib=">= 0")
        if self.app_limit_gib is not None and self.app_limit_gib > self.ram_gb:
            raise ValueError(f"app_limit_gib ({self.app_limit_gib}) must not exceed ram_gb ({self.ram_gb})")
        if self.app_limit_gib is None and self.limit_bytes("foreground_service") <= 0:
            raise ValueError(f"ram_gb ({self.ram_gb}) must exceed system_gib ({self.system_gib}) and the killer's level")

    def limit_bytes(self, app_state: str = "foreground_service") -> float:
        """What one training app in ``app_state`` may hold before the low-memory killer ends it (bytes)."""
        if self.app_limit_gib is not None:
            return self.app_limit_gib * GIB
        return (self.ram_gb - self.system_gib) * GIB - LMK_MINFREE_KIB[APP_STATE_ADJ[app_state]] * 1024.0


def largest_batch(limit_bytes: np.ndarray | float, fixed_bytes: float, per_sample_bytes: float, batch_size: int) -> np.ndarray:
    """The largest minibatch ``<= batch_size`` whose training fits ``limit_bytes`` (0: none fits)."""
    limit = np.asarray(limit_bytes, dtype=float)
    if per_sample_bytes <= 0:
        return np.where(limit >= fixed_bytes, batch_size, 0).astype(np.int64)
    fit = np.floor((limit - fixed_bytes) / per_sample_bytes)
    return np.clip(fit, 0, batch_size).astype(np.int64)
