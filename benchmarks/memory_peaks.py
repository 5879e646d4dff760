"""Training memory at the operating point: the measured peak of two training steps against the estimate.

For each of the paper's networks at the input and batch the simulator prices it at (MobileNetV2
and ShuffleNetV2 x2: 3 x 224 x 224; ResNet-34: the speech task's 32 x 32; batch 16), a fresh
process builds the network, runs two SGD steps on one thread and reports its peak resident memory
(``VmHWM``, reset through ``/proc/self/clear_refs`` just before the network is built) over the
resident memory at that point: parameters, gradients, activations, allocator slack. Beside it the
structural estimate (:func:`flamingo_sim.fl.sim.limits.training_memory_bytes`: the state four times
over, the activations twice) and the ratio measured / estimate, which the memory model applies
(:data:`flamingo_sim.devices.memory.MEASURED_OVER_ESTIMATE`). Repeats interleave the networks;
the ratio printed is the median.

    PYTHONPATH=. python benchmarks/memory_peaks.py [--repeats 3] [--out benchmarks/results/memory_peaks_2cores.json]
    PYTHONPATH=. python benchmarks/memory_peaks.py --smoke   # one repeat, MobileNetV2 at 64 px, batch 4
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: network -> (input side in px, batch): the operating point (the profiles' input; batch 16).
POINTS = {"mobilenet_v2": (224, 16), "shufflenet_v2_x2": (224, 16), "resnet34": (32, 16)}

WORKER = r"""
import sys, torch
from flamingo_sim.fl.sim.limits import NETWORKS, training_memory_bytes
from flamingo_sim.models import build_model
name, px, b = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(1)
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
x, y = torch.randn(b, 3, px, px), torch.randint(0, 10, (b,))
fixed, per_sample = training_memory_bytes(name, px, 10)
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
rss0 = status("VmRSS:")
net = build_model(NETWORKS.get(name, name), (3, px, px), 10, seed=0)
net.train()
opt = torch.optim.SGD(net.parameters(), lr=0.01)
for _ in range(2):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(net(x), y).backward()
    opt.step()
print(status("VmHWM:") - rss0, fixed + per_sample * b)
"""


def measure(name: str, px: int, batch: int) -> tuple[float, float]:
    """(measured peak, estimate) in bytes, in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", WORKER, name, str(px), str(batch)], capture_output=True, text=True, env=env,
                          check=True, timeout=900)
    measured, estimated = (float(v) for v in proc.stdout.split())
    return measured, estimated


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="one repeat of MobileNetV2 at 64 px, batch 4 (seconds)")
    ap.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = ap.parse_args(argv)
    points = {"mobilenet_v2": (64, 4)} if args.smoke else POINTS
    repeats = 1 if args.smoke else args.repeats
    runs: dict[str, list[tuple[float, float]]] = {n: [] for n in points}
    for _ in range(repeats):  # interleaved: every network once per repeat
        for name, (px, batch) in points.items():
            runs[name].append(measure(name, px, batch))
    out = {"command": "python benchmarks/memory_peaks.py" + (" --smoke" if args.smoke else f" --repeats {repeats}"),
           "machine": f"{platform.machine()} {platform.processor() or ''}".strip(), "cores": os.cpu_count(),
           "python": platform.python_version(), "networks": {}}
    import torch

    out["torch"] = torch.__version__
    print(f"{'network':<18} {'input':>7} {'batch':>5} {'measured MiB':>13} {'estimate MiB':>13} {'measured/estimate':>18} {'spread':>12}")
    for name, (px, batch) in points.items():
        ratios = [m / e for m, e in runs[name]]
        measured = statistics.median(m for m, _ in runs[name])
        estimate = runs[name][0][1]
        ratio = statistics.median(ratios)
        out["networks"][name] = {"input_px": px, "batch": batch, "measured_bytes": [m for m, _ in runs[name]], "estimate_bytes": estimate,
                                 "ratio_median": round(ratio, 4), "ratio_range": [min(ratios), max(ratios)]}
        print(f"{name:<18} {px:>5}px {batch:>5} {measured / 2**20:>13.0f} {estimate / 2**20:>13.0f} {ratio:>17.4f}x "
              f"{min(ratios):.3f}-{max(ratios):.3f}")
    if args.out is not None:
        args.out.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
