"""The shipped trace set ``traces/synthetic/``: regenerate it bit-identically.

``python -m flamingo_sim.traces.shipped [OUT]`` simulates the synthetic GreenHub dump with a fixed
seed (160 devices, Kaggle parquet layout) in a temporary directory and runs ``prep-traces`` on it
with the paper's defaults (100 devices, first rule, 24 shifts) and a fixed ``--max-date``, so
the output depends on nothing but the code: 100 devices x 24 shifts = 2400 clients, each
device >= 28 days on the 10-minute grid.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from flamingo_sim.traces.pipeline import PrepOptions, prep_traces
from flamingo_sim.traces.synth import SynthOptions, write_synthetic_dump

__all__ = ["SHIPPED_DIR", "SHIPPED_SYNTH", "SHIPPED_PREP", "make_shipped"]

SHIPPED_DIR = Path(__file__).resolve().parents[2] / "traces" / "synthetic"
SHIPPED_SYNTH = SynthOptions(n_devices=160, seed=2023, n_parts=4, layouts=("parquet",))
SHIPPED_PREP = PrepOptions(max_date="2026-01-01")


def make_shipped(out_dir: str | Path = SHIPPED_DIR) -> dict[str, Any]:
    """Regenerate the shipped trace set into ``out_dir``; return the report."""
    with tempfile.TemporaryDirectory(prefix="flamingo-synth-") as tmp:
        dump = write_synthetic_dump(tmp, SHIPPED_SYNTH)[0]
        return prep_traces(dump, out_dir, SHIPPED_PREP, input_label="synth-greenhub --seed 2023 --devices 160 (kaggle layout)")


if __name__ == "__main__":  # pragma: no cover
    report = make_shipped(sys.argv[1] if len(sys.argv) > 1 else SHIPPED_DIR)
    print(f"{report['n_clients']} clients -> {report['output']}", file=sys.stderr)
