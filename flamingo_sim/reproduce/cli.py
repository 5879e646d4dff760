"""``flamingo-sim reproduce``: the paper's three tasks, baseline vs Flamingo, and one report."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "reproduce",
        help="the paper's evaluation in one command: three tasks, both policies, Tables 1-3 and Figure 6",
        description="Run the shipped experiments (OpenImage/MobileNetV2, OpenImage/ShuffleNetV2, Speech/ResNet-34) for "
        "the baseline and Flamingo on the same seeds, and write OUT/report.md and report.html: Table 1 (profiles), "
        "Table 2 (time and energy to target, bootstrap intervals), Table 3 (user experience per phone) and a Figure 6 "
        "analogue, each beside the paper's numbers. An existing OUT is resumed.",
    )
    p.add_argument("--out", default="runs/reproduce", help="output directory (default: runs/reproduce)")
    p.add_argument("--seeds", type=int, help="seeds per task (default: 3, or 2 with --quick)")
    p.add_argument("--quick", action="store_true", help="40 rounds per task instead of the shipped 100 (a few minutes on 2 cores)")
    p.add_argument("--tasks", nargs="+", metavar="TASK", help="only these tasks (experiment names; default: all three)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="[TASK:]KEY=VALUE",
                   help="override a config key for every task, or for one with TASK:, e.g. "
                   "--set openimage_mobilenet:data.root=/data/openimage (repeatable)")
    p.set_defaults(func=_reproduce, cli_flags={"overrides": "--set", "tasks": "--tasks", "n_seeds": "--seeds"})


def _reproduce(args: argparse.Namespace) -> int:
    from flamingo_sim.reproduce import reproduce

    md = reproduce(args.out, n_seeds=args.seeds, quick=args.quick, tasks=args.tasks, overrides=args.overrides)
    print(f"report: {md}")
    print(f"        {md.with_suffix('.html')}")
    return 0
