"""``saddle trace check|synth|stats|defaults`` (and ``capture``, when traces/capture.py exists:
its ``register(trace_subparsers)`` adds it to the same group)."""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
from pathlib import Path

from common.config import positive_int
from common.errors import SaddleError


def register(subparsers) -> None:
    trace = subparsers.add_parser("trace", help="decoding traces: check, synthesize, statistics",
                                  description="Decoding traces (format: traces/README.md).")
    sub = trace.add_subparsers(dest="trace_command", metavar="TRACE_COMMAND", required=True)

    check = sub.add_parser("check", help="validate a trace file and print a summary",
                           description="Read and check every record; exit 0 only for a valid file.")
    check.add_argument("file", type=Path, metavar="FILE", help="trace file (.jsonl or .jsonl.gz)")
    check.set_defaults(func=_check)

    synth = sub.add_parser("synth", help="generate a synthetic trace for a model pair",
                           description="Synthetic Dolly-shaped trace; parameters in "
                                       "configs/traces/PAIR.yaml. Same seed, same bytes.")
    synth.add_argument("--pair", required=True, metavar="PAIR",
                       help="model pair: the name of a configs/traces/PAIR.yaml, e.g. "
                            "opt-66b+opt-1.3b, opt-175b+opt-6.7b, llama-3.1-70b+llama-3.2-1b")
    count = synth.add_mutually_exclusive_group(required=True)
    count.add_argument("--requests", type=positive_int, metavar="N",
                       help="number of requests (one block named 'all')")
    count.add_argument("--split", action="append", type=_split, metavar="NAME=N",
                       help="a block of N requests named NAME (repeat for several, in file order)")
    synth.add_argument("--seed", type=int, default=None,
                       help="numpy Generator seed (default: the config's defaults.seed)")
    synth.add_argument("--out", required=True, type=Path, metavar="FILE",
                       help="output path (.jsonl or .jsonl.gz)")
    synth.add_argument("--config", type=Path, metavar="YAML",
                       help="parameter file to use instead of configs/traces/PAIR.yaml "
                            "(e.g. a variant being tuned)")
    synth.add_argument("--entropy", action="store_true",
                       help="add the DLM's modelled entropy (the config's entropy block; "
                            "traces/README.md)")
    synth.add_argument("--context", type=positive_int, metavar="L",
                       help="extend every request past its natural end until its context "
                            "reaches L (for sequence_length L; default: natural outputs only)")
    synth.set_defaults(func=_synth)

    stats = sub.add_parser("stats", help="acceptance statistics of a trace",
                           description="Requests and tokens per category, fixed-d acceptance "
                                       "(d = 2, 4, 8, 12), accepted tokens per round (d = 8), "
                                       "reliability table.")
    stats.add_argument("file", type=Path, metavar="FILE", help="trace file (.jsonl or .jsonl.gz)")
    stats.add_argument("--json", action="store_true", help="print one JSON object")
    stats.add_argument("--plot", type=Path, metavar="DIR", help="write PNG figures into DIR")
    stats.add_argument("--bins", type=positive_int, default=10,
                       help="probability bins of the reliability table (default 10)")
    stats.set_defaults(func=_stats)

    defaults = sub.add_parser("defaults", help="regenerate (or --check) the shipped traces",
                              description="traces/data/PAIR.synth.jsonl.gz from each pair's "
                                          "config (defaults.seed, defaults.splits).")
    defaults.add_argument("--check", action="store_true",
                          help="only verify that the shipped files equal a fresh generation")
    defaults.set_defaults(func=_defaults)

    if importlib.util.find_spec("traces.capture") is not None:
        capture = importlib.import_module("traces.capture")
        if hasattr(capture, "register"):
            capture.register(sub)


def _split(text: str) -> tuple[str, int]:
    name, sep, count = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=N, found {text!r}")
    return name, positive_int(count)


def _check(args) -> int:
    from traces.format import SCHEMA_VERSION
    from traces.io import iter_trace

    header, requests = iter_trace(args.file)
    n = tokens = mismatches = 0
    extended = False
    per_cat: dict[str, int] = {}
    for r in requests:
        n += 1
        tokens += r.output_len
        mismatches += len(r.offpath)
        extended = extended or r.natural_output_len < r.output_len
        per_cat[r.category] = per_cat.get(r.category, 0) + 1
    if n == 0:
        raise SaddleError(f"{args.file}: found no request records, expected at least one")
    cats = ", ".join(f"{c} {k}" for c, k in per_cat.items())
    splits = f", splits {header.splits}" if header.splits else ""
    print(f"{args.file}: valid {SCHEMA_VERSION}: pair {header.pair}, dataset {header.dataset}, "
          f"{n} requests, {tokens} output tokens, on-path acceptance "
          f"{1 - mismatches / tokens:.4f} (the draft's token is the target's, over every output "
          f"position in the file{', extensions included' if extended else ''}){splits}; {cats}")
    return 0


def _synth(args) -> int:
    from common.paths import check_output
    from traces.io import write_trace
    from traces.synth import load_params, synthesize, with_entropy

    params = load_params(args.pair, args.config)
    splits = {"all": args.requests} if args.requests else {}
    for name, count in args.split or []:
        if name in splits:
            raise SaddleError(f"--split {name}: a split of that name was already given")
        splits[name] = count
    seed = params.default_seed if args.seed is None else args.seed
    check_output(args.out, "--out", folder=False)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    header, requests = synthesize(params, splits, seed, context=args.context)
    if args.entropy:
        header, requests = with_entropy(params, header, requests, seed)
    write_trace(args.out, header, requests)
    print(f"{args.out}: {len(requests)} requests, {sum(r.output_len for r in requests)} output "
          f"tokens, pair {args.pair}, seed {seed}")
    return 0


def _stats(args) -> int:
    from traces.io import read_trace
    from traces.stats import plot_stats, summary_text, trace_stats

    header, requests = read_trace(args.file)
    if not requests:
        raise SaddleError(f"{args.file}: found no request records, expected at least one")
    stats = trace_stats(header, requests, bins=args.bins)
    if args.json:
        json.dump(stats, sys.stdout, indent=1)
        print()
    else:
        print(summary_text(stats))
    if args.plot:
        for path in plot_stats(stats, args.plot):
            print(f"wrote {path}", file=sys.stderr if args.json else sys.stdout)
    return 0


def _defaults(args) -> int:
    import tempfile

    from traces.synth import default_trace_path, pair_names, write_default_trace

    stale = []
    for pair in pair_names():
        path = default_trace_path(pair)
        if not args.check:
            print(f"wrote {write_default_trace(pair)}")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            fresh = write_default_trace(pair, Path(tmp) / path.name)
            same = path.is_file() and fresh.read_bytes() == path.read_bytes()
        print(f"{path}: {'up to date' if same else 'STALE (run saddle trace defaults)'}")
        if not same:
            stale.append(pair)
    return 1 if stale else 0
