"""Plots of a sweep's rows: one figure per metric (``<name>-<metric>.png``).

One axis (``x``): a line per facet value (``facet``, or the system when the base has several)
over x. Two axes (``x``, ``y``): a heatmap per facet value, one panel each (sampled points that
do not fill a grid: a scatter coloured by the metric). The best point of each line or panel
(``best: max`` or ``min``; ``best_per: y``: of each row of a heatmap) is marked with a star.
Failed runs are left out.
"""
from __future__ import annotations

from pathlib import Path

from common.config import check_keys, get, suggest
from common.errors import ConfigError
from report.plots import save, subplots

PLOT_KEYS = ("metrics", "x", "y", "facet", "best", "best_per")
# The run's own name in rows and plots (the system's label): plot.x / y / facet may name it.
SYSTEM = "system"


def check_plot(spec: dict, axes: tuple[str, ...], dims: tuple[str, ...], src: str) -> dict | None:
    """A sweep's ``plot:`` checked, with its defaults: x, y, facet from ``dims`` in order (the
    axes with more than one value, then the system when the base has several); None when more
    than three dimensions are left to place."""
    check_keys(spec, PLOT_KEYS, source=src, where="plot")
    named = list(axes) + [SYSTEM] * (SYSTEM not in axes)
    for key in ("x", "y", "facet"):
        value = spec.get(key)
        if value is not None and value not in named:
            raise ConfigError(f"{src}: plot.{key}: {value!r} is not an axis{suggest(value, named)}; "
                              f"axes: {', '.join(named)}")
    metrics = get(spec, "metrics", list, source=src, prefix="plot", default=["tokens_per_s"])
    best = get(spec, "best", str, source=src, prefix="plot", default="max")
    if best not in ("max", "min"):
        raise ConfigError(f"{src}: plot.best: expected max or min, found {best!r}")
    per = get(spec, "best_per", str, source=src, prefix="plot", default="facet")
    if per not in ("facet", "y"):
        raise ConfigError(f"{src}: plot.best_per: expected facet or y, found {per!r}")
    given = [spec[k] for k in ("x", "y", "facet") if spec.get(k)]
    rest = [d for d in dims if d not in given]
    x = spec.get("x") or (rest.pop(0) if rest else axes[0])
    y = spec.get("y") if "y" in spec else (rest.pop(0) if rest else None)
    facet = spec.get("facet") if "facet" in spec else (rest.pop(0) if rest else None)
    if rest:
        return None
    if per == "y" and y is None:
        raise ConfigError(f"{src}: plot.best_per: y needs a heatmap (plot.y)")
    return {"metrics": metrics, "x": x, "y": y, "facet": facet, "best": best, "best_per": per}


def _get(row: dict, key: str | None):
    if key is None:
        return None
    return row["run"]["system"] if key == SYSTEM and SYSTEM not in row["point"] else row["point"][key]


def best(rows: list[dict], plot: dict, metric: str) -> dict:
    """The best finished row by ``metric`` of each facet value (each line of a line plot, each
    panel of a heatmap), or with ``best_per: y`` of each (facet, y): ``{key: row}``, the key
    the facet value or (facet value, y value); the first of equals wins."""
    out: dict = {}
    sign = 1 if plot["best"] == "max" else -1
    for r in rows:
        value = r["metrics"].get(metric) if r["status"] == "ok" else None
        if not isinstance(value, (int, float)):
            continue
        key = _get(r, plot["facet"])
        if plot.get("best_per") == "y":
            key = (key, _get(r, plot["y"]))
        if key not in out or sign * value > sign * out[key]["metrics"][metric]:
            out[key] = r
    return out


def plot_sweep(out: Path, name: str, plot: dict | None, rows: list[dict]) -> list[Path]:
    if plot is None:
        return []
    ok = [r for r in rows if r["status"] == "ok"]
    paths = []
    for metric in plot["metrics"]:
        have = [r for r in ok if isinstance(r["metrics"].get(metric), (int, float))]
        if not have:
            continue
        facets = list(dict.fromkeys(_get(r, plot["facet"]) for r in have))
        marks = best(have, plot, metric)
        if plot["y"] is None:
            fig, ax = subplots(figsize=(6, 4))
            for facet in facets:
                line = sorted(((_get(r, plot["x"]), r["metrics"][metric]) for r in have
                               if _get(r, plot["facet"]) == facet), key=lambda item: _order(item[0]))
                xs, ys = zip(*line)
                drawn = ax.plot(xs, ys, marker="o",
                                label=f"{plot['facet']}={facet}" if plot["facet"] else None)
                top = marks[facet]
                ax.plot([_get(top, plot["x"])], [top["metrics"][metric]], marker="*",
                        markersize=16, color=drawn[0].get_color(), markeredgecolor="black")
            ax.set_xlabel(plot["x"])
            ax.set_ylabel(metric)
            if plot["facet"]:
                ax.legend(fontsize=8)
        else:
            fig, axes = subplots(1, len(facets), figsize=(4.6 * len(facets), 4), squeeze=False)
            for ax, facet in zip(axes[0], facets):
                cells = {(_get(r, plot["x"]), _get(r, plot["y"])): r["metrics"][metric]
                         for r in have if _get(r, plot["facet"]) == facet}
                tops = [r for key, r in marks.items()
                        if (key[0] if plot.get("best_per") == "y" else key) == facet]
                _heatmap(ax, cells, [(_get(r, plot["x"]), _get(r, plot["y"])) for r in tops])
                ax.set_xlabel(plot["x"])
                ax.set_ylabel(plot["y"])
                ax.set_title(f"{plot['facet']}={facet}" if plot["facet"] else metric, fontsize=9)
        fig.suptitle(f"{name}: {metric} (best marked with a star)", fontsize=10)
        paths.append(save(fig, out / f"{name}-{metric.replace('.', '_')}.png", dpi=110))
    return paths


def _heatmap(ax, cells: dict, tops: list[tuple]) -> None:
    import numpy as np
    xs = sorted({x for x, _ in cells}, key=_order)
    ys = sorted({y for _, y in cells}, key=_order)
    if len(cells) == len(xs) * len(ys):         # a full grid: one cell per (x, y)
        grid = np.array([[cells[(x, y)] for x in xs] for y in ys], dtype=float)
        image = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis")
        ax.set_xticks(range(len(xs)), [str(x) for x in xs], fontsize=8)
        ax.set_yticks(range(len(ys)), [str(y) for y in ys], fontsize=8)
        for j, y in enumerate(ys):
            for i, x in enumerate(xs):
                ax.text(i, j, f"{cells[(x, y)]:.4g}", ha="center", va="center", fontsize=7,
                        color="white")
        # in the cell's corner, beside its value
        at = [(xs.index(bx) + 0.32, ys.index(by) + 0.3) for bx, by in tops]
    else:                                       # sampled points: where they fell
        pts = list(cells.items())
        image = ax.scatter([p[0][0] for p in pts], [p[0][1] for p in pts],
                           c=[p[1] for p in pts], cmap="viridis", s=60)
        at = tops
    for point in at:
        ax.plot(*point, marker="*", markersize=18, color="red", markeredgecolor="black")
    ax.figure.colorbar(image, ax=ax)


def _order(value):
    """Numbers in order, then everything else by its text (a column of mixed kinds)."""
    return (0, value, "") if isinstance(value, (int, float)) else (1, 0, str(value))
