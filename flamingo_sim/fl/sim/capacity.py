"""FedScale's device-capacity file, read without executing it.

FedScale's aggregator reads ``--device_conf_file`` (by default
``benchmark/dataset/data/device_info/client_device_capacity``, downloaded with FedScale's data)
with ``pickle.load`` in ``Aggregator.load_client_profile``: a dict mapping a client id to
``{'computation': ms per sample, 'communication': kbit/s}``; ``ClientMetadata`` prices a task's
transfers as ``(upload_size + download_size) / communication`` (kbit over kbit/s, one bandwidth
for both directions). ``fedscale/cloud/aggregation/aggregator.py`` and
``fedscale/cloud/internal/client_metadata.py`` (FedScale 1.0).

A pickle can run any code when it is loaded, and this file comes from a download: it is read with
a restricted unpickler (:class:`_Restricted`) that refuses every global (so no class, function or
``__reduce__`` can run), no persistent ids, and then checks what it built: a dict of integer ids
to dicts whose ``computation`` and ``communication`` are finite numbers, ``communication`` > 0.
Only dicts, ints, floats and strings come out of it; anything else is refused in one line naming
the file. The file is also bounded in size before it is read.

FedScale's aggregator gives its client ``k`` (counted from 1) the entry ``k mod N`` and silently
falls back to 1 kbit/s where that key is missing (key 0 of a file keyed 1..N). Here FL client
``i`` gets the ``(i mod N)``-th entry in ascending id order instead, so every client has a
measured bandwidth (:func:`client_kbps`). ``computation`` is not used: the device model prices
the compute.
"""

from __future__ import annotations

import io
import math
import pickle
from pathlib import Path
from typing import Any

import numpy as np

from flamingo_sim.errors import InputDataError

__all__ = ["read_capacity_file", "client_kbps", "load_plain_pickle", "MAX_BYTES"]

#: The largest capacity file read (FedScale's holds about 500k clients, a few tens of MB).
MAX_BYTES = 256 << 20


class _Restricted(pickle.Unpickler):
    """An unpickler that builds only the built-in containers and scalars: no global is ever looked up."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"it needs {module}.{name}, and only dicts, ints, floats and strings are read")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("it holds a persistent id, and only dicts, ints, floats and strings are read")


def load_plain_pickle(data: bytes) -> Any:
    """The plain data (dicts, lists, numbers, strings) a pickle holds, without running anything: every global it names
    (a class, a function, ``__reduce__``'s callable) is refused with :class:`pickle.UnpicklingError`. Also for the trace
    files FedScale reads (:mod:`flamingo_sim.integrations.fedscale_traces`)."""
    return _Restricted(io.BytesIO(data)).load()


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def read_capacity_file(path: str | Path) -> dict[int, dict[str, float]]:
    """The capacity file at ``path`` as ``{client id: {'computation': ..., 'communication': ...}}``,
    checked; :class:`~flamingo_sim.errors.InputDataError` in one line naming the file otherwise."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise InputDataError(f"{path}: {size} bytes, more than the {MAX_BYTES} a device-capacity file may have")
        data = path.read_bytes()
    except OSError as exc:
        raise InputDataError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        table = load_plain_pickle(data)
    except pickle.UnpicklingError as exc:
        raise InputDataError(f"{path}: not read: {exc}; expected FedScale's device-capacity pickle "
                             "{client id: {'computation': ms/sample, 'communication': kbit/s}}") from None
    except Exception as exc:  # a truncated or foreign file: EOFError, ValueError, ... from the opcode reader
        raise InputDataError(f"{path}: not a pickle ({type(exc).__name__}: {exc}); expected FedScale's device-capacity pickle "
                             "{client id: {'computation': ms/sample, 'communication': kbit/s}}") from None
    if not isinstance(table, dict) or not table:
        what = "an empty dict" if isinstance(table, dict) else f"a value of type {type(table).__name__}"
        raise InputDataError(f"{path}: holds {what}; expected a non-empty dict {{client id: {{'computation': ms/sample, 'communication': kbit/s}}}}")
    out: dict[int, dict[str, float]] = {}
    for key, entry in table.items():
        if not isinstance(key, int) or isinstance(key, bool):
            raise InputDataError(f"{path}: client id {key!r} is not an integer; expected integer client ids")
        if not isinstance(entry, dict) or "communication" not in entry:
            raise InputDataError(f"{path}: client {key}: {entry!r} is not a dict with 'communication'; "
                                 "expected {'computation': ms/sample, 'communication': kbit/s}")
        kbps, ms = entry["communication"], entry.get("computation", float("nan"))
        if not _number(kbps) or kbps <= 0:
            raise InputDataError(f"{path}: client {key}: communication {kbps!r}; expected a bandwidth in kbit/s > 0")
        if "computation" in entry and not _number(ms):
            raise InputDataError(f"{path}: client {key}: computation {ms!r}; expected milliseconds per sample")
        out[key] = {"computation": float(ms), "communication": float(kbps)}
    return out


def client_kbps(table: dict[int, dict[str, float]], n_clients: int) -> np.ndarray:
    """float64 (n_clients,): FL client ``i``'s bandwidth, the ``(i mod N)``-th entry of ``table`` by ascending id (kbit/s)."""
    ids = sorted(table)
    kbps = np.array([table[k]["communication"] for k in ids], dtype=np.float64)
    return kbps[np.arange(n_clients) % len(ids)]
