"""The reproduction as one page: what ``saddle report`` assembles before it is rendered
(``render.py``).

A ``Page`` is a title, a summary ``Table`` of every published claim (ours, the ratio and a
verdict) and one ``Section`` per paper figure: its experiment's description and command, its
plots (paths relative to the page's folder), its claims beside ours with the measured
decomposition where ours differs, and its side-by-side comparison if it has one. A last section
holds the cost model's validation against AttAcc's simulator and Ramulator2
(``validation/compare.py``). Every figure's runs are simulated by the experiment runner into
``<page folder>/<experiment>/`` (a second ``saddle report`` reuses them, as ``saddle run`` does).
"""
from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

# The paper's figures this project reproduces, in the paper's order (configs/experiments/).
FIGURES = ("fig3", "fig12", "fig14", "fig15", "fig16", "fig17", "fig18", "fig19")


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass
class Section:
    anchor: str                                   # the HTML id and the Markdown heading
    title: str
    paragraphs: list[str] = field(default_factory=list)
    command: str | None = None                    # the command that reruns it
    images: list[str] = field(default_factory=list)     # relative to the page's folder
    tables: list[tuple[str, Table]] = field(default_factory=list)   # (caption, table)
    links: list[str] = field(default_factory=list)      # files beside the page


@dataclass
class Page:
    title: str
    summary: Table
    sections: list[Section]


def _number(value) -> str:
    if isinstance(value, bool) or value is None:
        return "-" if value is None else ("yes" if value else "no")
    if isinstance(value, float):
        return f"{value:.3g}" if math.isfinite(value) else str(value)
    return str(value)


def verdict(row: dict) -> str:
    """A claim row of ``report.published.compare``: reproduced, or how it differs, with the
    measured factors of a ratio that differs (their product is ours over the baseline's)."""
    if row.get("agrees"):
        return "reproduced"
    factors = row.get("factors")
    if factors:
        return "differs; factors " + ", ".join(f"{k} {v:.2f}" for k, v in factors.items())
    return "differs" + (f" ({row['detail']})" if row.get("detail") else "")


def figure_section(name: str, experiment: dict, records: list[dict], images: list[str],
                   claims: list[dict]) -> Section:
    """One figure: its description, command, plots, claims and comparison."""
    from report import compare
    from report.published import FACTORS, ROW
    section = Section(anchor=name, title=f"{name}: {experiment.get('description', name)}",
                      command=f"saddle run {name}", images=images)
    section.paragraphs.append(f"{len(records)} runs; the experiment file is "
                              f"configs/experiments/{name}.yaml.")
    from common.paths import ROOT
    section.paragraphs += [f"Warning: {w.replace(f'{ROOT}/', '')}"     # no local paths on the page
                           for w in experiment.get("warnings", [])]
    if "published" in experiment:
        section.paragraphs.append(f"Published values: {experiment['published']['source']}.")
        section.tables.append(("Published claims beside ours", Table(
            ROW, tuple(tuple(_number(row.get(k)) for k in ROW) for row in claims))))
        factored = [row for row in claims if "factors" in row]
        if factored:
            section.tables.append((
                "Why ours differs: the factors of each ratio (geometric means over its points; "
                "their product is ours; > 1 favours the numerator)",
                Table(("claim",) + FACTORS, tuple((row["claim"],) + tuple(
                    f"{row['factors'][f]:.3f}" for f in FACTORS) for row in factored))))
    if "compare" in experiment:
        spec = experiment["compare"]
        rows = compare.summary(spec, compare.rows(spec, records))
        if rows:
            columns = tuple(rows[0])
            section.tables.append((f"Each system against {spec['reference']}", Table(
                columns, tuple(tuple(_number(r[c]) for c in columns) for r in rows))))
    return section


RATIO_KINDS = ("mean_ratio", "ratio", "share")     # claims whose values divide


def summary(claims: dict[str, list[dict]]) -> Table:
    """Every published claim of every figure: the figure, the claim, published, ours, ours over
    published (quantities only, not counts or choices) and the verdict."""
    rows = []
    for name, rows_of in claims.items():
        for row in rows_of:
            published, ours = row.get("published"), row.get("ours")
            ratio = (ours / published if row.get("kind") in RATIO_KINDS and published else None)
            rows.append((name, str(row["claim"]), _number(published), _number(ours),
                         "-" if ratio is None else f"{ratio:.2f}", verdict(row)))
    return Table(("figure", "claim", "published", "ours", "ours / published", "verdict"),
                 tuple(rows))


def reference_speedups(batches=(16, 32, 64, 128), contexts=(512, 1024)) -> Table:
    """What AttAcc's simulator itself says of PIM-AD against GPU-AD: one decoding step's time on
    the DGX over DGX+AttAcc (no power constraint), per model, batch and context, from the
    reference table (``validation/tables/attacc_steps.json``)."""
    from validation import compare as v
    doc = v.load_table("decode_steps")
    rows = [dict(zip(doc["columns"], r)) for r in doc["rows"]]
    total = {(r["model"], r["system"], r["batch"], r["context"]): r["total_ns"]
             for r in rows if not r["power_constraint"]}
    models = list(dict.fromkeys(r["model"] for r in rows))
    out = [(model, str(b)) + tuple(f"{total[model, 'dgx', b, c] / total[model, 'attacc', b, c]:.2f}"
                                   for c in contexts)
           for model in models for b in batches]
    return Table(("model", "batch") + tuple(f"context {c}" for c in contexts), tuple(out))


def validation_section() -> Section:
    """The cost model against the reference tables, held to the project's bounds
    (``saddle validate``, calibration ``attacc``)."""
    from validation import compare as v
    rows = v.summarize(v.compare("attacc"), v.known_deviations())
    table = Table(("component", "points", "mean |error|", "worst error", "bound (worst)",
                   "within", "where the worst is"),
                  tuple((r["component"], str(r["points"]), f"{r['mean_abs_error']:.2%}",
                         f"{r['worst_error']:+.2%}", f"{r['bound_worst']:.0%}",
                         "yes" if r["within"] else "no", r["worst_at"]) for r in rows))
    sources = v.load_table("decode_steps")["sources"]
    return Section(
        anchor="validation", title="Cost model against AttAcc's simulator and Ramulator2",
        command="saddle validate",
        paragraphs=["Step times and dynamic energy per decoding step against AttAcc's simulator, "
                    "PIM attention cycles against Ramulator2 with AttAcc's PIM patches "
                    "(validation/tables/, regenerated by validation/regenerate.py). Sources: "
                    + "; ".join(f"{n} {s.get('repository', '')} at {s['commit'][:12]}"
                                for n, s in sources.items()) + "."],
        tables=[("Error per component (calibration attacc)", table),
                ("AttAcc's simulator's own PIM-AD speed-up over GPU-AD (one decoding step, DGX "
                 "over DGX+AttAcc, no power constraint). The paper's fig12 claims imply 1.73 "
                 "(SADDLE / GPU-AD 3.36 over SADDLE / PIM-AD 1.94) as a mean over batch 16-128 "
                 "at the pairs' maximum contexts", reference_speedups())])


def timeline_section(folder: Path, name: str, runs: list) -> Section | None:
    """A Perfetto timeline of ``name``'s SADDLE run at its smallest batch, with one batch of
    requests (a few MB, gzipped; the whole run's is hundreds): every TLM pass, DLM step per
    micro-batch and Manager interval. Simulated into ``folder/timeline/`` unless the folder has
    it for these exact parameters, trace and configs (the file's name holds their digest)."""
    from sim.experiments.runner import execute, resolved, run_file
    chosen = [p for p in runs if p.system == "saddle" and p.label in (None, "saddle")]
    if not chosen:
        return None
    first = min(chosen, key=lambda p: p.batch)
    run = dataclasses.replace(first, requests=first.batch)
    params, _ = run_file(resolved(run))
    digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:12]
    path = folder / f"timeline-saddle-{digest}.json.gz"
    if not path.is_file():
        for old in folder.glob("timeline-saddle-*"):
            old.unlink()
        plain = path.with_suffix("")
        execute(name, [run], folder / "timeline", progress=False, timeline=plain, timeline_run=0)
        path.write_bytes(gzip.compress(plain.read_bytes(), mtime=0))
        plain.unlink()
    return Section(anchor="timeline", title="The pipeline of one SADDLE run",
                   paragraphs=[f"{path.name}: {name}'s SADDLE run on {run.pair} at batch "
                               f"{run.batch}, with one batch of requests ({run.batch}): every "
                               "TLM pass, DLM step per micro-batch and Manager interval on its "
                               "lane. Unzip it (gunzip) and open it in ui.perfetto.dev or "
                               "chrome://tracing."],
                   links=[path.name])


ASSUMPTIONS = Path(__file__).with_name("assumptions.yaml")


def assumptions_section(path: Path = ASSUMPTIONS) -> Section:
    """``assumptions.yaml``: each assumption with the value its file sets now."""
    from common.config import get, load_yaml
    from common.errors import ConfigError
    from common.paths import ROOT
    entries = get(load_yaml(path), "assumptions", list, source=path)
    rows = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ConfigError(f"{path}: assumptions[{i}]: expected a mapping with what, file, key, doc")
        what, file, key, doc = (get(entry, k, str, source=path, prefix=f"assumptions[{i}]")
                                for k in ("what", "file", "key", "doc"))
        value = load_yaml(ROOT / file)
        for part in key.split("."):
            if not isinstance(value, dict) or part not in value:
                raise ConfigError(f"{path}: assumptions[{i}]: {file} has no key {key!r}")
            value = value[part]
        rows.append((what, f"{file}: {key}", _number(value), doc))
    return Section(anchor="assumptions", title="Assumptions and approximations",
                   paragraphs=["What the runs above assume where the paper is silent or where "
                               "we approximate, with the file and key that set it and its value."],
                   tables=[("", Table(("assumption", "set in", "value", "explained in"),
                                      tuple(rows)))])


def build(folder: Path, names: tuple[str, ...] = FIGURES, *, requests: int | str | None = None,
          jobs: int = 1, validate: bool = True) -> Page:
    """Simulate what is missing of each experiment in ``names`` (into ``folder/<name>/``), plot
    it and assemble the page. ``requests`` replaces each experiment's workload.requests (a
    smaller, faster page; the page says so)."""
    from report import published
    from report.plots import plot_all
    from sim.experiments.grid import load_experiment, resolve_path
    from sim.experiments.runner import claim_folder, execute, write_results

    sections, claims, timeline = [], {}, None
    for name in names:
        path = resolve_path(name)
        experiment, runs = load_experiment(path, requests=requests)
        out = folder / experiment["name"]
        claim_folder(out, "experiment", experiment["name"], str(path))   # as `saddle run` does
        records = execute(experiment["name"], runs, out, jobs=jobs)   # progress as `saddle run`
        write_results(out, experiment, runs, records)
        images = [p.relative_to(folder).as_posix() for p in plot_all(out, experiment, records)]
        rows = (published.compare(experiment["published"], records)
                if "published" in experiment else [])
        claims[experiment["name"]] = rows
        section = figure_section(experiment["name"], experiment, records, images, rows)
        if requests is not None:
            section.paragraphs.append(f"Reduced workload: {requests} requests per run "
                                      "(--requests), not the experiment's own.")
        sections.append(section)
        if timeline is None:
            timeline = timeline_section(folder, experiment["name"], runs)
    if timeline is not None:
        sections.append(timeline)
    if validate:
        sections.append(validation_section())
    sections.append(assumptions_section())
    return Page(title="SADDLE: the paper's figures reproduced", summary=summary(claims),
                sections=sections)
