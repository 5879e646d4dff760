"""Commands of the traces subpackage: ``prep-traces`` and ``synth-greenhub``."""

from __future__ import annotations

import argparse
import sys

from flamingo_sim.argtypes import count, number


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``prep-traces`` and ``synth-greenhub`` to the ``flamingo-sim`` parser."""
    p = sub.add_parser(
        "prep-traces",
        help="GreenHub dump -> selected, resampled, time-zone-shifted client traces",
        description=(
            "Read a GreenHub dump (parquet file, samples/part-*.parquet directory, or CSV dump), "
            "clean it, select devices by the paper's criteria, resample battery levels onto a "
            "10-minute grid with PCHIP, and write devices.parquet, clients.parquet and report.json."
        ),
    )
    p.add_argument("input", help="parquet file, directory of parquet parts, CSV file or directory of CSV dumps")
    p.add_argument("--out", default=None, help="output directory (default: traces/<input name>/)")
    p.add_argument("--format", default=None, choices=["parquet", "parquet-parts", "csv-pages", "csv-tables", "csv"],
                   help="input layout (default: detected)")
    p.add_argument("--devices", type=int, default=100, help="number of devices to keep (default 100; the library checks it)")
    p.add_argument("--select", default="first", choices=["first", "random", "best"], help="which passing devices to keep")
    p.add_argument("--seed", type=count(0), default=None, help="seed of --select random (default 0; with another --select, refused)")
    p.add_argument("--shifts", type=count(1, 24), default=24, help="one-hour time-zone shifts per device (default 24)")
    p.add_argument("--min-days", type=number(0.0, what="number of days"), default=28.0, help="criterion 1: minimum sampled period, days")
    p.add_argument("--min-samples-per-day", type=number(0.0), default=100.0, help="criterion 2: minimum mean samples per day")
    p.add_argument("--max-gap-h", type=number(0.0, low_open=True, what="number of hours"), default=24.0, help="criterion 3: largest allowed gap, hours")
    p.add_argument("--long-gap-h", type=number(0.0, low_open=True, what="number of hours"), default=6.0,
                   help="criterion 4: a gap longer than this is long, hours")
    p.add_argument("--max-long-gaps", type=count(0), default=15, help="criterion 4: most long gaps allowed")
    p.add_argument("--min-date", default="2017-10-15", help="drop samples before this date (UTC)")
    p.add_argument("--max-date", default=None, help="drop samples after this date (UTC; default today)")
    p.add_argument("--level-scale", default="auto", choices=["auto", "pct", "fraction"], help="battery_level scale")
    p.add_argument("--server-clock", default="lisbon", choices=["lisbon", "utc"],
                   help="timestamps are Europe/Lisbon wall time from 2018-10-28 on (GreenHub server; default) or all UTC")
    p.add_argument("--max-shifted-frac", type=number(0.0, 1.0, what="share"), default=0.01,
                   help="CSV rows with the wrong field count are skipped and counted; fail when a file has more than this share")
    p.add_argument("--network-hold-h", type=number(0.0, what="number of hours"), default=6.0,
                   help="a network reading (WiFi, cellular, none) holds this many hours on the grid, unknown beyond (default 6: a long gap)")
    p.set_defaults(func=_prep, cli_flags={
        "n_devices": "--devices", "n_shifts": "--shifts", "out_dir": "--out", "min_date": "--min-date", "max_date": "--max-date",
        "format": "--format", "max_shifted_frac": "--max-shifted-frac", "level_scale": "--level-scale", "server_clock": "--server-clock",
        "rule": "--select", "network_hold_h": "--network-hold-h",
    })

    s = sub.add_parser(
        "synth-greenhub",
        help="write a realistic synthetic GreenHub dump (Kaggle parquet and ';' CSV layouts)",
        description="Generate a synthetic GreenHub dump in the real layouts, quirks included (the layouts and quirks: "
                    "the documentation's Traces page, docs/traces.md).",
    )
    s.add_argument("--out", required=True, help="output directory")
    s.add_argument("--devices", type=count(1), default=160,
                   help="number of devices (default 160; at most what this machine's memory holds, about 5 MB a device)")
    s.add_argument("--seed", type=count(0), default=0, help="random seed")
    s.add_argument("--parts", type=count(1), default=4, help="parquet parts (samples/part-NNNN.parquet; at most 10,000)")
    s.add_argument("--layouts", default="parquet,csv-pages",
                   help="comma list of parquet, csv-pages, csv-tables, csv-2019, csv-2018 (default parquet,csv-pages)")
    s.set_defaults(func=_synth, cli_flags={"layouts": "--layouts", "out_dir": "--out", "n_devices": "--devices", "n_parts": "--parts"})


def _prep(args: argparse.Namespace) -> int:
    from flamingo_sim.errors import InputDataError
    from flamingo_sim.traces.pipeline import PrepOptions, prep_traces
    from flamingo_sim.traces.select import Criteria

    if args.seed is not None and args.select != "random":  # it was ignored: the same devices, whatever the seed
        raise InputDataError(f"--seed: seeds --select random, and --select is {args.select!r}, which draws nothing: add --select random, "
                             "or drop --seed")

    opts = PrepOptions(
        criteria=Criteria(
            min_days=args.min_days,
            min_samples_per_day=args.min_samples_per_day,
            max_gap_h=args.max_gap_h,
            long_gap_h=args.long_gap_h,
            max_long_gaps=args.max_long_gaps,
        ),
        n_devices=args.devices,
        rule=args.select,
        seed=0 if args.seed is None else args.seed,
        n_shifts=args.shifts,
        min_date=args.min_date,
        max_date=args.max_date,
        level_scale=args.level_scale,
        server_clock=args.server_clock,
        max_shifted_frac=args.max_shifted_frac,
        format=args.format,
        network_hold_h=args.network_hold_h,
    )
    report = prep_traces(args.input, args.out, opts)
    d = report["devices"]
    print(
        f"{report['n_clients']} clients from {d['selected']} devices ({d['passing_all']} of {d['seen']} pass"
        + (f"; {d['dropped_single_sample']} dropped: a single sample" if d.get("dropped_single_sample") else "") + "); "
        f"wrote {report['output']}",
        file=sys.stderr,
    )
    for w in report["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    return 0


def _synth(args: argparse.Namespace) -> int:
    from flamingo_sim.traces.synth import SynthOptions, write_synthetic_dump

    layouts = tuple(x.strip() for x in args.layouts.split(",") if x.strip())
    paths = write_synthetic_dump(args.out, SynthOptions(n_devices=args.devices, seed=args.seed, n_parts=args.parts, layouts=layouts))
    for p in paths:
        print(p, file=sys.stderr)
    return 0
