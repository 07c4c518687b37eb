"""Our cost models against the reference tables of ``validation/tables/`` (AttAcc's simulator
and Ramulator2 with AttAcc's PIM patches, run by ``validation/regenerate.py``): ``compare``
prices every reference point, ``summarize`` reduces the errors per component to mean and worst
and checks them against the project's ``BOUNDS``."""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from common.config import get, load_yaml_list
from common.errors import ConfigError
from common.paths import ROOT
from sim.config import CALIBRATIONS
from sim.cost.pim import load_pim
from sim.cost.system import load_hardware
from sim.model import load_model

TABLES = ROOT / "validation" / "tables"
SCHEMA = "saddle-validation/1"
TABLE_FILES = {"pim_attention": "ramulator_pim_attention.json", "decode_steps": "attacc_steps.json"}
STEP_COMPONENTS = ("attention", "fc", "comm", "other", "total")
# (mean |error| bound, worst |error| bound) per component; None: no bound on the mean.
BOUNDS = {"pim_cycles": (0.03, 0.10), **{c: (None, 0.10) for c in STEP_COMPONENTS},
          "energy": (None, 0.05)}
SYSTEMS = {"dgx": "dgx-a100", "attacc": "attacc"}


@dataclass(frozen=True)
class Point:
    component: str
    where: str          # the point's parameters, for a reader
    ours: float
    reference: float

    @property
    def error(self) -> float:
        return self.ours / self.reference - 1


def load_table(kind: str, folder: Path = TABLES) -> dict:
    """A reference table, checked for format and provenance."""
    path = folder / TABLE_FILES[kind]
    if not path.is_file():
        raise ConfigError(f"{path}: no such reference table (validation/README.md says how to "
                          "regenerate it)")
    doc = json.loads(path.read_text())
    for key, of in (("schema", str), ("kind", str), ("sources", dict), ("command", str),
                    ("parameters", dict), ("columns", list), ("rows", list)):
        get(doc, key, of, source=path)
    if doc["schema"] != SCHEMA or doc["kind"] != kind:
        raise ConfigError(f"{path}: expected schema {SCHEMA!r} kind {kind!r}, found "
                          f"{doc['schema']!r} {doc['kind']!r}")
    for name, src in doc["sources"].items():
        if not (isinstance(src, dict) and len(str(src.get("commit", ""))) == 40):
            raise ConfigError(f"{path}: sources.{name}: expected a repository and a 40-digit commit")
    width = len(doc["columns"])
    for i, row in enumerate(doc["rows"]):
        if len(row) != width:
            raise ConfigError(f"{path}: rows[{i}]: expected {width} values, found {len(row)}")
    return doc


def _records(kind: str, folder: Path):
    """The rows of a reference table as ``{column: value}``."""
    doc = load_table(kind, folder)
    return (dict(zip(doc["columns"], row)) for row in doc["rows"])


def pim_points(calibration: str, folder: Path = TABLES) -> list[Point]:
    """PIM attention cycles of ``heads`` instances on one stack, one query each."""
    pim = load_pim("hbm3_pim", calibration)
    out = []
    for r in _records("pim_attention", folder):
        load = pim.attention_channels([(r["context"], r["head_dim"], 1)] * r["heads"], 2,
                                      r["power_constraint"])
        where = (f"heads {r['heads']}, L {r['context']}, head dim {r['head_dim']}, "
                 f"{'power constraint' if r['power_constraint'] else 'no power constraint'}")
        out.append(Point("pim_cycles", where, int(load.cycles), r["cycles"]))
    return out


def step_points(calibration: str, folder: Path = TABLES) -> list[Point]:
    """Per-component time and dynamic energy of one decoding step per reference point, the
    model as AttAcc models it: no grouped-query attention (one KV head per head)."""
    out = []
    for r in _records("decode_steps", folder):
        system, spec = load_hardware(SYSTEMS[r["system"]], calibration), load_model(r["model"])
        cost = system.price_step(replace(spec, kv_heads=spec.heads),
                                 [(r["context"], 1)] * r["batch"],
                                 power_constrained=r["power_constraint"])
        pc = ", power constraint" if r["power_constraint"] else ""
        where = f"{r['model']} on {r['system']}{pc}, batch {r['batch']}, L {r['context']}"
        ours = (cost.attention_ps, cost.fc_ps, cost.comm_ps, cost.other_ps, cost.time_ps)
        out += [Point(c, where, ps / 1000, r[f"{c}_ns"]) for c, ps in zip(STEP_COMPONENTS, ours)]
        dynamic = cost.energy_pj - cost.energy_by_component_pj["static"]
        out.append(Point("energy", where, dynamic, r["energy_pj"]))
    return out


def fit_attacc_schedule(folder: Path = TABLES) -> dict[str, int]:
    """The four cycle counts of ``AttaccSchedule`` fitted to the Ramulator2 table, rounded to
    whole cycles, on the points without the power constraint nor a refresh (cycles below REFI):
    ``per_score_group``, ``per_context_group`` and ``fixed`` by least squares on one instance
    per channel (16 heads or fewer) after the MAC streams and row changes; ``pair_overlap`` as
    the mean of what two instances per channel (32 heads) save beyond their score groups."""
    pim = load_pim("hbm3_pim", "attacc")
    # (heads, cycles, stream cycles, score groups, context groups) of each chosen point
    chosen = [(r["heads"], r["cycles"],
               *pim.attacc_layout(r["context"], r["head_dim"], 1, 2, pim.mac_spacing)[:3])
              for r in _records("pim_attention", folder)
              if not r["power_constraint"] and r["cycles"] < pim.t.REFI]
    single = [(groups, dims, 1, cycles - streams)
              for heads, cycles, streams, groups, dims in chosen if heads <= 16]
    coef = np.linalg.lstsq(np.array([r[:3] for r in single], float),
                           np.array([r[3] for r in single], float), rcond=None)[0]
    score, context, fixed = (int(round(c)) for c in coef)
    saved = [2 * (streams + groups * score + dims * context + fixed) - cycles - groups * score
             for heads, cycles, streams, groups, dims in chosen if heads == 32]
    return {"per_score_group": score, "per_context_group": context, "fixed": fixed,
            "pair_overlap": int(round(sum(saved) / len(saved)))}


def compare(calibration: str, folder: Path = TABLES) -> list[Point]:
    if calibration not in CALIBRATIONS:
        raise ConfigError(f"unknown calibration {calibration!r}; known: {', '.join(CALIBRATIONS)}")
    return pim_points(calibration, folder) + step_points(calibration, folder)


def known_deviations(folder: Path = TABLES) -> dict[tuple[str, str], str]:
    """``(component, where) -> why`` of ``validation/known_deviations.yaml``."""
    path = folder.parent / "known_deviations.yaml"
    if not path.is_file():
        return {}
    entries = load_yaml_list(path)
    out = {}
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise ConfigError(f"{path}: [{i}]: expected a mapping")
        key = tuple(get(e, k, str, source=path, prefix=f"[{i}]") for k in ("component", "where"))
        if key[0] not in BOUNDS:
            raise ConfigError(f"{path}: [{i}].component: expected one of {', '.join(BOUNDS)}")
        out[key] = get(e, "why", str, source=path, prefix=f"[{i}]")
    return out


def summarize(points: list[Point], known: dict[tuple[str, str], str] | None = None) -> list[dict]:
    """Per component: points, mean |error|, worst error (signed) and where, and whether the
    bounds hold; the worst error and the bound are over the points not in ``known`` (listed
    apart with their errors, each expected out of its bound)."""
    known = known or {}
    rows = []
    for component in dict.fromkeys(p.component for p in points):
        mine = [p for p in points if p.component == component]
        checked = [p for p in mine if (component, p.where) not in known]
        listed = [p for p in mine if (component, p.where) in known]
        worst = max(checked, key=lambda p: abs(p.error))
        mean = sum(abs(p.error) for p in mine) / len(mine)
        mean_bound, worst_bound = BOUNDS[component]
        ok = abs(worst.error) <= worst_bound and (mean_bound is None or mean <= mean_bound)
        rows.append({"component": component, "points": len(mine), "mean_abs_error": mean,
                     "mean_error": sum(p.error for p in mine) / len(mine),
                     "worst_error": worst.error, "worst_at": worst.where,
                     "worst_ours": worst.ours, "worst_reference": worst.reference,
                     "bound_mean": mean_bound, "bound_worst": worst_bound, "within": ok,
                     "known_deviations": [{"where": p.where, "error": p.error,
                                           "still_out": abs(p.error) > worst_bound,
                                           "why": known[(component, p.where)]} for p in listed]})
    return rows


README = ROOT / "sim" / "cost" / "README.md"
README_COMMAND = "saddle validate --readme"     # writes README's marked block (common/marked.py)
LABELS = {"pim_cycles": "PIM attention cycles (Ramulator2)", "attention": "step attention (AttAcc)",
          "fc": "step FC", "comm": "step communication", "other": "step other", "total": "step total",
          "energy": "dynamic energy per step"}


def readme_table() -> str:
    """sim/cost/README.md's table: per component, mean |error| and worst error (and where) of the
    ``attacc`` calibration, the same of ``physical`` for comparison, and the bounds."""
    def pct(x: float, digits: int, sign: str = "") -> str:
        return f"{x * 100:{sign}.{digits}f} %"
    rows = {cal: summarize(compare(cal), known_deviations() if cal == "attacc" else None)
            for cal in ("attacc", "physical")}
    lines = ["| component | points | attacc: mean / worst (where) | physical: mean / worst | bound |",
             "|---|---|---|---|---|"]
    for a, p in zip(rows["attacc"], rows["physical"], strict=True):
        bound = ("" if a["bound_mean"] is None else pct(a["bound_mean"], 0) + " / ") + pct(a["bound_worst"], 0)
        lines.append(f"| {LABELS[a['component']]} | {a['points']} | {pct(a['mean_abs_error'], 2)} / "
                     f"{pct(a['worst_error'], 2, '+')} ({a['worst_at']}) | {pct(p['mean_abs_error'], 1)} / "
                     f"{pct(p['worst_error'], 1, '+')} | {bound} |")
    return "\n".join(lines) + "\n"
