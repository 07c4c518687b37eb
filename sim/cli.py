"""The `saddle` command.

Each module of SUBCOMMAND_MODULES has a ``register(subparsers)`` that adds its subcommands, each
bound to a handler (``parser.set_defaults(func=handler)``) that takes the parsed arguments and
returns the exit code (None: 0). Heavy imports (Amaranth, matplotlib, torch) belong inside the
handlers, so that ``saddle --help`` stays fast and the simulator never imports the RTL stack.
"""
from __future__ import annotations

import argparse
import importlib
import signal
import sys

from common.errors import SaddleError

# Order is the order of `saddle --help`.
SUBCOMMAND_MODULES = [
    "sim.experiments.cli",
    "sim.sweeps.cli",
    "traces.cli",
    "sim.cost.cli",
    "sim.manager.cli",
    "hw.flow.cli",
]


def version() -> str:
    """The installed package's version, or the source tree's (pyproject.toml)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed
    try:
        return installed("saddle")
    except PackageNotFoundError:
        import re

        from common.paths import ROOT
        found = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
        return found.group(1) if found else "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="saddle",
        description="SADDLE: RTL and a trace-driven simulator for speculative decoding on GPU + HBM3-PIM.",
    )
    parser.add_argument("--version", action="version", version=f"saddle {version()}")
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
        # A second Ctrl-C while shutting down (worker pool, progress bar) must not print the
        # message again or a traceback: from here on SIGINT is ignored.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print("saddle: interrupted; results written so far are kept", file=sys.stderr, flush=True)
        return 130


if __name__ == "__main__":
    sys.exit(main())
