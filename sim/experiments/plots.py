"""Plots of an experiment's results (matplotlib, headless): one panel per pair.

``plot.x`` = ``system``: grouped bars, one group per (batch, sequence length), one bar per
system; ``batch`` / ``sequence_length``: one line per system; ``draft_length``: one line per
fixed-d system against d, systems without a fixed d as horizontal lines. With ``normalize`` each
value is divided by that system's value at the same pair, batch and sequence length. A system
appearing with several fixed d at the same point is split into one series per d.
"""
from __future__ import annotations

from pathlib import Path


def plot_all(out: Path, experiment: dict, records: list[dict]) -> list[Path]:
    """``plot`` may be one spec or a list; a spec's ``where`` keeps matching records only."""
    specs = experiment["plot"] if isinstance(experiment["plot"], list) else [experiment["plot"]]
    paths = []
    for i, spec in enumerate(specs):
        where = spec.get("where", {})
        rows = [r for r in records if all(r.get(k) == v for k, v in where.items())]
        suffix = f"-{spec['name']}" if "name" in spec else ("" if len(specs) == 1 else f"-{i}")
        paths.append(plot(out / f"{experiment['name']}{suffix}.png", experiment, spec, rows))
    return paths


def _value(record: dict, metric: str) -> float:
    value = record
    for part in metric.split("."):
        value = value[part]
    return float(value)


def _point(r: dict) -> tuple:
    return (r["pair"], r["batch"], r.get("sequence_length"))


def _names(rows: list[dict]) -> dict[int, str]:
    swept = set()
    seen: dict[tuple, set] = {}
    for r in rows:
        ds = seen.setdefault((r["system"],) + _point(r), set())
        ds.add(r["draft_length"])
        if len(ds) > 1:
            swept.add(r["system"])
    return {id(r): (f"{r['system']} d={r['draft_length']}" if r["system"] in swept else r["system"])
            for r in rows}


def plot(path: Path, experiment: dict, spec: dict, records: list[dict]) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x_key, metric, norm = spec.get("x", "batch"), spec.get("metric", "tokens_per_s"), spec.get("normalize")
    pairs = list(dict.fromkeys(r["pair"] for r in records))
    fig, axes = plt.subplots(1, max(1, len(pairs)), figsize=(5 * max(1, len(pairs)), 3.6), squeeze=False)
    refs = {_point(r): r for r in records if norm and r["system"] == norm}

    def value(r):
        v = _value(r, metric)
        if norm:
            ref = refs.get(_point(r))
            v = v / _value(ref, metric) if ref else float("nan")
        return v

    for ax, pair in zip(axes[0], pairs):
        rows = [r for r in records if r["pair"] == pair]
        names = _names(rows)
        series = list(dict.fromkeys(names[id(r)] for r in rows))
        if x_key == "system":
            groups = list(dict.fromkeys((r["batch"], r.get("sequence_length")) for r in rows))
            width = 0.8 / max(1, len(series))
            for j, name in enumerate(series):
                xs, ys = [], []
                for g, (batch, seq) in enumerate(groups):
                    match = [r for r in rows if names[id(r)] == name and r["batch"] == batch
                             and r.get("sequence_length") == seq]
                    if match:
                        xs.append(g + (j - (len(series) - 1) / 2) * width)
                        ys.append(value(match[0]))
                ax.bar(xs, ys, width, label=name)
            ax.set_xticks(range(len(groups)))
            ax.set_xticklabels([f"batch {b}" + (f", L={s}" if s else "") for b, s in groups])
        elif x_key == "draft_length":
            systems = list(dict.fromkeys(r["system"] for r in rows))
            for k, system in enumerate(systems):
                pts = sorted((r["draft_length"], value(r)) for r in rows
                             if r["system"] == system and r["draft_length"] is not None)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=system)
                else:
                    for r in rows:
                        if r["system"] == system:
                            ax.axhline(value(r), linestyle="--", linewidth=1, color=f"C{k}", label=system)
        else:
            for name in series:
                pts = sorted((r[x_key], value(r)) for r in rows if names[id(r)] == name
                             and r.get(x_key) is not None)
                if pts:
                    ax.plot([str(p[0]) for p in pts], [p[1] for p in pts], marker="o", label=name)
        ax.set_title(pair, fontsize=9)
        ax.set_xlabel(x_key)
        ax.set_ylabel(metric + (f" / {norm}" if norm else ""))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(experiment.get("description", experiment["name"]), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
