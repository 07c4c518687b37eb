"""``saddle report``: the paper's figures reproduced, as one page (``page.py``, ``render.py``)."""
from __future__ import annotations

import argparse
from pathlib import Path

from common.config import positive_int


def register(subparsers) -> None:
    from report.page import FIGURES
    p = subparsers.add_parser(
        "report", help="run the paper's figures (reusing saved runs) and write them as one page: "
                       "index.html (self-contained) and report.md")
    p.add_argument("--out", metavar="DIR",
                   help="the page's folder; each figure's runs, results and plots go to DIR/<figure>/ "
                        "(default: results/report/, or $SADDLE_RESULTS/report/)")
    p.add_argument("--figures", type=_figures, metavar="NAME,...", default=FIGURES,
                   help=f"the experiments on the page, in order (default: {','.join(FIGURES)}); a "
                        "name in configs/experiments/ or a file")
    p.add_argument("--requests", type=positive_int, metavar="N",
                   help="replace each experiment's workload.requests (a quicker, reduced page)")
    p.add_argument("--no-validation", action="store_true",
                   help="leave out the cost model's validation against the reference tables")
    p.add_argument("--jobs", "-j", type=positive_int, metavar="N",
                   help="runs simulated at once (default: the CPUs, at most 8)")
    p.add_argument("--readme", action="store_true",
                   help="also rewrite sim/README.md's fig12 tables (its marked blocks) from fig12's records")
    p.set_defaults(func=report_handler)


def _figures(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(","))
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected NAME[,NAME...], found {text!r}")
    return names


def report_handler(args) -> int:
    import json

    from common.errors import SaddleError
    from common.paths import check_output, results_dir
    from report import render
    from report.page import build
    from sim.experiments.runner import default_jobs

    folder = Path(args.out) if args.out else results_dir() / "report"
    check_output(folder, "--out" if args.out else "report folder", folder=True)
    if args.readme and "fig12" not in args.figures:
        raise SaddleError("--readme: the README's tables are fig12's; keep fig12 in --figures")
    if args.readme and args.requests:
        raise SaddleError("--readme: the README's tables are of fig12's full workload; drop --requests")
    folder.mkdir(parents=True, exist_ok=True)
    page = build(folder, args.figures, requests=args.requests, jobs=args.jobs or default_jobs(),
                 validate=not args.no_validation)
    md, html = render.write(page, folder)
    print(f"report: {html} (self-contained), {md}")
    if args.readme:
        from common.marked import write_marked
        from report import readme
        records = json.loads((folder / "fig12" / "results.json").read_text())["runs"]
        written = write_marked(readme.README, readme.COMMAND, readme.blocks(records))
        print(f"rewrote {', '.join(written)} in {readme.README}")
    return 0
