"""The `saddle` command.

Each entry of SUBCOMMAND_MODULES is a module with a ``register(subparsers)`` function that adds
its subcommands (one module may add several) and binds each to a handler via
``parser.set_defaults(func=handler)``. A handler takes the parsed ``argparse.Namespace`` and
returns the process exit code. Heavy imports (Amaranth, matplotlib, torch) belong inside the
handlers, so that ``saddle --help`` stays fast and the simulator never imports the RTL stack.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from sim.errors import SaddleError

# Order is the order of `saddle --help`.
SUBCOMMAND_MODULES = [
    "sim.experiments.cli",
    "traces.cli",
    "sim.cost.cli",
    "sim.manager.cli",
    "hw.flow.cli",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="saddle",
        description="SADDLE: RTL and a trace-driven simulator for speculative decoding on GPU + HBM3-PIM.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except SaddleError as exc:
        print(f"saddle: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("saddle: interrupted; results written so far are kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
