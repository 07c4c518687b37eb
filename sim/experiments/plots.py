"""Plots of an experiment's results (matplotlib, headless): one panel per pair, the metric
against ``plot.x``, one series per system (and fixed d), optionally normalised to a system."""
from __future__ import annotations

from pathlib import Path


def _series_name(r: dict) -> str:
    return r["system"] if r["draft_length"] is None else f"{r['system']} d={r['draft_length']}"


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


def plot(path: Path, experiment: dict, spec: dict, records: list[dict]) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x_key, metric = spec.get("x", "batch"), spec.get("metric", "tokens_per_s")
    norm = spec.get("normalize")
    pairs = sorted({r["pair"] for r in records})
    fig, axes = plt.subplots(1, len(pairs), figsize=(5 * len(pairs), 3.6), squeeze=False)
    for ax, pair in zip(axes[0], pairs):
        rows = [r for r in records if r["pair"] == pair]
        if x_key == "draft_length":
            # d sweep: one series per system, x = d; adaptive systems and AD as lines
            series = {r["system"] for r in rows}
        else:
            series = {_series_name(r) for r in rows}
        xs = sorted({r[x_key] for r in rows if r[x_key] is not None}, key=str)
        for name in sorted(series):
            pts = []
            for x in xs:
                match = [r for r in rows if (r["system"] if x_key == "draft_length" else _series_name(r)) == name
                         and r[x_key] == x]
                if not match:
                    continue
                value = _value(match[0], metric)
                if norm:
                    ref = [r for r in rows if r["system"] == norm and
                           (x_key == "draft_length" or r[x_key] == x)]
                    value = value / _value(ref[0], metric) if ref else float("nan")
                pts.append((x, value))
            flat = [r for r in rows if (r["system"] if x_key == "draft_length" else _series_name(r)) == name
                    and r[x_key] is None]
            if pts:
                ax.plot([str(p[0]) for p in pts], [p[1] for p in pts], marker="o", label=name)
            elif flat and x_key == "draft_length":
                value = _value(flat[0], metric)
                if norm:
                    ref = [r for r in rows if r["system"] == norm]
                    value = value / _value(ref[0], metric)
                ax.axhline(value, linestyle="--", linewidth=1, label=name, color=f"C{len(ax.lines) % 10}")
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


def _value(record: dict, metric: str) -> float:
    value = record
    for part in metric.split("."):
        value = value[part]
    return float(value)
