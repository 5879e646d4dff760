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


def _report(args: argparse.Namespace) -> int:
    from flamingo_sim.report.data import load_runs
    from flamingo_sim.report.write import write_report

    runs = load_runs(args.run_dirs, args.labels)
    for run in runs:
        if run.summary.get("incomplete"):
            print(f"flamingo-sim report: {run.path}: incomplete run: {run.summary['incomplete']}", file=sys.stderr)
    result = write_report(runs, args.out, formats=args.formats)
    print(f"report: {result.markdown}")
    print(f"        {result.html}")
    for paths in result.figures.values():
        print(f"figure: {', '.join(str(p) for p in paths)}")
    return 0
