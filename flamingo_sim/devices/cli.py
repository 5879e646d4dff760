"""Commands of the devices subpackage: ``flamingo-sim profiles`` (the Table 1 view)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def register(sub: argparse._SubParsersAction) -> None:
    """Add this subpackage's commands to the ``flamingo-sim`` parser."""
    p = sub.add_parser(
        "profiles",
        help="show every (phone, DNN model) profile: viable choices, speedup and energy efficiency",
        description="For every (phone, DNN model) profile: the viable execution choices in order with step "
        "latency, power and energy, and the speedup and energy efficiency of Flamingo's chosen execution "
        "(the first viable choice) over the PyTorch default 4567 (the paper's Table 1).",
    )
    p.add_argument("--profiles-dir", default="profiles", type=Path, help="directory with phones.yaml and <phone>/<model>.yaml (default: profiles)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_profiles)


def profiles_report(profiles_dir: str | Path) -> list[dict[str, Any]]:
    """One record per profile file found: phone, model, provenance, choices, speedup, energy_efficiency."""
    from flamingo_sim.devices.profiles import load_profile
    from flamingo_sim.devices.soc import load_phones

    profiles_dir = Path(profiles_dir)
    phones = load_phones(profiles_dir)
    out = []
    for name in sorted(phones):
        for path in sorted((profiles_dir / name).glob("*.yaml")):
            prof = load_profile(profiles_dir, name, path.stem, phones=phones)
            out.append({
                "phone": name,
                "model": prof.model,
                "provenance": prof.provenance,
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


def _profiles(args: argparse.Namespace) -> int:
    report = profiles_report(args.profiles_dir)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    for r in report:
        print(f"{r['phone']} / {r['model']} ({r['provenance']}): speedup {r['speedup']:.2f}x, "
              f"energy efficiency {r['energy_efficiency']:.2f}x; pruned: {' '.join(r['pruned']) or '-'}")
        print(f"  {'choice':>6} {'latency_s':>10} {'power_w':>8} {'energy_j':>9}")
        for c in r["choices"]:
            print(f"  {c['label']:>6} {c['step_latency_s']:>10.4g} {c['power_w']:>8.4g} {c['step_energy_j']:>9.4g}")
    return 0
