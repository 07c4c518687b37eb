"""``saddle validate``: the cost models against the reference tables (``validation/compare.py``);
``saddle calibrate``: the synthetic traces' acceptance fitted to fig3 (``validation/calibrate.py``)."""
from __future__ import annotations

import json

from sim.config import CALIBRATIONS


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "validate", help="compare the cost models with AttAcc's simulator and Ramulator2",
        description="Price every point of the reference tables in validation/tables/ (AttAcc's "
                    "simulator and Ramulator2 with AttAcc's PIM patches) with our cost models and "
                    "print, per component, the mean and worst relative error and where the worst "
                    "is. Exit status 1 if the checked calibration breaks a bound at a point not "
                    "listed in validation/known_deviations.yaml.")
    p.add_argument("--calibration", choices=CALIBRATIONS + ("all",), default="all",
                   help="calibration to compare (default: all; only attacc is held to the bounds)")
    p.add_argument("--points", action="store_true", help="also print every point's error")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--readme", action="store_true",
                   help="also rewrite the error table of sim/cost/README.md (its marked block)")
    p.set_defaults(func=_validate)

    cal = subparsers.add_parser("calibrate", help="fit a pair's synthetic acceptance to the fig3 shape")
    cal.add_argument("--pair", required=True, help="model pair in configs/models/pairs/")
    cal.add_argument("--write", action="store_true",
                     help="store the fit in configs/traces/PAIR.yaml and regenerate the shipped trace")
    cal.add_argument("--from-log", metavar="FILE",
                     help="take candidates already evaluated from an earlier run's output")
    cal.set_defaults(func=_calibrate)


def _validate(args) -> int:
    from sim.cost.pim import load_pim
    from validation import compare as v

    schedule = load_pim("hbm3_pim", "attacc").attacc
    fitted = v.fit_attacc_schedule()
    report = {"tables": {k: v.load_table(k)["sources"] for k in v.TABLE_FILES},
              "attacc_pim_schedule": {"configured": {k: getattr(schedule, k) for k in fitted},
                                      "fitted": fitted},
              "calibrations": {}}
    failed = False
    for cal in CALIBRATIONS if args.calibration == "all" else (args.calibration,):
        points, checked = v.compare(cal), cal == "attacc"
        rows = v.summarize(points, v.known_deviations() if checked else None)
        failed |= checked and not all(r["within"] for r in rows)
        report["calibrations"][cal] = {"checked": checked, "components": rows}
        if args.points:
            report["calibrations"][cal]["points"] = [
                {"component": p.component, "where": p.where, "ours": p.ours,
                 "reference": p.reference, "error": p.error} for p in points]
    if args.readme:
        from common.marked import write_marked
        write_marked(v.README, v.README_COMMAND, {"errors": v.readme_table()})
    if args.json:
        print(json.dumps(report, indent=2))
        return int(failed)
    def row(component, points, mean, worst, bound, where) -> None:
        print(f"  {component:<11}{points:>7}{mean:>12}{worst:>9}  {bound:<14}{where}")
    for cal, body in report["calibrations"].items():
        held = "held to the bounds" if body["checked"] else "for comparison, not held to the bounds"
        print(f"calibration {cal} ({held})")
        row("component", "points", "mean |err|", "worst", "bound", "where the worst is")
        for r in body["components"]:
            mean_bound = "" if r["bound_mean"] is None else f"{r['bound_mean']:.0%} / "
            mark = "" if not body["checked"] else ("  ok" if r["within"] else "  OUT OF BOUND")
            row(r["component"], r["points"], f"{r['mean_abs_error']:.2%}", f"{r['worst_error']:+.2%}",
                f"{mean_bound}{r['bound_worst']:.0%}", r["worst_at"] + mark)
            for k in r["known_deviations"]:
                row("", "", "", f"{k['error']:+.2%}", "known",
                    f"{k['where']} (validation/known_deviations.yaml)")
        for p in body.get("points", []):
            print(f"    {p['component']:<11}{p['error']:>+8.2%}  ours {p['ours']:.6g} "
                  f"reference {p['reference']:.6g}  {p['where']}")
    sched = report["attacc_pim_schedule"]
    print(f"attacc PIM schedule (configs/hardware/hbm3_pim.yaml): {sched['configured']}; "
          f"fitted to the Ramulator2 table: {sched['fitted']}")
    print("validation/tables: " + "; ".join(
        f"{name} {src['commit'][:12]}" for name, src in report["tables"]["decode_steps"].items()))
    return int(failed)


def _calibrate(args) -> None:
    from validation.calibrate import calibrate
    calibrate(args.pair, write=args.write, from_log=args.from_log)
