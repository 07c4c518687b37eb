"""`saddle hw export | synth | timing | cycles | fetch-lib | coverify | mutate | random`: Verilog, lint,
Yosys figures and static timing of every RTL block, the cycle costs the simulator charges
(measured on the RTL), co-verification on a simulated run, mutation testing.

The blocks are those of `hw.flow.blocks.BLOCKS` at their shipped size.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from common.errors import SaddleError
from common.paths import BUILD


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
    synth.add_argument("--hierarchy", choices=["flat", "hier"],
                       help="flatten before mapping, or map each submodule on its own and add the "
                            "instances up (default: per block, configs/synth/flow.yaml)")
    synth.add_argument("--every-instance", action="store_true",
                       help="hierarchical blocks: map every submodule instance, not each distinct module "
                            "once (the sign-off run; same totals, the Manager about 28 min instead of minutes)")
    synth.add_argument("--out", type=Path, default=BUILD / "synth", help="work folder (default build/synth)")
    _variant_options(synth)
    synth.set_defaults(func=_synth)

    timing = sub.add_parser("timing", help="static timing (OpenSTA, osu018): critical path, fmax, FO4 depth",
                            description="Synthesize each block onto osu018 (or reuse build/synth/BLOCK/mapped.v "
                                        "when newer than its Verilog) and run OpenSTA on the mapped netlist, "
                                        "as mapped and flattened with every net's fanout bounded by buffer "
                                        "trees (buffered) (hw/flow/timing.py, configs/synth/timing.yaml). The "
                                        "verdict (1 GHz at 28 nm, both variants of the scaling rule) is read from "
                                        "the buffered netlist of the delay mapping, the default here.")
    timing.add_argument("--block", action="append", help="only this block (repeatable)")
    timing.add_argument("--json", action="store_true", help="print the results as JSON")
    timing.add_argument("--out", type=Path, default=BUILD / "synth", help="work folder (default build/synth)")
    _variant_options(timing, default_mapping="delay")
    timing.set_defaults(func=_timing)

    cycles = sub.add_parser("cycles", help="the Manager's and the PE's cycle costs, measured on the RTL",
                            description="Simulate the Manager and the bank PE RTL (Amaranth) and measure the "
                                        "cycles the simulator charges (hw/flow/cycles.py): the softmax's and "
                                        "the decision's per request, the Issue's per token and fixed, the PE's "
                                        "latencies. Compares them with configs/timing/manager.yaml and "
                                        "configs/hardware/bank_pe.yaml (exit 1 if they differ), or writes them.")
    cycles.add_argument("--write", action="store_true",
                        help="write configs/timing/manager.yaml (generated; its clock_ghz kept) and the PE's "
                             "latencies in configs/hardware/bank_pe.yaml")
    cycles.add_argument("--json", action="store_true", help="print the measured cycles as JSON")
    cycles.add_argument("--storage", choices=["ff", "sram"],
                        help="measure a Manager whose pools keep their records in flip-flops or SRAM macros "
                             "(default: configs/hardware/manager_rtl.yaml's; --write needs the default)")
    cycles.set_defaults(func=_cycles)

    fetch = sub.add_parser("fetch-lib", help="fetch the osu018 standard-cell library into build/celllib/")
    fetch.set_defaults(func=_fetch_lib)

    from common.paths import CONFIGS, TRACE_DATA
    cov = sub.add_parser("coverify", help="the Manager RTL against the model on a simulated run's transactions",
                         description="Simulate one Shared Pool system on a trace with a small Manager, record "
                                     "its transactions and replay them on the Manager RTL (Amaranth's "
                                     "simulator or Verilator), every event compared with the model's "
                                     "(hw/flow/coverify.py).")
    cov.add_argument("--trace", default=str(TRACE_DATA / "smollm2-135m.self24.real.jsonl.gz"),
                     help="decoding trace (default: the real SmolLM2 trace)")
    cov.add_argument("--system", default="saddle", help="a Shared Pool system (default saddle)")
    cov.add_argument("--pair", default="opt-66b+opt-1.3b", help="model pair whose costs time the run")
    cov.add_argument("--batch", type=int, default=16, help="batch size (default 16)")
    cov.add_argument("--requests", default="24", help="requests of the trace to run, or 'all' (default 24)")
    cov.add_argument("--tau", type=float, help="stop threshold (default: configs/tau/PAIR.yaml)")
    cov.add_argument("--manager", default=str(CONFIGS / "manager_coverify.yaml"),
                     help="Manager config sizing the pools and the RTL (default configs/manager_coverify.yaml)")
    cov.add_argument("--log", type=Path, help="replay this transaction log instead of simulating")
    cov.add_argument("--txlog", type=Path, default=BUILD / "coverify" / "run.jsonl",
                     help="where the recorded run's log goes (default build/coverify/run.jsonl)")
    cov.add_argument("--simulator", choices=["amaranth", "verilator"], default="amaranth",
                     help="Amaranth's simulator on the design (default), or cocotb on Verilator on the "
                          "exported Verilog (built once under build/cocotb/; fast on long runs and full sizes)")
    cov.add_argument("--stall", type=float, default=0.2, help="probability of event back-pressure per cycle")
    cov.add_argument("--seed", type=int, default=0, help="seed of the back-pressure pattern")
    cov.add_argument("--storage", choices=["ff", "sram"],
                     help="the pools' token records in flip-flops or SRAM macros (default: "
                          "configs/hardware/manager_rtl.yaml's)")
    cov.add_argument("--json", action="store_true", help="print the report as JSON")
    cov.set_defaults(func=_coverify)

    mut = sub.add_parser("mutate", help="mutation testing: does every check catch small RTL faults?",
                         description="Elaborate the Manager and the bank PE with one fault at a time and run "
                                     "the RTL tests' stimulus and co-verification on the real trace against each, "
                                     "until a check fails (hw/flow/mutate.py).")
    mut.add_argument("--block", choices=["manager", "pe"], action="append",
                     help="only this block's mutants (repeatable; default both)")
    mut.add_argument("--mutant", action="append", help="only this mutant (repeatable; needs one --block)")
    mut.add_argument("--every-check", action="store_true",
                     help="run every check on each mutant, not only up to the first that kills it")
    mut.add_argument("--json", action="store_true", help="print the report as JSON")
    mut.set_defaults(func=_mutate)

    gen = sub.add_parser("random", help="write a seeded constrained-random Manager transaction log "
                                        "(JSON Lines; saddle manager replay replays it)")
    gen.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    gen.add_argument("--length", type=int, default=10000, help="random transactions before the closing ones")
    gen.add_argument("--config", help="Manager config YAML (default configs/manager.yaml)")
    gen.add_argument("--requests", type=int, help="use request ids below this bound only")
    gen.add_argument("--no-outputs", action="store_true", help="log the inputs only")
    gen.add_argument("--out", required=True, help="output .jsonl file")
    gen.set_defaults(func=_random)

    from hw.flow.report import MAPPINGS, REPORT_DIR, SECTIONS
    rep = sub.add_parser("report", help="regenerate every table of hw/README.md from the current RTL",
                         description="Measure (or take from the cache keyed by the RTL's digest) every area, "
                                     "timing, power, co-verification, coverage and mutation table, write them "
                                     "as JSON and Markdown (report.json, report.md) and, with --write, into "
                                     "hw/README.md between its generated markers (hw/flow/report.py).")
    rep.add_argument("--out", type=Path, default=REPORT_DIR, help="folder of report.json and report.md (default hw/)")
    rep.add_argument("--section", action="append", choices=SECTIONS, help="only this section (repeatable)")
    rep.add_argument("--block", action="append", help="area and timing: only this block (repeatable)")
    rep.add_argument("--mapping", action="append", choices=MAPPINGS, help="timing: only this mapping (repeatable)")
    rep.add_argument("--cached-only", action="store_true",
                     help="measure nothing: sections and blocks without a result for the current RTL say so")
    rep.add_argument("--write", action="store_true", help="also rewrite the generated blocks of hw/README.md")
    rep.set_defaults(func=_report)


def _variant_options(parser, default_mapping: str = "area") -> None:
    parser.add_argument("--selector-stage-levels", type=int, metavar="K",
                        help="shared_pool and manager with the Shared Pool selector pipelined every K tree "
                             "levels (0: combinational) instead of configs/hardware/manager_rtl.yaml's; "
                             "work folder BLOCK_kK")
    parser.add_argument("--mapping", choices=["area", "delay"], default=default_mapping,
                        help="osu018: ABC's area mapping (the area tables) or the delay mapping of "
                             f"configs/synth/flow.yaml (work folder BLOCK_delay; default {default_mapping})")


def _blocks(args):
    """The report's ``Blocks`` (its cache) under `args`' work folder and selector option: a
    pipelined variant is the block in work folder BLOCK_kK."""
    from hw.flow.blocks import full_size
    from hw.flow.report import Blocks

    variants = {}
    if args.selector_stage_levels is not None:
        k = args.selector_stage_levels
        variants = {name: (f"{name}_k{k}", lambda name=name: full_size(name, stage_levels=k))
                    for name in ("shared_pool", "manager")}
    return Blocks(args.out, variants)


def _selected(names: list[str] | None) -> dict:
    from hw.flow.blocks import BLOCKS

    if not BLOCKS:
        raise SaddleError("hw/flow/blocks.py lists no blocks")
    if not names:
        return dict(BLOCKS)
    unknown = [n for n in names if n not in BLOCKS]
    if unknown:
        raise SaddleError(f"unknown block {', '.join(unknown)}; known: {', '.join(sorted(BLOCKS))}")
    return {n: BLOCKS[n] for n in names}


def _export(args) -> int:
    from hw.flow.export import lint, write_verilog

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


def _synth_block(name: str, factory, out: Path, liberty, hierarchy=None, every_instance=False,
                 work_name: str | None = None, goal: str = "area"):
    """Export and synthesize one block in OUT/WORK_NAME/ (default NAME; result.json beside Yosys' files)."""
    from hw.flow.export import write_verilog
    from hw.flow.synth import synthesize

    work = Path(out) / (work_name or name)
    verilog = write_verilog(factory(), name, work)
    result = synthesize(verilog, name, liberty=liberty, work_dir=work, block=name, hierarchy=hierarchy,
                        every_instance=every_instance, goal=goal)
    (work / "result.json").write_text(json.dumps(result.to_dict(), indent=2, sort_keys=True) + "\n")
    return result


def _synth(args) -> int:
    from hw.flow.report import synth_entry
    from hw.flow.synth import SynthResult, resolve_library

    liberty = resolve_library(args.library)
    # The report's cache (keyed by the Verilog's digest) holds the default flow's results.
    cached = liberty is not None and args.hierarchy is None and not args.every_instance
    blocks = _blocks(args)
    results = []
    for name in _selected(args.block):
        started = time.monotonic()
        work_name = blocks.work(name, args.mapping)
        if cached:
            result = SynthResult(**synth_entry(blocks, name, liberty, args.mapping)["result"])
        else:
            result = _synth_block(name, blocks.factories[name], args.out, liberty, args.hierarchy,
                                  args.every_instance, work_name, args.mapping)
        results.append(result)
        if not args.json:
            print(f"{work_name:<16} cells {result.cells:>7}  flip-flops {result.flip_flops:>6}  "
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


def _cycles(args) -> int:
    from hw.flow.cycles import differences, measure, write

    if args.write and args.storage is not None:
        raise SaddleError("--write: the timing config holds the shipped storage's cycles; drop --storage")
    cycles = measure(args.storage)
    if args.json:
        print(json.dumps({"manager": cycles.manager, "pe": cycles.pe, "plus": cycles.plus}, indent=2))
    else:
        for k, v in {**cycles.manager, **cycles.pe}.items():
            print(f"{k:<26} {v}")
        for k, v in cycles.plus.items():
            print(f"{k:<26} {v}   (SADDLE+'s planner; not charged by the simulator)")
    if args.write:
        for path in write(cycles):
            print(f"wrote {path}", file=sys.stderr)
        return 0
    diffs = differences(cycles)
    for line in diffs:
        print(line, file=sys.stderr)
    return 1 if diffs else 0


def _timing(args) -> int:
    from hw.flow.report import StaContext, timing_entry

    sta = StaContext(args.out)
    config, library, fo4 = sta.config, sta.library, sta.fo4
    blocks = _blocks(args)
    results = []
    for name in _selected(args.block):
        started = time.monotonic()
        # Synthesized only when the report's cache has no result for this Verilog.
        for result in timing_entry(blocks, name, sta, args.mapping)["results"]:
            results.append(result)
            if not args.json:
                trees = result["buffering"]
                print(f"{result['block']:<22} {result['netlist_kind']:<9} {result['startpoint']} -> "
                      f"{result['endpoint']}: {result['stages']} stages, {result['min_period_ns']:.3f} ns, fmax "
                      f"{result['fmax_mhz']:.0f} MHz ({library}), {result['depth_fo4']:.1f} FO4 -> "
                      f"{result['target_period_ps']:.0f} ps at {config.target_node_nm:g} nm "
                      f"({result['target_fmax_ghz']:.2f} GHz, "
                      f"{'meets' if result['meets_target_clock'] else 'MISSES'} {config.target_clock_ghz:g} GHz; "
                      f"typical rule {result['target_period_typical_ps']:.0f} ps, "
                      f"{'meets' if result['meets_target_clock_typical'] else 'MISSES'})"
                      + (f"; {trees['buffers']} buffers on {trees['nets']} nets" if trees else "")
                      + f"  ({time.monotonic() - started:.0f} s)")
    verdict = _verdict(results) if args.mapping == "delay" else None
    if args.json:
        print(json.dumps({"fo4_ns": fo4, "fo4_target_ns": config.target_fo4_ns,
                          "fo4_target_typical_ns": config.target_fo4_typical_ns,
                          "target_clock_ghz": config.target_clock_ghz, "verdict": verdict,
                          "blocks": results}, indent=2, sort_keys=True))
    else:
        if verdict is not None:
            print(f"verdict (delay mapping, buffered): {'every block meets' if verdict['all_meet'] else 'MISSED by'} "
                  f"{config.target_clock_ghz:g} GHz at {config.target_node_nm:g} nm, both rule variants"
                  + ("" if verdict["all_meet"] else ": " + ", ".join(
                      name for name, v in verdict["blocks"].items() if not v["meets_both"])))
        print(f"FO4 ({library}, measured): {fo4 * 1000:.1f} ps; at {config.target_node_nm:g} nm: "
              f"{config.target_fo4_ns * 1000:.1f} ps, typical {config.target_fo4_typical_ns * 1000:.1f} ps "
              f"(configs/synth/timing.yaml); clock {config.target_clock_ghz:g} GHz (configs/timing/manager.yaml)")
    return 0


def _verdict(results) -> dict:
    """Per block, the figures of the buffered delay-mapped netlist (the one the verdict is read
    from: the unbuffered one lets one X1 gate drive every load), and whether all meet the clock
    with both variants of the scaling rule."""
    blocks = {r["block"]: {"depth_fo4": r["depth_fo4"], "target_period_ps": r["target_period_ps"],
                           "target_period_typical_ps": r["target_period_typical_ps"],
                           "meets_target_clock": r["meets_target_clock"],
                           "meets_target_clock_typical": r["meets_target_clock_typical"],
                           "meets_both": r["meets_target_clock"] and r["meets_target_clock_typical"]}
              for r in results if r["netlist_kind"] == "buffered"}
    return {"netlist": "delay mapping, buffered", "blocks": blocks,
            "all_meet": all(v["meets_both"] for v in blocks.values())}


def _fetch_lib(args) -> int:
    from hw.flow.synth import fetch_celllib

    print(fetch_celllib())
    return 0


def _coverify(args) -> int:
    from hw.flow.coverify import coverify, log_pairs, record_run

    if not 0 <= args.stall < 1:
        raise SaddleError(f"--stall: expected a probability in [0, 1), found {args.stall}")
    if args.log is not None:
        config, softmax, pairs = log_pairs(args.log)
        source = str(args.log)
        # Verilator reads its pairs from a log: a copy with every output filled in, never the input.
        txlog = BUILD / "coverify" / f"{args.log.stem}.replay.jsonl" if args.simulator == "verilator" else None
    else:
        from sim.systems.run import RunParams

        requests = None if args.requests == "all" else _positive(args.requests, "--requests")
        params = RunParams(system=args.system, pair=args.pair, batch=args.batch, trace=args.trace,
                           split="all", requests=requests, tau=args.tau, manager=args.manager,
                           source="saddle hw coverify")
        print(f"simulating {args.system} on {args.trace} (batch {args.batch}, Manager {args.manager}) ...",
              file=sys.stderr)
        config, pairs, record = record_run(params)
        softmax, txlog = None, args.txlog
        source = f"{args.system} {args.pair} batch {args.batch} on {args.trace}"
        print(f"  {record['tokens']['drafted']} draft tokens, {record['verification_passes']} verifications",
              file=sys.stderr)
    print(f"replaying {len(pairs)} transactions on the Manager RTL ({args.simulator}) ...", file=sys.stderr)
    report = coverify(config, pairs, source=source, softmax=softmax, stall=args.stall, seed=args.seed,
                      txlog=txlog, simulator=args.simulator, storage=args.storage)
    if args.json:
        print(json.dumps(report.as_dict(), indent=1))
    else:
        status = "every event matches the model" if report.ok else "MISMATCH"
        print(f"{report.source}: {report.compared}/{report.transactions} transactions, {report.cycles} RTL "
              f"cycles, {report.seconds:.1f} s: {status}")
        print("  inputs: " + ", ".join(f"{k} {v}" for k, v in sorted(report.inputs.items())))
        print("  coverage: " + ", ".join(f"{k} {v}" for k, v in report.coverage.items()))
        missed = [k for k, v in report.coverage.items() if not v]
        if missed:
            print(f"  corners not reached: {', '.join(missed)}")
        if report.txlog:
            print(f"  log: {report.txlog} (saddle manager replay {report.txlog})")
        if report.mismatch:
            print(report.mismatch)
    return 0 if report.ok else 1


def _mutate(args) -> int:
    from hw.flow.mutate import BLOCKS, describe, mutate

    blocks = args.block or list(BLOCKS)
    if args.mutant and len(blocks) != 1:
        raise SaddleError("--mutant: give exactly one --block")
    started = time.monotonic()
    reports = []
    for block in blocks:
        print(f"{block}: the clean design, then each mutant ...", file=sys.stderr)
        progress = None if args.json else (lambda result: print("  " + describe(result), flush=True))
        try:
            report = mutate(block, args.mutant, progress=progress, every_check=args.every_check)
        except ValueError as exc:
            raise SaddleError(str(exc)) from exc
        reports.append(report)
        if not args.json:
            if report.clean_failures:
                print(f"  the CLEAN design fails: {', '.join(report.clean_failures)}")
            print(f"{block}: {report.killed}/{report.killable} killed, {len(report.results) - report.killable} "
                  f"argued equivalent ({report.seconds:.0f} s; checks: {'; '.join(report.checks)})")
    seconds = time.monotonic() - started
    if args.json:
        print(json.dumps({"blocks": [r.as_dict() for r in reports], "seconds": round(seconds, 1)}, indent=1))
    else:
        print(f"total {seconds:.0f} s")
    return 0 if all(r.ok for r in reports) else 1


def _random(args) -> int:
    from hw.flow.manager_random import coverage, generate_with_events
    from sim.manager.config import ManagerConfig
    from sim.manager.txlog import write_txlog

    if args.length < 0:
        raise SaddleError(f"--length: expected >= 0, found {args.length}")
    config = ManagerConfig.load(args.config)
    pairs, manager = generate_with_events(config, args.seed, args.length, requests=args.requests)
    write_txlog(args.out, config, ((t, None if args.no_outputs else e) for t, e in pairs))
    totals = manager.conservation(final=True)
    cov = coverage(pairs)
    print(f"{args.out}: {len(pairs)} transactions; tokens {totals.as_dict()}")
    print("coverage: " + ", ".join(f"{k}={v}" for k, v in sorted(cov.items())))
    return 0


def _report(args) -> int:
    from hw.flow.report import README, SECTIONS, build_report, render, strip_keys, write_readme

    if args.block:
        _selected(args.block)
    out = Path(args.out)
    stored = out / "report.json"
    previous = json.loads(stored.read_text()) if stored.is_file() else {}
    started = time.monotonic()
    report = build_report(args.section or SECTIONS, args.block, tuple(args.mapping or ()) or ("area", "delay"),
                          run=not args.cached_only, previous=previous,
                          log=lambda m: print(f"[{time.monotonic() - started:6.0f} s] {m}", file=sys.stderr))
    report = strip_keys(report)
    out.mkdir(parents=True, exist_ok=True)
    # Key order is the tables' row order: not sorted.
    stored.write_text(json.dumps(report, indent=1) + "\n")
    markdown = render(report)
    (out / "report.md").write_text(markdown)
    print(f"wrote {stored} and {out / 'report.md'}")
    if args.write:
        print(f"rewrote {', '.join(write_readme(markdown, README))} in {README}")
    return 0


def _positive(text: str, flag: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise SaddleError(f"{flag}: expected a positive integer or 'all', found {text!r}")
    return value
