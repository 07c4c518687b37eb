"""``saddle manager replay``: a transaction log replayed on the model, its outputs compared
(random logs: ``saddle hw random``)."""
from __future__ import annotations

import argparse


def register(subparsers) -> None:
    parser = subparsers.add_parser("manager", help="Manager model: replay a transaction log")
    sub = parser.add_subparsers(dest="manager_command", metavar="ACTION", required=True)

    rep = sub.add_parser("replay", help="replay a transaction log on the model and compare outputs")
    rep.add_argument("log", help="a .jsonl transaction log")
    rep.set_defaults(func=_replay)


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
