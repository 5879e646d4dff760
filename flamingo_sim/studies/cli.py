"""``flamingo-sim reproduce``: the paper's three tasks, baseline vs Flamingo, and one report;
``flamingo-sim sensitivity``: how much each modelling knob moves the headline ratios."""

from __future__ import annotations

import argparse
import shlex

from flamingo_sim.fl.cli import add_parallel_arguments, add_readings_argument, execution

#: Where ``reproduce`` writes without ``--out``, and where ``reproduce --quick`` does.
DEFAULT_OUT, QUICK_OUT = "runs/reproduce", "runs/reproduce-quick"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "reproduce",
        help="the paper's evaluation in one command: three tasks, both policies, Tables 1-3 and Figure 6",
        description="Run the shipped experiments (OpenImage/MobileNetV2, OpenImage/ShuffleNetV2, Speech/ResNet-34) for "
        "the baseline and Flamingo on the same seeds, and write OUT/report.md and report.html: Table 1 (profiles), "
        "Table 2 (time and energy to target, bootstrap intervals), Table 3 (user experience per phone) and a Figure 6 "
        "analogue, each beside the paper's numbers. An existing OUT is continued (the same command again).",
    )
    p.add_argument("--out", help=f"output directory (default: {DEFAULT_OUT}, or {QUICK_OUT} with --quick: a quick study and "
                                 "a full one never share a folder)")
    p.add_argument("--seeds", type=int, help="seeds per task (default: 3, or 2 with --quick)")
    p.add_argument("--quick", action="store_true", help="40 rounds per task instead of the shipped 100 (a few minutes on 2 cores)")
    p.add_argument("--tasks", nargs="+", metavar="TASK", help="only these tasks (experiment names; default: all three)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="[TASK:]KEY=VALUE",
                   help="override a config key for every task, or for one with TASK:, e.g. "
                   "--set openimage_mobilenet:data.root=/data/openimage (repeatable)")
    p.add_argument("--data-root", metavar="DIR", help="train on real data: the folder holding FedScale's data sets (open_images, "
                   "google_speech); each is packed once into OUT/packs and shared by the tasks and seeds (a task's own data.root, "
                   "set with --set TASK:data.root=..., is packed the same way)")
    add_readings_argument(p)
    p.add_argument("--attribution", action="store_true",
                   help="also run the walk from the paper's readings to the default, one reading at a time, and add "
                        "'Why our Table 2 differs from the paper's' (a table and a waterfall) to the report")
    add_parallel_arguments(p, "the (task, seed, policy) units")
    p.set_defaults(func=_reproduce, cli_flags={"overrides": "--set", "tasks": "--tasks", "n_seeds": "--seeds", "data_root": "--data-root"})

    p = sub.add_parser(
        "sensitivity",
        help="vary config knobs one at a time: a table and a tornado chart of speedup and energy efficiency",
        description="Run the experiment once as is and once per --vary value (one knob at a time), and write "
                    "sensitivity.csv, sensitivity.md and tornado.png into --out. An interrupted grid continues when the same "
                    "command runs again; more --vary values later reuse the runs already there.",
    )
    p.add_argument("experiment", help="experiment YAML (e.g. experiments/openimage_mobilenet.yaml) or the name of a shipped one (e.g. openimage_mobilenet)")
    p.add_argument("--vary", action="append", default=[], metavar="KEY=V1,V2,...",
                   help="a config key by its dotted path and the values to try, e.g. "
                        "--vary policy.interference.shared_core_slowdown=1,1.5,2 (repeatable)")
    p.add_argument("--seeds", type=int, help="run N seeds per point, starting from the config's first seed")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key in every run, e.g. --set fl.rounds=50 (repeatable)")
    p.add_argument("--out", required=True, help="output directory (absent, empty, or an earlier sensitivity grid to continue)")
    p.add_argument("--unknowns", action="store_true",
                   help="vary every unknown of the device model too (each with its plausible range and reason) and report each "
                        "ratio's range over them beside its seed interval and the paper's figure (range.json)")
    p.add_argument("--readings", choices=("default", "paper"), default="default",
                   help="'paper': every reading the paper's text decides set to its words (as for run and reproduce)")
    add_parallel_arguments(p, "the (point, seed, policy) units")
    p.set_defaults(func=_sensitivity, cli_flags={"overrides": "--set", "n_seeds": "--seeds"})


def _reproduce(args: argparse.Namespace) -> int:
    from flamingo_sim.studies.reproduce import reproduce

    out = args.out if args.out is not None else (QUICK_OUT if args.quick else DEFAULT_OUT)
    md = reproduce(out, n_seeds=args.seeds, quick=args.quick, tasks=args.tasks, overrides=args.overrides,
                   execution=execution(args), again=_again(args, out), readings=args.readings, attribution=args.attribution,
                   data_root=args.data_root)
    print(f"report: {md}")
    print(f"        {md.with_suffix('.html')}")
    return 0


def _sensitivity(args: argparse.Namespace) -> int:
    from pathlib import Path

    from flamingo_sim.fl.readings import readings_overrides
    from flamingo_sim.studies.reproduce.paper import TABLE2
    from flamingo_sim.studies.sensitivity import run_sensitivity

    row = TABLE2.get(Path(args.experiment).stem)
    paper = None if row is None else {"speedup": row.speedup, "energy_efficiency": row.energy_efficiency}
    table = run_sensitivity(args.experiment, args.vary, out_dir=args.out, overrides=[*readings_overrides(args.readings), *args.overrides],
                            n_seeds=args.seeds, execution=execution(args), again=_again(args), unknowns=args.unknowns, paper=paper)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    return 0


def _again(args: argparse.Namespace, out: str | None = None) -> str:
    """The command that continues this study: itself (naming ``out`` where it was the default)."""
    argv = list(getattr(args, "argv", []))
    if args.out is None and out is not None:
        argv += ["--out", out]
    return "flamingo-sim " + shlex.join(argv)
