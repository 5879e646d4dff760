"""The memory model at the operating point: the estimate calibrated against measured peaks of training
steps, and the paper's phones fitting what the paper trained on them (Table 1, section 5.1).

The slow test measures each of the paper's networks at the input and batch the simulator prices it at
(MobileNetV2 and ShuffleNetV2 x2 at 224 px, ResNet-34 at the speech task's 32 px; batch 16) in a fresh
process, as ``benchmarks/memory_peaks.py`` does: its peak resident memory (``VmHWM``, reset through
``/proc/self/clear_refs`` just before the network is built) over the resident memory at that point. The
stated bound: the calibrated estimate lies within 25 % of that peak (the peak moves by up to 20 % between
runs with the allocator's arenas: 0.58-0.66 of the raw estimate in the results file, 0.58-0.71 seen).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from flamingo_sim.devices.memory import GIB, LMK_MINFREE_KIB, MEASURED_OVER_ESTIMATE
from flamingo_sim.devices.profiles import MODELS
from flamingo_sim.devices.soc import load_phones
from flamingo_sim.fl.sim.limits import trained_input_size, training_memory_bytes

ROOT = Path(__file__).resolve().parents[3]
RESULTS = ROOT / "benchmarks" / "results" / "memory_peaks_2cores.json"


def test_the_calibration_is_the_measured_results_file():
    data = json.loads(RESULTS.read_text())
    assert {n: v["ratio_median"] for n, v in data["networks"].items()} == MEASURED_OVER_ESTIMATE
    assert {n: (v["input_px"], v["batch"]) for n, v in data["networks"].items()} == {m: (trained_input_size(m), 16) for m in MODELS}


@pytest.mark.parametrize("model", MODELS)
def test_every_paper_phone_fits_what_the_paper_trained_on_it(model):
    # Table 1: every network trained at minibatch 16 on all five phones, the 4 GB Pixel 3 included; as a foreground
    # service the app may hold the RAM less the system's 1.5 GiB (assumed) less the killer's 108 MiB level for adj 200
    fixed, per_sample = training_memory_bytes(model, trained_input_size(model), 10, calibrated=True)
    need = fixed + 16 * per_sample
    ram_gib = {"pixel_3": 4, "galaxy_s10e": 6, "galaxy_tab_s6": 6, "oneplus_8": 8, "mi_10": 8}  # the vendors' base models
    phones = load_phones(ROOT / "profiles")
    assert set(phones) == set(ram_gib)
    for name, phone in phones.items():
        assert phone.memory is not None
        limit = phone.memory.limit_bytes("foreground_service")
        # by hand: the RAM less the 1.5 GiB the system keeps (assumed) less lmkd's 110,592 KiB for adj 200
        assert limit == pytest.approx((ram_gib[name] - 1.5) * 2**30 - 110592 * 1024)
        assert need < limit, f"{name} / {model}: needs {need / GIB:.2f} GiB, may hold {limit / GIB:.2f} GiB"
    assert LMK_MINFREE_KIB[200] == 110592 and LMK_MINFREE_KIB[900] == 221184  # 27648 and 55296 pages of 4 KiB


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux's /proc/self/clear_refs to reset the peak")
@pytest.mark.parametrize("network", MODELS)
def test_calibrated_estimate_is_the_measured_peak_at_the_operating_point(network):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from memory_peaks import POINTS, measure
    finally:
        sys.path.pop(0)
    px, batch = POINTS[network]
    assert (px, batch) == (trained_input_size(network), 16)
    measured, estimated = measure(network, px, batch)
    calibrated = estimated * MEASURED_OVER_ESTIMATE[network]
    assert 0.75 * measured <= calibrated <= 1.25 * measured, f"{network}: measured {measured / 2**20:.0f} MiB, calibrated {calibrated / 2**20:.0f} MiB"
