"""``flamingo-sim report``: figures and a summary of one or several run directories."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="figures (PNG, SVG) and a Markdown/HTML summary of run directories",
        description="Draw accuracy vs virtual time, clients online and lost, training energy, execution-choice mix and "
        "interference per phone for one run directory, or overlay several runs of the same experiment. "
        "Writes RUN_DIR/report/ (the first RUN_DIR's, unless --out).",
    )
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directory written by `flamingo-sim run`")
    p.add_argument("--out", help="report directory (default: RUN_DIR/report of the first RUN_DIR)")
    p.add_argument("--labels", nargs="+", metavar="LABEL", help="one legend label per RUN_DIR (default: the directory names)")
    p.add_argument("--format", dest="formats", nargs="+", choices=("png", "svg", "pdf"), default=["png", "svg"],
                   help="image formats to write (default: png svg)")
    p.set_defaults(func=_report, cli_flags={"labels": "--labels", "out_dir": "--out"})

    f = sub.add_parser(
        "fidelity",
        help="measured profiles (flamingo-sim profile) against the shipped ones: per-choice errors, and the headline with each",
        description="For every measured profile in MEASURED_DIR, print per execution choice the simulator's step latency and "
        "energy (the shipped profile of the same phone, or the one named with --as) beside the measured ones and the error; "
        "with --headline, run the experiment on the shipped profiles and on the measured ones in their place and compare.",
    )
    f.add_argument("measured_dir", metavar="MEASURED_DIR", help="profiles directory written by `flamingo-sim profile`")
    f.add_argument("--as", dest="as_phone", action="append", default=[], metavar="MEASURED=SHIPPED",
                   help="compare the measured phone MEASURED with the shipped phone SHIPPED (repeatable)")
    f.add_argument("--model", action="append", default=[], help="only this DNN model's profiles (repeatable)")
    f.add_argument("--profile-set", default="paper", help="the shipped profile set compared with (paper or anchored)")
    f.add_argument("--headline", metavar="EXPERIMENT", help="also run EXPERIMENT with the shipped and with the measured profiles")
    f.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key of the --headline runs (repeatable)")
    f.add_argument("--out", help="directory of the --headline runs (default: a temporary directory)")
    f.set_defaults(func=_fidelity)


def _fidelity(args: argparse.Namespace) -> int:
    from pathlib import Path

    from flamingo_sim.errors import FlamingoError
    from flamingo_sim.report.fidelity import check_headline, compare_profiles, format_fidelity, format_headline, parse_as, run_headline
    from flamingo_sim.resources import shipped

    if not args.headline and (args.overrides or args.out is not None):
        flag = "--set" if args.overrides else "--out"
        raise FlamingoError(f"{flag}: applies to the --headline runs, and no --headline EXPERIMENT was given: add one, or drop {flag}")
    as_phone = parse_as(args.as_phone)
    table = format_fidelity(compare_profiles(Path(args.measured_dir), shipped("profiles"), as_phone, args.profile_set, args.model))
    # the headline's experiment, --set and --out checked before the table is printed: a refusal is the only line
    plan = None if not args.headline else check_headline(args.headline, Path(args.measured_dir), as_phone, overrides=args.overrides,
                                                         out_dir=None if args.out is None else Path(args.out))
    print(table, flush=True)
    if plan is not None:
        change = run_headline(plan, log=lambda m: print(m, file=sys.stderr))
        print()
        print(format_headline(change))
    return 0


def _report(args: argparse.Namespace) -> int:
    from flamingo_sim.report.data import load_runs
    from flamingo_sim.report.write import write_report

    runs = load_runs(args.run_dirs, args.labels)
    result = write_report(runs, args.out, formats=args.formats)
    # said once the report is written: a refused --out is the only line, not after these
    for run in runs:
        if run.summary.get("incomplete"):
            print(f"flamingo-sim report: {run.path}: incomplete run: {run.summary['incomplete']}", file=sys.stderr)
    print(f"report: {result.markdown}")
    print(f"        {result.html}")
    for paths in result.figures.values():
        print(f"figure: {', '.join(str(p) for p in paths)}")
    return 0
