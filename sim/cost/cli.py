"""``saddle cost pim-attention | step | roofline``."""
from __future__ import annotations

import json

from common.config import positive_int
from sim.config import CALIBRATIONS


def register(subparsers) -> None:
    cost = subparsers.add_parser("cost", help="price operators and steps with the cost models")
    sub = cost.add_subparsers(dest="cost_command", metavar="WHAT", required=True)

    p = sub.add_parser("pim-attention", help="N attention instances on one HBM3-PIM stack")
    p.add_argument("--instances", type=positive_int, required=True,
                   help="attention instances (one request x one KV head each)")
    p.add_argument("--context", type=positive_int, required=True, help="keys per instance")
    p.add_argument("--head-dim", type=positive_int, required=True, help="elements per attention head")
    p.add_argument("--query-tokens", type=positive_int, default=1,
                   help="queries per instance (1 when decoding, d+1 when verifying d drafts; default 1)")
    p.add_argument("--group", type=positive_int, default=1,
                   help="query heads per KV head (grouped-query attention)")
    p.add_argument("--power-constraint", action="store_true",
                   help="MAC commands at the power-constrained spacing")
    p.add_argument("--stack", default="hbm3_pim", help="stack preset in configs/hardware/")
    p.add_argument("--calibration", choices=CALIBRATIONS, default="attacc",
                   help="cost-model calibration (default: attacc, the paper's substrate)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.set_defaults(func=_pim_attention)

    p = sub.add_parser("step", help="one decoding step of a whole model on a system")
    p.add_argument("--system", required=True, help="system preset (dgx-a100, attacc, saddle, specpim-4gpu)")
    p.add_argument("--model", required=True, help="model in configs/models/")
    p.add_argument("--batch", type=positive_int, required=True, help="requests in the step")
    p.add_argument("--context", type=positive_int, required=True, help="KV length of every request")
    p.add_argument("--query-tokens", type=positive_int, default=1,
                   help="tokens per request (1 when decoding, d+1 when verifying d drafts; default 1)")
    p.add_argument("--devices", type=positive_int, help="devices the model is split over (default: all)")
    p.add_argument("--fc", choices=("gpu", "pim"), help="override the system's FC mapping")
    p.add_argument("--attention", choices=("gpu", "pim"), help="override the attention mapping")
    p.add_argument("--power-constraint", action="store_true",
                   help="PIM MAC commands at the power-constrained spacing")
    p.add_argument("--calibration", choices=CALIBRATIONS,
                   help="cost-model calibration (default: the system's, attacc)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.set_defaults(func=_step)

    p = sub.add_parser("roofline", help="GPU and PIM rooflines with a pair's operators on them")
    p.add_argument("--pair", required=True, help="pair in configs/models/pairs/")
    p.add_argument("--system", default="saddle", help="system preset in configs/hardware/ (default saddle)")
    p.add_argument("--context", type=positive_int,
                   help="KV length of every request (default: half the pair's maximum)")
    p.add_argument("--out", required=True, help="output PNG")
    p.add_argument("--json", action="store_true", help="also print the plotted points")
    p.set_defaults(func=_roofline)


def _pim_attention(args) -> int:
    from sim.cost.pim import load_pim
    from sim.model import element_bytes

    stack = load_pim(args.stack, args.calibration)
    queries = args.query_tokens * args.group
    load = stack.attention_channels([(args.context, args.head_dim, queries)] * args.instances,
                                    element_bytes(), args.power_constraint)
    out = {"instances": args.instances, "context": args.context, "head_dim": args.head_dim,
           "query_tokens": args.query_tokens, "group": args.group,
           "power_constraint": args.power_constraint, "cycles": load.cycles,
           "time_ns": load.cycles * stack.tck_ps / 1000, "refresh_cycles": load.cycles - load.busy_cycles,
           "channels_used": load.channels_used, "channels": stack.channels,
           "instances_per_channel": -(-args.instances // stack.channels),
           "tck_ps": stack.tck_ps}
    _print(out, args.json)
    return 0


def _step(args) -> int:
    from sim.cost.system import load_hardware
    from sim.model import load_model

    system = load_hardware(args.system, args.calibration)
    model = load_model(args.model)
    reqs = [(args.context, args.query_tokens)] * args.batch
    system.check_fits(model, reqs)
    mapping = {kind: getattr(args, kind) or place for kind, place in system.default_mapping}
    cost = system.price_step(model, reqs, mapping=mapping, devices=args.devices,
                             power_constrained=args.power_constraint)
    out = {"system": system.name, "calibration": system.calibration, "model": model.name,
           "batch": args.batch, "context": args.context, "query_tokens": args.query_tokens,
           **cost.as_dict()}
    _print(out, args.json)
    return 0


def _roofline(args) -> int:
    from report.roofline import plot_roofline

    points = plot_roofline(args.pair, args.out, system=args.system, context=args.context)
    if args.json:
        print(json.dumps({"out": str(args.out), "points": points}, indent=2))
    else:
        print(f"wrote {args.out}")
    return 0


def _print(out: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(out, indent=2))
        return
    for key, value in out.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items())
        print(f"{key:>24}: {value}")
