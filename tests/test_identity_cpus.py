"""The figures a claim of identity covers do not depend on the CPU's vector instructions.

numpy picks its kernels per CPU at import (AVX-512, AVX2, or its baseline); ``NPY_ENABLE_CPU_FEATURES``
limits it to a list, so one machine can run numpy as an older CPU would. MKL's
``MKL_ENABLE_INSTRUCTIONS`` does the same for torch's matrix products, and ``OPENBLAS_CORETYPE`` for
numpy's (its bundled OpenBLAS: ``Prescott``, an SSE3 kernel whose products differ in their last bits). Each test computes the same
figures under the machine's own kernels and under the baseline x86-64 ones (SSE4.2, no AVX) and
compares them exactly: Jain's index (no BLAS), the population's bandwidths and the heat model's decay
(libm's exp and pow, :mod:`flamingo_sim.numeric`, not numpy's vectorised ones), the proxy task's labels (taken from numpy's BLAS product where no rounding can change them,
else from a fixed-order sum: the same labels under either BLAS kernel) and, in the slow test, every simulated
column of the shortened main job (tests/identity.py).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.identity import assert_metrics_match, assert_summary_matches

ROOT = Path(__file__).resolve().parents[1]
#: the x86-64 baseline numpy may be limited to (x86-64-v2: no AVX)
BASELINE = ["SSE", "SSE2", "SSE3", "SSSE3", "SSE41", "POPCNT", "SSE42"]

pytestmark = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86-64's vector instructions")

FIGURES = r"""
import hashlib, json, numpy as np
try:
    from numpy._core._multiarray_umath import __cpu_features__ as cpu
except ImportError:  # numpy 1
    from numpy.core._multiarray_umath import __cpu_features__ as cpu
from flamingo_sim.fl.sim.fairness import jain_index
from flamingo_sim.fl.sim.population import build_population
from flamingo_sim.fl.data.proxy import SyntheticFederated
r = np.random.default_rng(7)
x = r.gamma(0.3, 2.0, 200_003)
pop = build_population(50_000, 100, {"a": 0.5, "b": 0.5}, 20.0, 1.2, seed=3)
data = SyntheticFederated(300, seed=1)
labels = np.concatenate([data._generate(c)[1].numpy() for c in range(300)])
blas = np.random.default_rng(5).standard_normal((500, 60)) @ np.random.default_rng(6).standard_normal((60, 10))
from flamingo_sim.devices.thermal import rc_excess_c
from flamingo_sim.numeric import exp, power
z = np.random.default_rng(3).standard_normal(50_000)
heat = rc_excess_c(np.abs(z) * 600.0, 2.0, 1.5, 8.0, 400.0)
# numpy 2.4 groups the features into levels (X86_V3: AVX2 and FMA; X86_V4: AVX-512), older ones name them
print(json.dumps({"v4": bool(cpu.get("X86_V4", cpu.get("AVX512F"))), "v3": bool(cpu.get("X86_V3", cpu.get("AVX2"))),
                  "jain": [jain_index(x), jain_index(x[:1001] * 1e-3, n=5000)],
                  "bandwidth": hashlib.sha256(pop.bandwidth_mbps.tobytes()).hexdigest(),
                  "labels": hashlib.sha256(labels.tobytes()).hexdigest(), "blas": hashlib.sha256(blas.tobytes()).hexdigest(),
                  "libm": hashlib.sha256(exp(z).tobytes() + power(np.abs(z) + 1.0, -0.6).tobytes() + heat.tobytes()).hexdigest()}))
"""


def _figures(env: dict[str, str]) -> dict:
    done = subprocess.run([sys.executable, "-c", FIGURES], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT), **env},
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_jain_bandwidths_and_labels_are_the_same_on_the_baseline_kernels():
    native = _figures({})
    baseline = _figures({"NPY_ENABLE_CPU_FEATURES": ",".join(BASELINE), "OPENBLAS_CORETYPE": "Prescott"})
    assert not baseline["v3"] and not baseline["v4"]  # the limit took
    if native["v3"]:  # an AVX2 machine: OpenBLAS's own kernel gives other bits than Prescott's, so the labels met two products
        assert baseline["blas"] != native["blas"]
    assert baseline["jain"] == native["jain"]
    assert baseline["bandwidth"] == native["bandwidth"]
    assert baseline["labels"] == native["labels"]
    assert baseline["libm"] == native["libm"]  # numeric.exp and .power, and the heat model's decay through them


def test_the_population_check_can_fail():
    """numpy's own exp on the same draws does differ between the kernels where the CPU has AVX-512:
    the check above would have caught the np.exp the population used."""
    code = ("import hashlib, numpy as np; c = getattr(np, '_core', None) or np.core; c = c._multiarray_umath.__cpu_features__; "
            "z = np.random.default_rng(3).standard_normal(50_000); "
            "print(bool(c.get('X86_V4', c.get('AVX512F'))), hashlib.sha256(np.exp(z).tobytes()).hexdigest())")
    run = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, **env}, check=True).stdout.split()
           for env in ({}, {"NPY_ENABLE_CPU_FEATURES": ",".join(BASELINE)})]
    import numpy as np

    if run[0][0] != "True" or int(np.__version__.split(".")[0]) < 2:
        pytest.skip("numpy's AVX-512 exp for float64 needs an AVX-512 CPU and numpy 2 (1.24's gives libm's bits): nothing to tell apart")
    assert run[0][1] != run[1][1]


@pytest.mark.slow
def test_the_short_main_job_on_baseline_kernels_matches_its_reference(tmp_path):
    """The shortened main job with numpy and MKL limited to the x86-64 baseline (as on a CPU without
    AVX): every simulated column equal to the reference, torch's columns within the README's bounds."""
    reference = ROOT / "tests" / "fl" / "sim" / "reference" / "main_job_short"
    env = {**os.environ, "FLAMINGO_SIM_QUIET": "1", "PYTHONPATH": str(ROOT), "NPY_ENABLE_CPU_FEATURES": ",".join(BASELINE),
           "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}
    env.pop("OMP_NUM_THREADS", None)
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "flamingo_sim", "run", str(ROOT / "experiments" / "openimage_mobilenet.yaml"), "--out", str(out),
                           "--set", "fl.rounds=10", "--set", "fl.eval_every=2"], capture_output=True, text=True, env=env, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert_metrics_match(pd.read_parquet(out / "metrics.parquet"), reference / "metrics.parquet", exact_torch=False)
    assert_summary_matches(json.loads((out / "summary.json").read_text()), reference / "summary.json", exact_torch=False)
