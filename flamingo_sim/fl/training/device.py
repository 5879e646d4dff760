"""Where local training runs: the device (``fl.device``), CPU threads (``fl.threads``) and the
numeric precision (``fl.precision``).

- ``resolve_device("auto")`` takes the current CUDA GPU (the first, unless the process was
  given another: a torchrun rank gets ``cuda:LOCAL_RANK``) when one is visible, else the CPU;
  ``"cuda"`` (the current GPU) / ``"cuda:N"`` demand a GPU and fail with one line when there is none.
- :func:`set_threads` sets torch's intra-op thread count once per run (default: ``OMP_NUM_THREADS``
  when set, else the cores this process may use, ``os.sched_getaffinity``); torch's own
  default counts every core of the machine, which oversubscribes a container or a shared box.
- :func:`precision_context` switches reduced precision on only when asked: ``"fp32"`` (the
  default) also turns cuDNN's TF32 convolutions *off* (torch enables them by default), so no
  result is silently computed in 10-bit mantissas; ``"tf32"`` allows TF32 matmuls and
  convolutions on CUDA; ``"bf16"`` runs forward and backward under ``torch.autocast`` in
  bfloat16 (parameters and their updates stay float32).
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

import torch

from flamingo_sim.errors import ConfigError

__all__ = ["resolve_device", "set_threads", "default_threads", "usable_cores", "precision_context", "PRECISIONS", "device_cache_bytes"]

PRECISIONS = ("fp32", "tf32", "bf16")


def usable_cores() -> int:
    """The number of CPU cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def resolve_device(spec: str, key: str = "fl.device") -> torch.device:
    """The torch device for ``spec`` (``auto``, ``cpu``, ``cuda`` or ``cuda:N``)."""
    text = str(spec).strip().lower()
    if text == "auto":  # the current GPU: cuda:0 unless this process was given another (torch.cuda.set_device)
        return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    if text == "cpu":
        return torch.device("cpu")
    if text == "cuda" or text.startswith("cuda:"):
        index = torch.cuda.current_device() if torch.cuda.is_available() else 0
        if text != "cuda":
            tail = text.split(":", 1)[1]
            if not tail.isdigit():
                raise ConfigError(f"{key}: expected auto, cpu, cuda or cuda:N, got {spec!r}")
            index = int(tail)
        if not torch.cuda.is_available():
            raise ConfigError(f"{key}: {spec!r} asked for a CUDA GPU but torch sees none (torch {torch.__version__}); use --device cpu")
        count = torch.cuda.device_count()
        if index >= count:
            raise ConfigError(f"{key}: {spec!r}: only {count} CUDA device(s) visible (cuda:0..cuda:{count - 1})")
        return torch.device("cuda", index)
    raise ConfigError(f"{key}: expected auto, cpu, cuda or cuda:N, got {spec!r}")


def default_threads(small_model: bool = False) -> int:
    """``OMP_NUM_THREADS`` when the environment sets it, else one thread for a ``small_model``
    (the proxy task's MLP or logistic regression), else the usable cores.

    The proxy's matrices are too small to gain from intra-op threads, and threads that spin
    waiting for a core another process holds cost far more than they save: on 2 cores with one
    busy, 15 rounds of the main job took 12.6 s with one thread and 67-75 s with two.
    """
    env = os.environ.get("OMP_NUM_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return 1 if small_model else usable_cores()


def set_threads(n_threads: int | None, small_model: bool = False) -> int:
    """Set torch's intra-op threads to ``n_threads`` (``None``: :func:`default_threads`); returns it."""
    n = default_threads(small_model) if n_threads is None else int(n_threads)
    if n < 1:
        raise ConfigError(f"fl.threads: expected a count >= 1, got {n_threads}")
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n


#: ``ATEN_CPU_CAPABILITY`` of the portable CPU kernels: ATen's plain build, which every x86-64 CPU runs.
PORTABLE_CAPABILITY = "default"
#: ``MKL_CBWR`` of the portable CPU kernels: the code branch of MKL's conditional numerical reproducibility
#: that gives the same bits on Intel and on Intel-compatible (AMD) processors, SSE2 without rcpps/rsqrtps
#: (oneMKL Developer Guide for Linux, "Specifying Code Branches" and "Reproducibility Conditions"). Without
#: it MKL picks its matrix products' code path by the CPU's maker and instruction set: the main job's final
#: accuracies read 0.550 / 0.546 on an Intel Xeon and 0.549 / 0.547 on an AMD EPYC.
PORTABLE_MKL_BRANCH = "COMPATIBLE"
#: ``mkl_cbwr_get(MKL_CBWR_BRANCH)``'s value for that branch (mkl.h: MKL_CBWR_COMPATIBLE)
_MKL_CBWR_COMPATIBLE = 3


def mkl_branch() -> int | None:
    """The code branch MKL runs in this process (``mkl_cbwr_get(MKL_CBWR_BRANCH)``: 1 = CNR off, 3 =
    COMPATIBLE), or None where torch's library does not export MKL's service call (a build without MKL).
    The first call fixes the branch from ``MKL_CBWR`` if MKL has not yet run."""
    import ctypes

    lib = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")
    try:
        get = ctypes.CDLL(lib).mkl_serv_cbwr_get
    except (OSError, AttributeError):
        return None
    get.restype, get.argtypes = ctypes.c_int, [ctypes.c_int]
    return int(get(1))


def portable_mkl_pinned() -> bool:
    """Whether MKL runs :data:`PORTABLE_MKL_BRANCH` here (true where torch has no MKL: nothing to pin)."""
    branch = mkl_branch()
    return branch is None or branch == _MKL_CBWR_COMPATIBLE


def portable_kernels(cpu_kernels: str, *, real_data: bool) -> bool:
    """Whether ``fl.cpu_kernels`` asks for ATen's portable kernels: ``portable``, or ``auto`` on the proxy task."""
    return cpu_kernels == "portable" or (cpu_kernels == "auto" and not real_data)


def pin_cpu_kernels(portable: bool) -> tuple[str, str | None]:
    """Pin ATen's CPU kernels to their plain build and MKL's to its vendor-neutral branch (``portable``),
    or leave the widest SIMD the CPU has.

    ATen picks its vectorised kernels (and with them the order of float additions in reductions,
    softmax, the loss) once per process, by the CPU's instruction set, on the first kernel it
    runs; ``ATEN_CPU_CAPABILITY`` overrides the choice. MKL picks its matrix products' code path
    once per process too, by the CPU's maker and instruction set; ``MKL_CBWR`` fixes it
    (:data:`PORTABLE_MKL_BRANCH`). Set before the first kernel, the two make training identical on
    every x86-64 CPU, Intel or AMD. Returns the capability in use and, where either could no longer
    be pinned (torch had already run a kernel in this process), a line saying so.
    """
    if portable:
        os.environ["ATEN_CPU_CAPABILITY"] = PORTABLE_CAPABILITY
        os.environ["MKL_CBWR"] = PORTABLE_MKL_BRANCH
    used = torch.backends.cpu.get_cpu_capability()
    if portable and used.lower() != PORTABLE_CAPABILITY:
        return used, (f"cpu kernels: portable asked for, but torch already runs {used} kernels in this process (set "
                      f"ATEN_CPU_CAPABILITY={PORTABLE_CAPABILITY} before torch runs anything); results may differ on other CPUs")
    if portable and not portable_mkl_pinned():
        return used, (f"cpu kernels: portable asked for, but MKL already chose its code path in this process (set "
                      f"MKL_CBWR={PORTABLE_MKL_BRANCH} before torch runs anything); results may differ on other CPUs")
    return used, None


@contextlib.contextmanager
def precision_context(precision: str, device: torch.device) -> Iterator[None]:
    """Run the enclosed training in ``precision`` (see the module docstring); restores the flags."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    matmul = torch.backends.cuda.matmul.allow_tf32
    cudnn = torch.backends.cudnn.allow_tf32
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    try:
        if precision == "bf16":
            # no cast cache: the region spans many steps whose in-place updates the cache would not see (a
            # parameter's bfloat16 copy is cached by tensor, not by version), and CUDA graphs need it off
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16, cache_enabled=False):
                yield
        else:
            yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = matmul
        torch.backends.cudnn.allow_tf32 = cudnn


def device_cache_bytes(device: torch.device, gib: float | None) -> int:
    """Bytes of clients' samples to keep on ``device``: ``gib`` GiB, or (``None``) a quarter of
    the memory free on it now (the rest is for the model, its vmap chunks and activations)."""
    if gib is not None:
        return max(1, int(gib * (1 << 30)))
    free, _ = torch.cuda.mem_get_info(device)
    return max(1, free // 4)
