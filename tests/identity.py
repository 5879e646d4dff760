"""What a claim of identity covers, on any CPU, and the check of a run against its reference.

The simulated figures (the clock, who was online, selected, kept or dropped, energies, batteries,
Jain's indices, execution choices, interference, heat and memory) are computed with exactly
rounded element-wise operations and fixed-order sums (never a BLAS call): identical on every
x86-64 CPU. Three columns come from torch's training and evaluation: :data:`TORCH_COLUMNS`. The run
pins ATen's portable kernels and MKL's ``COMPATIBLE`` branch (``fl.cpu_kernels: auto``), which
MKL documents as giving the same bits on Intel and AMD; they are compared exactly on the CPU kind
and library versions that wrote the reference (its ``provenance.json`` records them) and, until
another kind is measured, elsewhere within the differences measured before MKL's pin (accuracy
0.002, losses 6.4e-4), as is everything in ``summary.json`` that is read off the accuracy curve.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from flamingo_sim import provenance

#: the columns torch computes, and their bounds (absolute) on another CPU kind: the differences measured
#: before MKL's pin (docs/headline.md), accuracies up to 0.002 and losses up to 6.4e-4
TORCH_COLUMNS = {"accuracy": 0.002, "loss": 6.4e-4, "train_loss": 6.4e-4}
#: the per-policy figures of summary.json that do not depend on the accuracy curve
SIMULATED_SUMMARY = ("total_energy_j", "jain_participation", "jain_energy", "clients_lost", "ux_slowed_frac")


def same_machine(reference: Path) -> bool:
    """Whether this machine has the CPU flags and numerical libraries that wrote ``reference``
    (a file whose folder's ``provenance.json`` records it)."""
    entry = provenance.read(reference.parent)[reference.name]
    here, there = provenance.machine(), entry["machine"]
    return here["cpu_flags"] == there.get("cpu_flags") and here["libraries"] == there.get("libraries")


def assert_metrics_match(got: pd.DataFrame, reference: Path, columns: list[str] | None = None, exact_torch: bool | None = None) -> None:
    """``got`` equals the metrics at ``reference``: every simulated column exactly, on any CPU; the
    torch columns exactly on the reference's CPU kind and libraries (``exact_torch``, default: whether
    this machine is that kind), else within their bounds."""
    want = pd.read_parquet(reference)
    assert list(got.columns) == list(want.columns)
    columns = list(want.columns) if columns is None else columns
    simulated = [c for c in columns if c not in TORCH_COLUMNS]
    pd.testing.assert_frame_equal(got[simulated], want[simulated], check_exact=True)
    torch_columns = [c for c in columns if c in TORCH_COLUMNS]
    if same_machine(reference) if exact_torch is None else exact_torch:
        pd.testing.assert_frame_equal(got[torch_columns], want[torch_columns], check_exact=True)
    else:
        for c in torch_columns:
            np.testing.assert_allclose(got[c].to_numpy(float), want[c].to_numpy(float), rtol=0, atol=TORCH_COLUMNS[c], equal_nan=True, err_msg=c)


#: keys summary.json gained after some references were written (issue 49: the plug-ins that ran, with their
#: parameters); a reference without one is compared on every other key
ADDED_SUMMARY_KEYS = ("plugins",)


def assert_summary_matches(got: dict, reference: Path, exact_torch: bool | None = None) -> None:
    """``got`` equals the summary at ``reference``: whole (but for a key of :data:`ADDED_SUMMARY_KEYS` the
    reference predates), on the reference's CPU kind (``exact_torch``, default: whether this machine is
    that kind); elsewhere the figures that do not depend on the accuracy curve (:data:`SIMULATED_SUMMARY`)."""
    want = json.loads(reference.read_text())
    if same_machine(reference) if exact_torch is None else exact_torch:
        assert {k: v for k, v in got.items() if k in want or k not in ADDED_SUMMARY_KEYS} == want
        return
    for policy, figures in want["policies"].items():
        for key in SIMULATED_SUMMARY:
            assert got["policies"][policy][key] == figures[key], f"{policy}.{key}"
