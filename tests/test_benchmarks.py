"""Every script in benchmarks/ runs (``--smoke``: seconds, tiny sizes, the same code path, in a
subprocess) and shows what it exists to show: its ratios against the baseline it measured in the
same run are finite and positive, its "identical" / "same" flags are true, its table is complete.

Each script has an entry in :data:`SHOWS`: the lines its smoke output must hold. A script added
to benchmarks/ without one, or an entry whose script is gone, fails :func:`test_every_benchmark_says_what_it_shows`.
A script needing an extra that is not installed is skipped, naming the extra. No script may
change the committed results in ``benchmarks/results``.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py"))
#: A ratio as the scripts print it: a number (or nan / inf, which must not appear) right before an ``x``.
RATIO = re.compile(r"(?<![\w.])(-?(?:\d+(?:\.\d+)?(?:e[+-]?\d+)?|nan|inf))x\b")
NUM = r"(\d+(?:\.\d+)?)"

#: script -> (the extra it needs and the module that shows it is installed, or None; regexes its
#: smoke output must match, each at least once; regexes it must never match).
SHOWS: dict[str, tuple[tuple[str, str] | None, list[str], list[str]]] = {
    "cold_calls": (None, [rf"^all 5 calls: warm {NUM} ms, after training {NUM} ms \({NUM}x\), after idle {NUM} ms \({NUM}x\)$",
                          rf"^training between calls: 10 clients x 2 steps x 16 samples \(proxy MLP, vmapped SGD\): {NUM} ms median$"]
                   + [rf"^{call} .* {NUM}x$" for call in (r"tallies \(SparseVector\.add,", "minibatch indices", "a new client's data", "battery",
                                                           "policy ladder")], [r"\bnan\b"]),
    "device_limits": (None, [rf"^(baseline|flamingo) +[\d,]+ +{NUM} +{NUM} +{NUM}x"], []),
    "devices": (None, [rf"baseline: vectorised .* ratio +{NUM}x", rf"flamingo: vectorised .* ratio +{NUM}x"], []),
    "distributed": (None, [r"main job \(MLP proxy\): \d+ rows x \d+ columns; 2 processes identical",
                           rf"ratio best single / 2 processes {NUM}x"], [r"DIFFERENT"]),
    "energy_balance": (None, [rf"^(baseline|flamingo): charged {NUM} kJ, heat received {NUM} kJ: heat / charged 1\.0000000\d\dx .*integrated vs booked "
                              rf"excess within \S+ K over [\d,]+ tasks"], [r"\bnan\b"]),
    "engine": (None, [rf"speed-up: +{NUM}x +\(max \|batched - sequential\| = \d\.\d\de[+-]\d\d\)"], []),
    "fedscale_vs_native": (("fedscale", "fedscale"),
                           [rf"^{name} +{NUM} +{NUM} +{NUM}x +\d\.\d\de[+-]\d\d +True$" for name in ("native", "fedscale", "fedscale-unweighted", "fedscale-grpc")],
                           [r"\bFalse\b"]),
    "flower_vs_native": (("flower", "flwr"), [rf"flower / native per round: {NUM}x",
                                              r"same clock, energy and kept clients: True; max \|accuracy difference\|: 0\.00e\+00"], [r"\bFalse\b"]),
    "gpu_round": (None, [rf"^  {row} .* vs loop +{NUM}x" for row in ("loop", r"engine \(sequential\)", r"engine \(vmap\)", "vmap", "threads")]
                  + [r"^MobileNetV2, 32 px", r"^proxy MLP"], []),
    "gpu_run": (None, [rf"^{p} +[\d,]+ samples/s trained  = +{NUM} s per paper round" for p in ("baseline", "flamingo")]
                + [rf"flamingo / baseline training rate: {NUM}x \(same run, same device\)"], []),
    "main_job": (None, [rf"main job: {NUM} s wall \(median of 2; range {NUM}-{NUM} s\); {NUM}x under the 10-minute target; "
                         r"metrics identical across repeats: True"], [r"DIFFERENT", r"\bFalse\b"]),
    "identity": (None, [rf"^{job} \(1 rounds, base \w+\): metrics\.parquet identical: True, summary\.json identical: True; wall base {NUM} s, "
                        rf"this {NUM} s, ratio {NUM}x$" for job in ("openimage_mobilenet", "toolkit_fedbuff")], [r"\bFalse\b"]),
    "memory_peaks": (None, [rf"^mobilenet_v2 +64px +4 +{NUM} +{NUM} +{NUM}x"], []),
    "network": (None, [rf"^{task}: speedup lognormal .*; energy efficiency lognormal " for task in ("openimage_mobilenet", "speech_resnet34")]
                + [rf"^  (baseline|flamingo): transfers .* mean round traces / lognormal {NUM}x$",
                   r"^openimage_mobilenet unmetered_only \((lognormal|traces) pricing\): baseline clients lost",
                   r"the log-normal replays match the runs' round durations: True"], [r"\bFalse\b"]),
    "population": (None, [rf"^\w+: a round at [\d,]+ clients costs {NUM}x the CPU of one at [\d,]+ \({NUM}x the wall time\)"], []),
    "prep_traces": (None, [rf"prep-traces [\d,]+ rows/s, pandas baseline [\d,]+ rows/s: ratio {NUM}x"], []),
    "reproduce_real": (None, [r"each data set packed once: True; every task on real data: True",
                              rf"^(openimage_mobilenet|openimage_shufflenet|speech_resnet34) +{NUM} s a unit of \d+ rounds",
                              rf"whole reproduce on .* about {NUM} h; the measured study: {NUM} s, of which units {NUM} s \({NUM}x"],
                       [r"\bFalse\b"]),
    "round_overhead": (None, [rf"^mlp:\d+ +all on +{NUM} +{NUM} +{NUM}x +{NUM}- *{NUM}x +{NUM}x +{NUM}- *{NUM}x +{NUM}x +{NUM}- *{NUM}x +{NUM}x$",
                              r"^stages, ms per round \(median over rotations\), mlp:\d+: wall / CPU$"]
                       + [rf"^{stage} +-?{NUM} / -?{NUM}$" for stage in ("selection", "pricing", "battery", "clock", "training", "aggregation",
                                                                "evaluation", "metrics", "checkpoint", "unaccounted")], []),
    "studies": (None, [rf"speed-up of --jobs 2 over --jobs 1: {NUM}x .*; outputs identical \(\d+ files\)"], [r"results differ"]),
    "suite": (None, [r"^smoke: tests/test_errors\.py: \d+ tests \(python -m pytest -q\); slow tests besides: \d+$",
                     rf"^default suite: \d+ tests, {NUM} s wall \(median of 1; range {NUM}-{NUM} s\), {NUM}x the collection alone; failed: 0$"], []),
    "toolkit_runs": (None, [rf"main job \(baseline\): {NUM} s wall \(median of 2; range {NUM}-{NUM} s\)"]
                     + [rf"^toolkit_{name} +baseline,flamingo +{NUM} +{NUM}x$" for name in ("fedyogi", "fedbuff", "arrays")], []),
    "toolkit_overhead": (None, [rf"^(uniform|battery|oort) +(fedavg|fedadam|fedyogi) +{NUM} +{NUM}x +{NUM}- *{NUM} +{NUM} +{NUM} +{NUM}%$"],
                         [r"\bnan\b"]),  # every call timed: a selection or aggregation the wrappers never saw prints nan
}


def _results() -> dict[str, bytes]:
    folder = ROOT / "benchmarks" / "results"
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_every_benchmark_says_what_it_shows():
    assert sorted(p.stem for p in SCRIPTS) == sorted(SHOWS), "add the new benchmark's expected lines to SHOWS (or drop a removed one)"


def check_output(name: str, stdout: str) -> None:
    """What ``name``'s smoke output must show (raises AssertionError naming the first miss)."""
    _, must, never = SHOWS[name]
    ratios = RATIO.findall(stdout)
    assert ratios, f"{name} --smoke printed no ratio (e.g. '3.2x'):\n{stdout[-3000:]}"
    bad = [r for r in ratios if not (math.isfinite(float(r)) and float(r) > 0)]
    assert not bad, f"{name} --smoke printed ratios that are not finite and positive: {bad}"
    for pattern in must:
        assert re.search(pattern, stdout, re.MULTILINE), f"{name} --smoke: no line matches {pattern!r}:\n{stdout[-3000:]}"
    for pattern in never:
        assert not re.search(pattern, stdout, re.MULTILINE), f"{name} --smoke: a line matches {pattern!r}:\n{stdout[-3000:]}"


@pytest.mark.parametrize("text, fails", [
    ("ratio    3.2x\nratio 5.1x", False),
    ("ratio    nanx", True),           # a ratio that is not a number
    ("ratio    0.0x\nratio 5.1x", True),  # a baseline or candidate that measured nothing
    ("ratio    infx\nratio 5.1x", True),
    ("no ratio at all", True),
])
def test_the_output_check_can_fail(text, fails):
    try:
        check_output("devices", text.replace("ratio", "baseline: vectorised 1 ms ratio", 1) + "\nflamingo: vectorised 1 ms ratio 2.0x")
    except AssertionError:
        assert fails
    else:
        assert not fails


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_benchmark_smoke(script: Path, tmp_path: Path):
    extra = SHOWS[script.stem][0]
    if extra is not None and importlib.util.find_spec(extra[1]) is None:
        pytest.skip(f"{script.name} needs the {extra[0]} extra: pip install 'flamingo-sim[{extra[0]}]'")
    before = _results()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # cwd: an empty folder, so that nothing a script writes by a relative path lands in the checkout
    done = subprocess.run([sys.executable, str(script), "--smoke"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{script.name} --smoke exited {done.returncode}:\n{done.stderr[-3000:]}"
    check_output(script.stem, done.stdout)
    assert _results() == before, f"{script.name} --smoke changed benchmarks/results"


def test_flower_vs_native_without_ray_says_what_to_install_in_one_line():
    """Issue 50: ``--smoke`` without Ray was a traceback. Ray and Flower are blocked in the child (sys.modules[name] =
    None), so the line is the same whichever of them this environment has."""
    code = ("import runpy, sys; sys.modules['ray'] = sys.modules['flwr'] = None; sys.argv = ['benchmarks/flower_vs_native.py', '--smoke']; "
            "runpy.run_path('benchmarks/flower_vs_native.py', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == ["flower_vs_native.py: needs ray and flwr: pip install 'flamingo-sim[flower]'"]
