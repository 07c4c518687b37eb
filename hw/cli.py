"""`saddle hw export | synth | fetch-lib`: Verilog, lint and Yosys figures of every RTL block.

The blocks are those of `hw.blocks.BLOCKS` at their shipped size.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from sim.errors import SaddleError
from sim.paths import BUILD


def register(subparsers) -> None:
    hw = subparsers.add_parser("hw", help="RTL: Verilog export, lint, synthesis")
    sub = hw.add_subparsers(dest="hw_command", metavar="HW_COMMAND", required=True)

    export = sub.add_parser("export", help="export every block to Verilog and lint it with Verilator")
    export.add_argument("--out", type=Path, default=BUILD / "verilog", help="output folder (default build/verilog)")
    export.add_argument("--block", action="append", help="only this block (repeatable)")
    export.add_argument("--no-lint", action="store_true", help="skip `verilator --lint-only`")
    export.set_defaults(func=_export)

    synth = sub.add_parser("synth", help="synthesize blocks with Yosys: cells, flip-flops, NAND2-eq area")
    synth.add_argument("--block", action="append", help="only this block (repeatable)")
    synth.add_argument("--json", action="store_true", help="print the results as JSON")
    synth.add_argument("--library", default="auto", choices=["auto", "osu018", "generic"],
                       help="osu018 standard cells, Yosys generic gates with a NAND2-eq table, "
                            "or auto: osu018 when it can be fetched (default)")
    synth.add_argument("--out", type=Path, default=BUILD / "synth", help="work folder (default build/synth)")
    synth.set_defaults(func=_synth)

    fetch = sub.add_parser("fetch-lib", help="fetch the osu018 standard-cell library into build/celllib/")
    fetch.set_defaults(func=_fetch_lib)


def _selected(names: list[str] | None) -> dict:
    from hw.blocks import BLOCKS

    if not BLOCKS:
        raise SaddleError("hw/blocks.py lists no blocks")
    if not names:
        return dict(BLOCKS)
    unknown = [n for n in names if n not in BLOCKS]
    if unknown:
        raise SaddleError(f"unknown block {', '.join(unknown)}; known: {', '.join(sorted(BLOCKS))}")
    return {n: BLOCKS[n] for n in names}


def _export(args) -> int:
    from hw.export import lint, write_verilog

    failed = []
    for name, factory in _selected(args.block).items():
        started = time.monotonic()
        path = write_verilog(factory(), name, args.out)
        status = "not linted"
        if not args.no_lint:
            result = lint(path, name)
            status = "lint clean" if result.ok else "LINT FAILED"
            if not result.ok:
                failed.append(name)
                log = Path(args.out) / f"{name}.lint.txt"
                log.write_text(result.messages + "\n")
                head = "\n".join(result.messages.splitlines()[:12])
                print(f"{head}\n... all diagnostics in {log}", file=sys.stderr)
        print(f"{name:<16} {path}  {status}  ({time.monotonic() - started:.1f} s)")
    if failed:
        print(f"saddle: lint failed for {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _synth(args) -> int:
    from hw.export import write_verilog
    from hw.synth import resolve_library, synthesize

    liberty = resolve_library(args.library)
    results = []
    for name, factory in _selected(args.block).items():
        started = time.monotonic()
        work = Path(args.out) / name
        verilog = write_verilog(factory(), name, work)
        result = synthesize(verilog, name, liberty=liberty, work_dir=work, block=name)
        results.append(result)
        (work / "result.json").write_text(json.dumps(result.to_dict(), indent=2, sort_keys=True) + "\n")
        if not args.json:
            print(f"{name:<16} cells {result.cells:>7}  flip-flops {result.flip_flops:>6}  "
                  f"latches {result.latches}  memory bits {result.memory_bits}  "
                  f"NAND2-eq {result.nand2_eq:>10.1f}  [{result.library}]  "
                  f"({time.monotonic() - started:.0f} s)")
    if args.json:
        print(json.dumps({"blocks": [r.to_dict() for r in results]}, indent=2, sort_keys=True))
    latched = [r.block for r in results if r.latches]
    if latched:
        print(f"saddle: latches inferred in {', '.join(latched)} (must be 0)", file=sys.stderr)
        return 1
    return 0


def _fetch_lib(args) -> int:
    from hw.synth import fetch_celllib

    print(fetch_celllib())
    return 0
