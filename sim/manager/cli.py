"""``saddle manager random|replay``: constrained-random transaction logs and their replay."""
from __future__ import annotations

import argparse


def register(subparsers) -> None:
    parser = subparsers.add_parser("manager", help="Manager model: random transaction logs, replay")
    sub = parser.add_subparsers(dest="manager_command", metavar="ACTION", required=True)

    gen = sub.add_parser("random", help="write a seeded constrained-random transaction log (JSON Lines)")
    gen.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    gen.add_argument("--length", type=int, default=10000, help="random transactions before the closing ones")
    gen.add_argument("--config", help="Manager config YAML (default configs/manager.yaml)")
    gen.add_argument("--requests", type=int, help="use request ids below this bound only")
    gen.add_argument("--no-outputs", action="store_true", help="log the inputs only")
    gen.add_argument("--out", required=True, help="output .jsonl file")
    gen.set_defaults(func=_random)

    rep = sub.add_parser("replay", help="replay a transaction log on the model and compare outputs")
    rep.add_argument("log", help="a .jsonl transaction log")
    rep.set_defaults(func=_replay)


def _random(args: argparse.Namespace) -> int:
    from common.errors import SaddleError
    from sim.manager.config import ManagerConfig
    from sim.manager.random_txns import coverage, generate_with_events
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


def _replay(args: argparse.Namespace) -> int:
    from sim.manager.manager import Manager
    from sim.manager.txlog import read_txlog, replay

    log = read_txlog(args.log)
    model = Manager(log.config, log.softmax)
    mismatch = replay(log, model.apply)
    if mismatch is not None:
        print(f"{args.log}: outputs differ at {mismatch.describe()}")
        return 1
    compared = sum(1 for _, out in log.entries if out is not None)
    print(f"{args.log}: {len(log.entries)} transactions replayed, {compared} compared, all identical; "
          f"tokens {model.conservation().as_dict()}")
    return 0
