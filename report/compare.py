"""Systems side by side against a reference at every point (``compare:`` of an experiment).

::

    compare:
      reference: oracle     # a record's system (an entry's label): the gap is measured to it
      baseline: saddle      # optional: each system's geometric-mean tokens/s ratio to it

For every system and point (pair, batch, sequence_length): tokens/s, tokens drafted per
accepted token (``tokens.drafted / tokens.accepted``: what a draft costs the DLM and the TLM for
each token it saves) and the gap to the reference, 1 - tokens/s / reference tokens/s (negative
when the system is faster). ``saddle run`` prints the table; ``results.json`` holds its rows.
"""
from __future__ import annotations

import math

from common.config import check_keys, get
from common.errors import ConfigError
from report.published import POINT, _points

KEYS = ("reference", "baseline")


def check(spec: dict, systems: list[str], src: str) -> None:
    if not isinstance(spec, dict):
        raise ConfigError(f"{src}: compare: expected a mapping with 'reference' (and 'baseline')")
    check_keys(spec, KEYS, source=src, where="compare")
    for key in KEYS:
        name = get(spec, key, str, source=src, prefix="compare", default=None)
        if key == "reference" and name is None:
            raise ConfigError(f"{src}: compare.reference: missing (the system the gap is measured to)")
        if name is not None and name not in systems:
            raise ConfigError(f"{src}: compare.{key}: {name!r} is none of the experiment's systems "
                              f"{systems} (an entry's label, else its system)")


def rows(spec: dict, records: list[dict]) -> list[dict]:
    reference = _points(records, spec["reference"], {}, "tokens_per_s")
    out = []
    for r in records:
        key = tuple(r.get(k) for k in POINT)
        ref = reference.get(key)
        drafted, accepted = r["tokens"]["drafted"], r["tokens"]["accepted"]
        out.append({"system": r["system"], **dict(zip(POINT, key)),
                    "tokens_per_s": r["tokens_per_s"],
                    "drafted_per_accepted": drafted / accepted if accepted else None,
                    "gap_to_reference": None if ref is None else 1 - r["tokens_per_s"] / ref})
    return out


def summary(spec: dict, table_rows: list[dict]) -> list[dict]:
    """Per system: mean gap to the reference and geometric-mean tokens/s ratio to the baseline."""
    base = {tuple(r[k] for k in POINT): r["tokens_per_s"] for r in table_rows
            if r["system"] == spec.get("baseline")}
    out = []
    for name in dict.fromkeys(r["system"] for r in table_rows):
        mine = [r for r in table_rows if r["system"] == name]
        gaps = [r["gap_to_reference"] for r in mine if r["gap_to_reference"] is not None]
        ratios = [r["tokens_per_s"] / base[k] for r in mine
                  if (k := tuple(r[x] for x in POINT)) in base]
        out.append({"system": name, "points": len(mine),
                    "mean_gap_to_reference": sum(gaps) / len(gaps) if gaps else None,
                    "geomean_ratio_to_baseline": (math.exp(sum(map(math.log, ratios)) / len(ratios))
                                                  if ratios else None),
                    "wins_over_baseline": sum(x > 1 for x in ratios) if ratios else None})
    return out


def text(spec: dict, table_rows: list[dict]) -> str:
    ref, base = spec["reference"], spec.get("baseline")
    head = (f"{'system':<14} {'pair':<28} {'batch':>5} {'tok/s':>9} {'drafted/acc':>11} "
            f"{'gap to ' + ref:>14}")
    lines = [head, "-" * len(head)]
    for r in table_rows:
        dpa = "-" if r["drafted_per_accepted"] is None else f"{r['drafted_per_accepted']:.3f}"
        gap = "-" if r["gap_to_reference"] is None else f"{100 * r['gap_to_reference']:+.1f} %"
        lines.append(f"{r['system']:<14} {r['pair']:<28} {r['batch']:>5} {r['tokens_per_s']:>9.0f} "
                     f"{dpa:>11} {gap:>14}")
    lines += ["", f"{'system':<14} {'points':>6} {'mean gap to ' + ref:>20}"
              + (f" {'tok/s vs ' + base + ' (geomean)':>26} {'faster at':>9}" if base else "")]
    for s in summary(spec, table_rows):
        gap = "-" if s["mean_gap_to_reference"] is None else f"{100 * s['mean_gap_to_reference']:+.1f} %"
        line = f"{s['system']:<14} {s['points']:>6} {gap:>20}"
        if base:
            ratio = "-" if s["geomean_ratio_to_baseline"] is None else f"{s['geomean_ratio_to_baseline']:.3f}"
            line += f" {ratio:>26} {s['wins_over_baseline'] if s['wins_over_baseline'] is not None else '-':>9}"
        lines.append(line)
    return "\n".join(lines)


def markdown(spec: dict, table_rows: list[dict], order: list[str]) -> str:
    """The summary as a Markdown table, a row per system in ``order`` (the experiment's):
    mean gap to the reference, geometric-mean tokens/s over the baseline and the points where it
    is faster, and the range of tokens drafted per accepted token over the points."""
    ref, base = spec["reference"], spec.get("baseline")
    summary_by = {s["system"]: s for s in summary(spec, table_rows)}
    head = ["system", f"mean gap to {ref}"] + ([f"tokens/s over {base} (geometric mean)", f"faster than {base} at"]
                                                if base else []) + ["drafted per accepted"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for name in order:
        s = summary_by[name]
        dpa = [r["drafted_per_accepted"] for r in table_rows
               if r["system"] == name and r["drafted_per_accepted"] is not None]
        cells = [name, "-" if s["mean_gap_to_reference"] is None else f"{100 * s['mean_gap_to_reference']:.1f} %"]
        if base:
            cells += [f"{s['geomean_ratio_to_baseline']:.3f}",
                      "-" if name == base else f"{s['wins_over_baseline']} of {s['points']}"]
        cells.append(f"{min(dpa):.2f}-{max(dpa):.2f}" if dpa else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
