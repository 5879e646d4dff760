"""The ``flamingo-sim`` command line: parses arguments, calls the library, prints errors as one line.

Each subpackage owns the arguments of its own commands in its ``cli`` module, which exposes
``register(subparsers)``; the heavy imports happen inside the handlers, so ``--help`` is fast.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from flamingo_sim import __version__
from flamingo_sim.errors import FlamingoError, in_cli_terms

#: Modules whose ``register(subparsers)`` adds commands, in the order ``--help`` lists them.
COMMAND_MODULES = (
    "flamingo_sim.traces.cli",
    "flamingo_sim.devices.cli",
    "flamingo_sim.fl.cli",
    "flamingo_sim.report.cli",
)


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = argparse.ArgumentParser(
        prog="flamingo-sim",
        description="Trace-driven federated-learning simulator for real phones (battery, energy, CPU cores).",
    )
    parser.add_argument("--version", action="version", version=f"flamingo-sim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except FlamingoError as exc:
        print(f"flamingo-sim {args.command}: error: {in_cli_terms(str(exc), getattr(args, 'cli_flags', {}))}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `flamingo-sim profiles --json | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print(f"flamingo-sim {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
