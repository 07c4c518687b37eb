"""Published values of a paper figure next to ours (``published:`` of an experiment file).

::

    published:
      source: "where the numbers come from"
      metric: tokens_per_s            # the record field compared (default tokens_per_s); a
                                      # claim's own ``metric`` replaces it for that claim
      claims:
        - {kind: mean_ratio, label: "SADDLE / PIM-SD", num: saddle, den: pim-sd, value: 1.71}
        - {kind: best_count, systems: [gpu-ad, gpu-sd, pim-ad, pim-sd, saddle], best: saddle,
           value: 12}                 # points (pair, batch) where `best` has the highest metric
        - {kind: below, lower: gpu-sd, higher: gpu-ad, where: {batch: 128}, value: all}
        - {kind: ratio, num: {system: specpim-sd, draft_length: 4}, den: specpim-ad,
           where: {batch: 64}, value: 1.41}
        - {kind: argmax, system: specpim-sd, over: draft_length, where: {batch: 64}, value: 4}
        - {kind: share, system: saddle, parts: [latency_breakdown.monitoring,
           latency_breakdown.decision_making], of: time_s, value: 0.0083}

A metric is a record field, a nested one as ``field.key``, or a sum of them as ``a+b``. A share
is the sum of ``parts`` over ``of``, at each point the system has, their arithmetic mean when
there are several (within ``tolerance`` of the published share, or 0.005 of the whole, whichever
is larger).

A system reference is a name (a record's ``system``: the entry's label if it has one) or a
mapping of record fields. Records are matched into points by (pair, batch, sequence_length),
``where`` restricts the points; a ratio is taken per point, a mean_ratio is the geometric mean
of the per-point ratios (the arithmetic mean reported beside it). Every claim gives one row:
the claim, the published value, ours, and whether ours agrees (ratios: within ``tolerance``,
default 10 %), and a detail: the values behind a single-point ratio, the spread of a mean, and a
claim's ``why`` (the reason a reading is what it is, in words; the numbers come from the records). A mean_ratio that does not agree is decomposed (``decompose``) into four measured
factors whose geometric means multiply to ours: tokens per verification pass, pass time (den /
num), verifying share (the run's time the TLM is busy) and window (the full-batch window
against the whole run).
"""
from __future__ import annotations

import csv
import math
from pathlib import Path

from common.config import check_keys
from common.errors import ConfigError

# Each kind of claim and the keys it needs.
NEEDS = {"mean_ratio": ("num", "den", "value"), "ratio": ("num", "den", "value"),
         "best_count": ("systems", "best", "value"), "below": ("lower", "higher", "value"),
         "argmax": ("system", "over", "value"), "share": ("system", "parts", "of", "value")}
KINDS = tuple(NEEDS)
FACTORS = ("tokens per pass", "pass time", "verifying share", "window")
POINT = ("pair", "batch", "sequence_length")
ROW = ("claim", "published", "ours", "agrees", "detail")     # a claim's row (and factors)


def check(published: dict, src: str) -> None:
    """Errors name the file and the claim."""
    if not isinstance(published, dict) or not isinstance(published.get("claims"), list):
        raise ConfigError(f"{src}: published: expected a mapping with source and claims: [...]")
    if not isinstance(published.get("source"), str) or not published["source"]:
        raise ConfigError(f"{src}: published.source: expected the text saying where the values come from")
    check_keys(published, ("source", "metric", "claims"), source=src, where="published")
    for i, claim in enumerate(published["claims"]):
        where = f"{src}: published.claims[{i}]"
        if not isinstance(claim, dict) or claim.get("kind") not in KINDS:
            raise ConfigError(f"{where}: expected a mapping with kind one of {list(KINDS)}")
        missing = [k for k in NEEDS[claim["kind"]] if k not in claim]
        if missing:
            raise ConfigError(f"{where}: kind {claim['kind']} needs {missing}")
        check_keys(claim, NEEDS[claim["kind"]] + ("kind", "label", "where", "tolerance", "metric", "why"),
                   source=src, where=f"published.claims[{i}]")


def _matches(record: dict, ref, where: dict) -> bool:
    want = where | ({"system": ref} if isinstance(ref, str) else ref)
    return all(record.get(k) in (v if isinstance(v, list) else [v]) for k, v in want.items())


def _points(records: list[dict], ref, where: dict, metric: str | None) -> dict[tuple, float]:
    """The matching records by point: their ``metric``, or the whole record (None)."""
    out = {}
    for r in records:
        if _matches(r, ref, where):
            key = tuple(r.get(k) for k in POINT)
            if key in out:
                raise ConfigError(f"published: {ref!r} matches more than one run at {dict(zip(POINT, key))}")
            out[key] = r if metric is None else value(r, metric)
    return out


def value(record: dict, metric: str):
    """``record``'s ``metric``: a field, ``field.key`` of a nested one, or ``a+b`` their sum."""
    if "+" in metric:
        return sum(value(record, part) for part in metric.split("+"))
    head, _, key = metric.partition(".")
    try:
        return record[head][key] if key else record[head]
    except (KeyError, TypeError):
        raise ConfigError(f"published: records have no metric {metric!r}") from None


def _name(ref) -> str:
    if isinstance(ref, str):
        return ref
    return ref.get("system", "?") + "".join(f" {k}={v}" for k, v in ref.items() if k != "system")


def _paired(records: list[dict], a, b, where: dict, metric: str | None) -> tuple[dict, dict, list]:
    """The points of references ``a`` and ``b`` (``_points``) and the points both have."""
    pa, pb = _points(records, a, where, metric), _points(records, b, where, metric)
    return pa, pb, sorted(set(pa) & set(pb), key=str)


def _factors(r: dict) -> tuple[float, float, float, float]:
    """tokens per pass, 1 / pass time, verifying share, window: their product is tokens/s."""
    passes, verify_s = r["verification_passes"], r["verification_s"]
    return (r["tokens"]["generated"] / passes, passes / verify_s, verify_s / r["time_s"],
            r["tokens_per_s"] / r["run_tokens_per_s"])


_NEEDED = ("verification_passes", "verification_s", "time_s", "run_tokens_per_s", "tokens")


def decompose(records: list[dict], claim: dict) -> dict[str, float] | None:
    """Geometric means over the claim's points of the factors of num / den (module doc); their
    product is the geometric mean of the tokens/s ratios. None if a record lacks the counts
    (a record made by hand, say)."""
    num, den, keys = _paired(records, claim["num"], claim["den"], claim.get("where", {}), None)
    if not all(f in r for k in keys for r in (num[k], den[k]) for f in _NEEDED):
        return None
    logs = [0.0] * len(FACTORS)
    for k in keys:
        for i, (a, b) in enumerate(zip(_factors(num[k]), _factors(den[k]))):
            logs[i] += math.log(a / b)
    return {name: math.exp(v / len(keys)) for name, v in zip(FACTORS, logs)}


def compare(published: dict, records: list[dict]) -> list[dict]:
    """One row per claim: claim, published, ours, agrees (see module doc)."""
    rows = []
    for claim in published["claims"]:
        kind, where = claim["kind"], claim.get("where", {})
        metric = claim.get("metric", published.get("metric", "tokens_per_s"))
        scope = "".join(f", {k} {v}" for k, v in where.items())
        if kind in ("mean_ratio", "ratio"):
            num, den, keys = _paired(records, claim["num"], claim["den"], where, metric)
            if not keys:
                raise ConfigError(f"published: no point has both {_name(claim['num'])} and "
                                  f"{_name(claim['den'])}")
            ratios = [num[k] / den[k] for k in keys]
            text = claim.get("label") or f"{_name(claim['num'])} / {_name(claim['den'])}"
            if kind == "mean_ratio":
                geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
                ours, detail = geo, f"geometric mean of {len(ratios)} points (arithmetic {sum(ratios) / len(ratios):.2f})"
            else:
                if len(ratios) != 1:
                    raise ConfigError(f"published: ratio {text}{scope}: expected one point, found {len(ratios)}")
                (k,) = keys
                ours, detail = ratios[0], f"{_name(claim['num'])} {num[k]:.4g}, {_name(claim['den'])} {den[k]:.4g}"
            row = (f"{text}{scope}", claim["value"], round(ours, 3),
                   abs(ours / claim["value"] - 1) <= claim.get("tolerance", 0.10), detail)
        elif kind == "best_count":
            per = {}
            for s in claim["systems"]:
                for key, v in _points(records, s, where, metric).items():
                    per.setdefault(key, {})[_name(s)] = v
            full = [p for p in per.values() if len(p) == len(claim["systems"])]
            wins = sum(max(p, key=p.get) == _name(claim["best"]) for p in full)
            row = ((claim.get("label") or f"{_name(claim['best'])} best of {len(claim['systems'])} systems") + scope,
                   f"{claim['value']} of {len(full)}", f"{wins} of {len(full)}",
                   wins == claim["value"], "")
        elif kind == "below":
            lo, hi, keys = _paired(records, claim["lower"], claim["higher"], where, metric)
            held = [k for k in keys if lo[k] < hi[k]]
            want = len(keys) if claim["value"] == "all" else claim["value"]
            detail = ", ".join(f"{k[0]} b{k[1]}: {lo[k] / hi[k]:.2f}" for k in keys)
            row = (f"{_name(claim['lower'])} < {_name(claim['higher'])}{scope}",
                   f"{want} of {len(keys)}", f"{len(held)} of {len(keys)}", len(held) == want,
                   f"ratio {detail}")
        elif kind == "share":
            points = _points(records, claim["system"], where, None)
            if not points:
                raise ConfigError(f"published: share of {_name(claim['system'])}{scope}: no run")
            shares = [sum(value(r, m) for m in claim["parts"]) / value(r, claim["of"])
                      for r in points.values()]
            ours = sum(shares) / len(shares)
            detail = (f"mean of {len(shares)} points ({min(shares):.4f}-{max(shares):.4f})"
                      if len(shares) > 1 else "")
            row = (claim.get("label") or f"{' + '.join(claim['parts'])} of {claim['of']}, "
                   f"{_name(claim['system'])}{scope}", claim["value"], round(ours, 4),
                   abs(ours - claim["value"]) <= max(claim.get("tolerance", 0.10) * claim["value"], 0.005),
                   detail)
        else:   # argmax
            over = claim["over"]
            vals = {r[over]: value(r, metric) for r in records if _matches(r, claim["system"], where)}
            if not vals:
                raise ConfigError(f"published: argmax: no run of {_name(claim['system'])}{scope}")
            best = max(vals, key=vals.get)
            row = (f"best {over} of {_name(claim['system'])}{scope}", claim["value"], best,
                   best == claim["value"], "")
        rows.append(dict(zip(ROW, row), kind=kind))
        if "why" in claim:
            rows[-1]["detail"] = "; ".join(filter(None, (rows[-1]["detail"], claim["why"])))
        if kind == "mean_ratio" and not rows[-1]["agrees"] and metric == "tokens_per_s":
            factors = decompose(records, claim)
            if factors:
                rows[-1]["factors"] = {k: round(v, 3) for k, v in factors.items()}
    return rows


def table(published: dict, rows: list[dict]) -> str:
    width = max(len(r["claim"]) for r in rows)
    lines = [f"published ({published['source']}) vs ours:",
             f"{'claim':<{width}}  {'published':>10}  {'ours':>10}  agrees"]
    for r in rows:
        lines.append(f"{r['claim']:<{width}}  {str(r['published']):>10}  {str(r['ours']):>10}  "
                     f"{'yes' if r['agrees'] else 'NO'}" + (f"  ({r['detail']})" if r["detail"] else ""))
    factored = [r for r in rows if "factors" in r]
    if factored:
        lines.append("\nwhy ours differs: factors of each ratio (geometric means over its points; "
                     "their product is ours; > 1 favours the numerator)")
        lines.append(f"{'claim':<{width}}  " + "  ".join(f"{f:>15}" for f in FACTORS))
        for r in factored:
            lines.append(f"{r['claim']:<{width}}  " + "  ".join(f"{r['factors'][f]:>15.3f}" for f in FACTORS))
    return "\n".join(lines)


def write(out: Path, rows: list[dict]) -> None:
    with (out / "published.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(ROW + FACTORS)
        w.writerows([r[k] for k in ROW] + [r.get("factors", {}).get(f, "") for f in FACTORS]
                    for r in rows)
