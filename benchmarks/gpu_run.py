"""The main job's round on a device, end to end: ``run --device`` on packed random data at 224 px.

It writes a random dataset in FedScale's OpenImage layout (``--clients`` clients x ``--samples``
JPEGs of 256 px, ``--classes`` classes: smooth random images, so the layout and the decoding are
real and the content is noise), packs it with ``flamingo-sim pack-data`` at ``--image-size``, and
runs ``flamingo-sim run openimage_mobilenet`` on the pack for ``--rounds`` rounds of both policies
with ``--device``. The run prints the samples/s it trained per policy (local training and FedAvg,
decoding excluded); this script turns them into seconds per paper round (100 clients x 20 steps
x batch 16 = 32,000 samples) and writes them, with the device's name, to ``--json``.

    PYTHONPATH=. python benchmarks/gpu_run.py --device cuda --json gpu_run.json   # on a GPU
    PYTHONPATH=. python benchmarks/gpu_run.py --smoke                             # CPU, tiny, seconds
    PYTHONPATH=. python benchmarks/gpu_run.py --set fl.train_mode=vmap --set fl.cuda_graphs=true --set fl.precision=bf16

``--smoke`` runs the same steps on the CPU with 24 clients of 16 images of 32 px (one minibatch each) and 1 round of
4 participants x 2 steps, so a change that breaks the path fails CI.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

from flamingo_sim.provenance import command_line, stamp  # each results file's commit, command and machine

SMOKE = {"device": "cpu", "clients": 24, "samples": 16, "image_size": 32, "rounds": 1, "participants": 4, "steps": 2}


def write_openimage(root: Path, n_clients: int, n_samples: int, n_classes: int, side: int = 256, seed: int = 0) -> int:
    """FedScale's OpenImage layout with random smooth JPEGs; returns the number of training images."""
    gen = np.random.default_rng(seed)
    (root / "client_data_mapping").mkdir(parents=True)
    n_train = 0
    for split, clients in (("train", [f"c{i:05d}" for i in range(n_clients)]), ("test", ["test"])):
        (root / split).mkdir()
        lines = ["client_id,sample_path,label_name,label_id"]
        per = n_samples if split == "train" else max(4 * n_samples, 32)
        for c in clients:
            for i in range(per):
                label = int(gen.integers(n_classes))
                small = gen.integers(0, 256, (8, 8, 3), dtype=np.uint8)
                name = f"{c}_{i}.jpg"
                Image.fromarray(small).resize((side, side), Image.Resampling.BILINEAR).save(root / split / name, quality=85)
                lines.append(f"{c},{name},class{label},{label}")
                n_train += split == "train"
        (root / "client_data_mapping" / f"{split}.csv").write_text("\n".join(lines) + "\n")
    return n_train


def cli(*args: str) -> str:
    """Run ``flamingo-sim`` in a subprocess; its output, or exit with it on failure."""
    proc = subprocess.run([sys.executable, "-m", "flamingo_sim", *args], capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"flamingo-sim {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout + proc.stderr


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--clients", type=int, default=400, help="clients in the random dataset")
    parser.add_argument("--samples", type=int, default=20, help="training images per client")
    parser.add_argument("--classes", type=int, default=600)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--participants", type=int, default=100)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--work", help="folder for the dataset, pack and run (default: a temporary one)")
    parser.add_argument("--json", help="write the results to this JSON file")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a further --set for the run (e.g. fl.cuda_graphs=true, fl.precision=bf16); repeatable")
    parser.add_argument("--smoke", action="store_true", help="tiny, on the CPU: see the module docstring")
    args = parser.parse_args(argv)
    if args.smoke:
        parser.set_defaults(**SMOKE)
        args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        raw, pack, run = work / "raw", work / "pack", work / "run"
        t0 = time.perf_counter()
        n = write_openimage(raw, args.clients, args.samples, args.classes)
        t1 = time.perf_counter()
        print(f"dataset: {n} images in {t1 - t0:.1f} s", flush=True)
        cli("pack-data", "openimage_mobilenet", "--set", f"data.root={raw}", "--set", f"data.image_size={args.image_size}",
            "--set", "data.filter_less=1", "--out", str(pack))
        t2 = time.perf_counter()
        print(f"packed in {t2 - t1:.1f} s", flush=True)
        sets = [f"data.root={pack}", f"data.image_size={args.image_size}", "data.filter_less=1", f"fl.rounds={args.rounds}",
                f"fl.participants_per_round={args.participants}", f"fl.local_steps={args.steps}", "fl.eval_every=1000", *args.set]
        out = cli("run", "openimage_mobilenet", "--device", args.device, "--out", str(run), *[a for s in sets for a in ("--set", s)])
        t3 = time.perf_counter()
    rates = {m.group(1): float(m.group(2).replace(",", "")) for m in re.finditer(r"^(\w+) seed \d+: ([\d,]+) samples/s trained on (\S+)", out, re.M)}
    device_line = next((line for line in out.splitlines() if "samples/s trained on" in line), "")
    if not rates:
        sys.exit(f"no 'samples/s trained' line in the run's output:\n{out[-2000:]}")
    paper_samples = 100 * 20 * 16
    doc = {"command": "benchmarks/gpu_run.py " + " ".join(sys.argv[1:] if argv is None else argv), "device": args.device,
           "device_line": device_line, "train_images": n, "image_size": args.image_size, "rounds": args.rounds,
           "participants": args.participants, "steps": args.steps, "sets": list(args.set), "samples_per_s": rates,
           "s_per_paper_round": {p: paper_samples / r for p, r in rates.items()},
           "write_s": t1 - t0, "pack_s": t2 - t1, "run_s": t3 - t2}
    try:
        import torch

        if args.device.startswith("cuda") and torch.cuda.is_available():
            doc["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    for p, r in rates.items():
        print(f"{p:<10} {r:12,.0f} samples/s trained  = {paper_samples / r:8.2f} s per paper round (100 x 20 x 16)")
    if {"baseline", "flamingo"} <= rates.keys():
        print(f"flamingo / baseline training rate: {rates['flamingo'] / rates['baseline']:.2f}x (same run, same device)")
    print(f"dataset {n} images written in {t1 - t0:.1f} s, packed in {t2 - t1:.1f} s, run ({args.rounds} rounds x 2 policies) {t3 - t2:.1f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
        stamp([Path(args.json)], command_line())  # timings: no sources (they date with the whole tree)
        print(f"results: {args.json}")


if __name__ == "__main__":
    main()
