"""``saddle tune-tau``, ``saddle tune-stop`` (``tuning/tau.py``) and ``saddle tune-plus``
(``tuning/plus.py``)."""
from __future__ import annotations

from common.config import positive_int


def register(subparsers) -> None:
    tune = subparsers.add_parser("tune-tau", help="choose SADDLE's tau on the validation split and store it")
    tune.add_argument("--pair", required=True, help="model pair in configs/models/pairs/")
    tune.add_argument("--config", default="tune-tau", help="tuning settings in configs/experiments/")
    tune.add_argument("--dry-run", action="store_true", help="print the choice, do not write configs/tau/")
    tune.add_argument("--from-log", metavar="FILE",
                      help="take the taus already evaluated from an earlier run's output")
    tune.set_defaults(func=_tune_tau)

    stop = subparsers.add_parser("tune-stop", help="choose a stopping rule's parameter on the "
                                 "validation split and store it in configs/stopping/")
    stop.add_argument("--pair", required=True, help="model pair in configs/models/pairs/")
    stop.add_argument("--rule", required=True, help="stop rule with a parameter (confidence, calibrated, entropy)")
    stop.add_argument("--config", default="tune-stop", help="tuning settings in configs/experiments/")
    stop.add_argument("--dry-run", action="store_true", help="print the choice, do not write configs/stopping/")
    stop.add_argument("--jobs", "-j", type=positive_int, metavar="N",
                      help="runs simulated at once (default: the CPUs, at most 8); the runs are kept "
                           "in results/tune-stop/PAIR/, so a rerun resumes")
    stop.set_defaults(func=_tune_stop)

    plus = subparsers.add_parser("tune-plus", help="choose SADDLE+'s tau table and wait bound on the "
                                 "validation split and store them in configs/tau/plus/")
    plus.add_argument("--pair", required=True, action="append",
                      help="model pair in configs/models/pairs/ (repeat for several)")
    plus.set_defaults(func=_tune_plus)


def _tune_tau(args) -> None:
    from tuning.tau import tune_tau
    tune_tau(args.pair, args.config, write=not args.dry_run, from_log=args.from_log)


def _tune_stop(args) -> None:
    from sim.experiments.runner import default_jobs
    from tuning.tau import tune_stop
    tune_stop(args.pair, args.rule, args.config, write=not args.dry_run,
              jobs=args.jobs or default_jobs())


def _tune_plus(args) -> None:
    from tuning.plus import tune
    for pair in args.pair:
        tune(pair)
