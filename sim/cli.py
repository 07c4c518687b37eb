"""The `saddle` command.

Each module of SUBCOMMAND_MODULES has a ``register(subparsers)`` that adds its subcommands, each
bound to a handler (``parser.set_defaults(func=handler)``) that takes the parsed arguments and
returns the exit code (None: 0). Heavy imports (Amaranth, matplotlib, torch) belong inside the
handlers, so that ``saddle --help`` stays fast and the simulator never imports the RTL stack.
"""
from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys

from common.errors import SaddleError

# Ctrl-C, and what a scheduler or a closed terminal sends: each stops a run the same way.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

# Order is the order of `saddle --help`.
SUBCOMMAND_MODULES = [
    "sim.experiments.cli",
    "sim.sweeps.cli",
    "traces.cli",
    "sim.cost.cli",
    "validation.cli",
    "tuning.cli",
    "sim.manager.cli",
    "hw.flow.cli",
    "report.cli",
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


class _Parser(argparse.ArgumentParser):
    """An argument error is one line, as every other error (subcommands inherit the class)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
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
    for stop in STOP_SIGNALS[1:]:       # as Ctrl-C: stop the workers, keep the results
        signal.signal(stop, signal.default_int_handler)
    try:
        return int(args.func(args) or 0)
    except SaddleError as exc:
        print(f"saddle: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # A second signal while shutting down (worker pool, progress bar) must not print the
        # message again or a traceback: from here on they are ignored.
        for stop in STOP_SIGNALS:
            signal.signal(stop, signal.SIG_IGN)
        print("saddle: interrupted; results written so far are kept", file=sys.stderr, flush=True)
        return 130
    except BrokenPipeError:
        # The reader left (`saddle ... | head`): nothing more to say, and nowhere to say it.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:      # an output that failed while written (disk full, permissions)
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"saddle: error: {where}{exc.strerror or exc}; results written before it are kept",
              file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
