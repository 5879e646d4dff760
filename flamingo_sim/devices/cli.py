"""Commands of the devices subpackage: ``flamingo-sim profiles`` (the Table 1 view) and
``flamingo-sim profile`` (measure this Linux machine's profile, :mod:`.profiler`)."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any, Sequence

from flamingo_sim.argtypes import AMBIENT_C, count, number
from flamingo_sim.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    """Add this subpackage's commands to the ``flamingo-sim`` parser."""
    p = sub.add_parser(
        "profiles",
        help="show every (phone, DNN model) profile: viable choices, speedup and energy efficiency",
        description="For every (phone, DNN model) profile: the viable execution choices in order with step "
        "latency, power and energy, and the speedup and energy efficiency of Flamingo's chosen execution "
        "(the first viable choice) over the PyTorch default 4567 (the paper's Table 1).",
    )
    p.add_argument("--profiles-dir", default=None, type=Path, action="append",
                   help="directory with phones.yaml and <phone>/<model>.yaml, searched before the shipped profiles "
                   "(repeatable; default: the user's profiles directory, $FLAMINGO_SIM_HOME/profiles or "
                   "~/.local/share/flamingo-sim/profiles)")
    p.add_argument("--profile-set", default=None, metavar="NAME",
                   help="which profile set to list: paper (Table 1 matched, the default), anchored (bounded thread contention) "
                   "or public (public measurements only); see phones.profile_set")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table (with each profile's notes: its sources)")
    p.add_argument("--contention", action="store_true",
                   help="instead: each choice's step while the owner uses the phone, under the default interference model and "
                   "the fair one: latency and energy over the uncontended step, the owner's work lost, where the threads run "
                   "(Flamingo's choices pinned, the baseline's 4567 not); with --json, every model")
    p.add_argument("--check", action="store_true",
                   help="check every profile set instead (or only --profile-set, if given): every choice draws "
                   "at most twice its cores' busy power, and the device tree's coefficients imply a plausible voltage "
                   "(one line per violation, exit 1 if any); each choice drawing below its cores' busy power is named with "
                   "the mechanism its power needs (waiting cores at a lower operating point, or in an idle state). No value "
                   "is altered (flamingo_sim.devices.power)")
    p.set_defaults(func=_profiles, cli_flags={"profile_set": "--profile-set"})

    p = sub.add_parser(
        "thermal",
        help="sustained training per phone and DNN model under the thermal model: steady state, throttling onset, throttled step",
        description="For the baseline's choice (4567) and Flamingo's (the fastest viable one) of every shipped profile: the "
        "steady-state temperature of training without pause at --ambient-c, when the cluster's throttling threshold is reached, "
        "and the throttled step latency (devices.thermal; the catalogue's body and throttle entries).",
    )
    p.add_argument("--ambient-c", type=AMBIENT_C, default=30.0, help="the trace's (ambient) temperature, degC (default: 30, the engine's "
                   "default where traces carry none)")
    p.add_argument("--profile-set", default="paper", metavar="NAME", help="paper (default), anchored or public")
    p.add_argument("--out", type=Path, default=None, help="also write the rows as JSON here")
    p.set_defaults(func=_thermal)

    p = sub.add_parser(
        "profile",
        help="measure this Linux machine's execution-choice profile (latency, and energy where readable)",
        description="Discover this machine's cores, build the simulator's state space on them, and for each "
        "execution choice pin the process to its cores (one torch thread per core), warm up, and time real "
        "training steps of the model on random inputs; power comes from RAPL, battery sysfs or "
        "termux-battery-status where readable, minus the idle power. Writes a 'measured' profile that the "
        "simulator accepts unchanged, and registers the machine as a phone of the catalogue "
        "(<profiles-dir>/phones.d/<phone>.yaml) if it is not there yet; with --out FILE only the profile is written, "
        "unless --profiles-dir names where to register the phone.",
    )
    p.add_argument("--model", required=True, help="mobilenet_v2, shufflenet_v2_x2, resnet34, or the proxies mlp, logreg")
    p.add_argument("--steps", type=count(1), default=10, help="timed training steps per choice (default: 10)")
    p.add_argument("--warmup-steps", type=count(0), default=2, help="untimed steps per choice before timing (default: 2)")
    p.add_argument("--batch", type=count(1), default=16, dest="batch_size", help="minibatch size (default: 16)")
    p.add_argument("--image-size", type=count(1), default=None, help="input images are 3 x S x S (default: 224, 32 for mlp/logreg)")
    p.add_argument("--n-classes", type=count(2, 1_000_000), default=10, help="output classes of the model (default: 10; at most 10^6)")
    p.add_argument("--idle-s", type=number(0.0, what="number of seconds"), default=5.0, help="seconds of idle power measurement before the run (default: 5)")
    p.add_argument("--seed", type=count(0), default=0, help="seed of the weights and the random batch (default: 0)")
    p.add_argument("--phone", default=None, help="name of this machine in the catalogue (default: local_<hostname>)")
    p.add_argument("--profiles-dir", default=None, type=Path,
                   help="where to write the profile and catalogue entry (default: the user's profiles directory, "
                   "$FLAMINGO_SIM_HOME/profiles or ~/.local/share/flamingo-sim/profiles; never the shipped profiles)")
    p.add_argument("--out", default=None, type=Path, help="write the profile here instead of <profiles-dir>/<phone>/<model>.yaml")
    p.add_argument("--capacity-mah", type=number(0.0, low_open=True, what="capacity", unit="mAh"), default=None,
                   help="battery capacity for the catalogue entry (default: from sysfs, else 4000)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=_profile, cli_flags={
        "steps": "--steps", "warmup_steps": "--warmup-steps", "batch_size": "--batch", "n_classes": "--n-classes",
        "image_size": "--image-size", "idle_s": "--idle-s", "phone_name": "--phone", "out": "--out",
    })


def profiles_report(profiles_dirs: Sequence[str | Path], profile_set: str = "paper") -> list[dict[str, Any]]:
    """One record per (phone, model) profile of ``profile_set`` found on the search path
    ``profiles_dirs`` (the first directory having one wins): phone, model, profile_set,
    provenance, file, notes (how the numbers were obtained, with their sources), choices,
    pruned, speedup, energy_efficiency."""
    from flamingo_sim.devices.catalogue import ProfileDirs
    from flamingo_sim.devices.profiles import PROFILE_SETS, profile_path

    if profile_set not in PROFILE_SETS:
        raise ConfigError(f"--profile-set: expected one of {', '.join(PROFILE_SETS)}, got {profile_set!r}")
    search = ProfileDirs.of(profiles_dirs)
    phones = search.phones()
    out = []
    for name in sorted(phones):
        found = {f.stem for d in search.dirs for f in profile_path(d, name, "x", profile_set).parent.glob("*.yaml")}
        for model in sorted(found):
            prof = search.load(name, model, phones, profile_set)
            out.append({
                "phone": name,
                "file": str(search.path(name, model, profile_set)),
                "model": prof.model,
                "profile_set": profile_set,
                "provenance": prof.provenance,
                "notes": prof.notes,
                "choices": [
                    {"cores": list(c.cores), "label": c.label, "step_latency_s": c.step_latency_s,
                     "power_w": c.power_w, "step_energy_j": c.step_energy_j}
                    for c in prof.choices
                ],
                "pruned": list(prof.pruned_labels),
                "speedup": prof.speedup,
                "energy_efficiency": prof.energy_efficiency,
            })
    return out


def _profile(args: argparse.Namespace) -> int:
    import sys

    from flamingo_sim.devices.profiler import ProfileRequest, run_profile

    req = ProfileRequest(args.model, steps=args.steps, warmup_steps=args.warmup_steps, batch_size=args.batch_size,
                         image_size=args.image_size, n_classes=args.n_classes, seed=args.seed, idle_s=args.idle_s)
    _check_step_memory(args.batch_size, args.image_size or 224)
    from flamingo_sim.resources import user_profiles_dir

    register = args.out is None or args.profiles_dir is not None  # --out FILE alone: the profile only, nothing else written
    summary = run_profile(req, args.profiles_dir or user_profiles_dir(), phone_name=args.phone, out=args.out, capacity_mah=args.capacity_mah,
                          log=lambda s: print(s, file=sys.stderr), register=register)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"wrote {summary['profile']}" + (f" and {summary['catalogue']}" if summary["catalogue"] else ""))
    if summary["catalogue"]:
        print(f"registered this machine as phone {summary['phone']!r} in {summary['catalogue']}: runs find it there "
              "(phones.profiles_dir; null: the user's profiles directory)")
    elif not register:
        print(f"phone {summary['phone']!r} not registered (--out without --profiles-dir): to run it, give --profiles-dir DIR, or leave out --out")
    print(f"{summary['phone']} / {summary['model']}: {summary['machine']}")
    print(f"energy: {summary['energy_source'] or '-'} ({summary['energy_note']})")
    print(f"  {'choice':>6} {'latency_s':>10} {'power_w':>8} {'steps':>5}")
    for c in summary["choices"]:
        pw = f"{c['power_w']:>8.4g}" if c["power_w"] is not None else f"{'-':>8}"
        print(f"  {c['label']:>6} {c['step_latency_s']:>10.4g} {pw} {c['n_steps']:>5}")
    return 0


#: What one training step holds per byte of its input: MobileNetV2 at 224 px keeps 1,205 MiB of saved tensors for 16
#: images of 0.574 MiB each (``flamingo_sim.devices.scheduling.TRAFFIC_BYTES_PER_STEP``'s count), 131x.
STEP_BYTES_PER_INPUT_BYTE = 131


def _check_step_memory(batch_size: int, image_size: int) -> None:
    """Refuse, in one line and before anything is measured or printed, a step this machine's memory cannot hold (issue
    50: ``--image-size 100000`` printed two lines, then a 30-line allocation traceback)."""
    import os

    need = batch_size * 3 * image_size**2 * 4 * STEP_BYTES_PER_INPUT_BYTE
    have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if need > have:
        raise ConfigError(f"--batch {batch_size} --image-size {image_size}: a training step needs about {need / 2**30:,.0f} GiB "
                          f"({STEP_BYTES_PER_INPUT_BYTE}x its input, as MobileNetV2 at 224 px holds), more than this machine's "
                          f"{have / 2**30:,.0f} GiB")


def _num(x: float | None, width: int) -> str:
    return f"{x:>{width}.4g}" if x is not None else f"{'-':>{width}}"


def _thermal(args: argparse.Namespace) -> int:
    from flamingo_sim.devices.catalogue import ProfileDirs
    from flamingo_sim.devices.thermal_table import format_rows, sustained_rows
    from flamingo_sim.io import atomic_path
    from flamingo_sim.resources import shipped

    if args.out is not None:  # every refusal of --out before the table is printed (issue 50: the table, then the error)
        import os

        from flamingo_sim.provenance import read

        if args.out.is_dir():
            raise ConfigError(f"--out {args.out}: a directory; expected the path of a JSON file to write")
        existing = next(p for p in (args.out.parent, *args.out.parent.parents) if p.exists())
        if not existing.is_dir() or not os.access(existing, os.W_OK):
            raise ConfigError(f"--out {args.out}: {existing} is not a writable directory")
        args.out.parent.mkdir(parents=True, exist_ok=True)  # the folder the user asked for: a refusal here comes first too
        read(args.out.parent)  # a provenance.json there that this tool did not write: one line, before anything is written
    dirs = ProfileDirs.of([shipped("profiles")])
    phones = dirs.phones()
    profiles = [dirs.load(p, m, phones, args.profile_set) for m in dirs.models() for p in sorted(phones)
                if dirs.find(p, m, args.profile_set) is not None]
    rows = sustained_rows(profiles, args.ambient_c)
    print(format_rows(rows, args.ambient_c))
    if args.out is not None:
        from flamingo_sim.provenance import command_line, stamp

        with atomic_path(args.out) as tmp:
            tmp.write_text(json.dumps({"command": f"flamingo-sim thermal --ambient-c {args.ambient_c:g} --profile-set {args.profile_set}",
                                       "ambient_c": args.ambient_c, "rows": rows}, indent=2) + "\n")
        # the commit, command and machine beside the file (provenance.json); the thermal model and the catalogue as its sources
        stamp([args.out], command_line(program="flamingo-sim"),
              ["flamingo_sim/devices/thermal.py", "flamingo_sim/devices/thermal_table.py", "profiles"])
    return 0


def _profiles(args: argparse.Namespace) -> int:
    from flamingo_sim.errors import FlamingoError
    from flamingo_sim.resources import shipped, user_profiles_dir

    for d in args.profiles_dir or []:
        if not d.is_dir():
            raise FlamingoError(f"--profiles-dir {d}: not a directory")
    search = [*(args.profiles_dir or [user_profiles_dir()]), shipped("profiles")]
    if args.check:
        return _check(search, args.profile_set)
    if args.contention:
        rows = contention_report(search, args.profile_set or "paper")
        if args.json:
            print(json.dumps({"command": f"flamingo-sim profiles --contention --profile-set {args.profile_set or 'paper'} --json",
                              "rows": rows}, indent=2))
            return 0
        print(format_contention(rows))
        return 0
    args.profile_set = args.profile_set or "paper"
    report = profiles_report(search, args.profile_set)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    from flamingo_sim.devices.profiles import PROFILE_SETS

    others = ", ".join(s for s in PROFILE_SETS if s != args.profile_set)
    print(f"profile set {args.profile_set} (others: {others}; --profile-set NAME; --json adds each profile's sources)")
    for r in report:
        eff = f"{r['energy_efficiency']:.2f}x" if r["energy_efficiency"] is not None else "- (latency only)"
        print(f"{r['phone']} / {r['model']} ({r['provenance']}): speedup {r['speedup']:.2f}x, "
              f"energy efficiency {eff}; pruned: {' '.join(r['pruned']) or '-'}")
        print(f"  {'choice':>6} {'latency_s':>10} {'power_w':>8} {'energy_j':>9}")
        for c in r["choices"]:
            print(f"  {c['label']:>6} {c['step_latency_s']:>10.4g} {_num(c['power_w'], 8)} {_num(c['step_energy_j'], 9)}")
    return 0


def check_report(profiles_dirs: Sequence[str | Path], profile_sets: Sequence[str]) -> tuple[list[str], list[str], int]:
    """The checks (:mod:`flamingo_sim.devices.power`) of every profile of ``profile_sets`` on the search path, and of
    each SoC's power against the device tree: one line per violation, one per choice whose power needs waiting
    cores (with the mechanism), and the number of profiles checked."""
    from flamingo_sim.devices.catalogue import ProfileDirs
    from flamingo_sim.devices.power import check_profile, voltage_checks, waiting_mechanisms
    from flamingo_sim.devices.profiles import profile_path

    search = ProfileDirs.of(profiles_dirs)
    phones = search.phones()
    lines: list[str] = []
    waiting: list[str] = []
    socs: dict[str, Any] = {}
    for phone in phones.values():
        socs.setdefault(phone.soc.name, phone)
    for phone in socs.values():
        lines += voltage_checks(phone)
    n = 0
    for pset in profile_sets:
        for name in sorted(phones):
            found = {f.stem for d in search.dirs for f in profile_path(d, name, "x", pset).parent.glob("*.yaml")}
            for model in sorted(found):
                n += 1
                prof = search.load(name, model, phones, pset)
                lines += [v.line(pset) for v in check_profile(prof)]
                waiting += _waiting_line(pset, prof, waiting_mechanisms(prof))
    return lines, waiting, n


def _waiting_line(pset: str, prof: Any, found: Sequence[Any]) -> list[str]:
    """One line per profile: its choices below their cores' busy power (share of it), by the mechanism each needs."""
    from flamingo_sim.devices.power import IDLE_STATES, OPERATING_POINT

    if not found:
        return []
    parts = []
    for mechanism in (IDLE_STATES, OPERATING_POINT):
        mine = [f"{w.choice} {w.share:.2f}" for w in found if w.mechanism == mechanism]
        if mine:
            parts.append(f"{mechanism}: {', '.join(mine)}")
    return [f"{pset}/{prof.phone.name}/{prof.model}: {'; '.join(parts)}"]


def _check(search: Sequence[Path], profile_set: str | None) -> int:
    from flamingo_sim.devices.power import MAX_OVER_PHYSICAL
    from flamingo_sim.devices.profiles import PROFILE_SETS

    if profile_set is not None and profile_set not in PROFILE_SETS:
        raise ConfigError(f"--profile-set: expected one of {', '.join(PROFILE_SETS)}, got {profile_set!r}")
    sets = (profile_set,) if profile_set else PROFILE_SETS
    lines, waiting, n = check_report(search, sets)
    if waiting:
        print("choices drawing below their cores' busy power (their share of it), by the mechanism that power needs: waiting "
              "cores in an idle state part of the step (cpuidle, threads asleep), or at a lower operating point (schedutil/WALT); "
              "measurements, not violations:")
        for line in waiting:
            print(f"  {line}")
    for line in lines:
        print(line)
    print(f"{len(lines)} violation(s) in {n} profile(s) of {', '.join(sets)} (checks: at most "
          f"{MAX_OVER_PHYSICAL:g}x the cores' busy power; the device tree's coefficients imply a plausible voltage)")
    return 1 if lines else 0


def contention_report(profiles_dirs: Sequence[str | Path], profile_set: str = "paper") -> list[dict[str, Any]]:
    """Per (phone, DNN model, choice, model): the step while the owner uses the phone
    (:func:`flamingo_sim.devices.scheduling.contention`) under ``android`` (the default) and ``fair``, every choice
    pinned (Flamingo's) and the baseline's ``4567`` unpinned too."""
    from flamingo_sim.devices.catalogue import ProfileDirs
    from flamingo_sim.devices.execution import InterferenceModel
    from flamingo_sim.devices.profiles import profile_path
    from flamingo_sim.devices.scheduling import contention, stall_share

    search = ProfileDirs.of(profiles_dirs)
    phones = search.phones()
    out = []
    for name in sorted(phones):
        found = {f.stem for d in search.dirs for f in profile_path(d, name, "x", profile_set).parent.glob("*.yaml")}
        for model in sorted(found):
            prof = search.load(name, model, phones, profile_set)
            for c in prof.all_choices:  # 4567 both ways: the baseline's unpinned, Flamingo's pinned (exploring, charging)
                for pinned in ((False, True) if c.cores == prof.baseline.cores else (True,)):
                    for im in (InterferenceModel(), InterferenceModel(model="fair")):
                        stall = stall_share(prof, c.cores)
                        got = contention(prof.phone, c.cores, pinned, im, c.step_latency_s, model, stall)
                        # the rule the contended step replaced (issue 48): each thread an equal part at its speed
                        fixed = contention(prof.phone, c.cores, pinned, dataclasses.replace(im, step="slowest_thread"), c.step_latency_s,
                                           model, stall)
                        out.append({"phone": name, "model": model, "choice": c.label, "pinned": pinned, "interference": im.model,
                                    "latency_factor": got.latency_factor, "energy_factor": got.energy_factor,
                                    "foreground_loss": got.foreground_loss, "placement": got.placement.describe(),
                                    "stall_share": stall, "latency_factor_slowest_thread": fixed.latency_factor})
    return out


def format_contention(rows: Sequence[dict[str, Any]]) -> str:
    head = (f"{'phone':<14} {'model':<17} {'choice':<6} {'threads':<8} {'model':<8} {'latency':>8} {'(fixed)':>8} {'energy':>8} "
            f"{'owner loses':>12}  where")
    lines = ["each choice's step while the owner uses the phone, over the step without the owner (flamingo_sim.devices.scheduling; "
             "(fixed): the earlier rule, each thread an equal part at its core's speed)",
             head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['phone']:<14} {r['model']:<17} {r['choice']:<6} {'pinned' if r['pinned'] else 'unpinned':<8} "
                     f"{r['interference']:<8} {r['latency_factor']:>7.2f}x {r['latency_factor_slowest_thread']:>7.2f}x "
                     f"{r['energy_factor']:>7.2f}x {100 * r['foreground_loss']:>11.1f}%  "
                     f"{r['placement']}")
    return "\n".join(lines)
