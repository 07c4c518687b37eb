"""Plots of an experiment's results (matplotlib, headless): one panel per pair.

``plot.x`` = ``system``: grouped bars, one group per (batch, sequence length), one bar per
system (a single group: each bar named on the axis, the point in the panel title); ``batch`` /
``sequence_length``: one line per system; ``draft_length`` / ``aging_passes``: one line per
system against d / the Shared Pool's aging K, runs without it as horizontal lines (with several
batches: a line per (system, batch), no horizontal lines). ``normalize``: each value divided by
that system's at the same pair, batch and sequence length. A system with several fixed d at the
same point is split into one series per d.

With ``x: system``, ``stack: [m1, m2, ...]`` draws one stacked bar per (system, batch, sequence
length), a segment per metric (``fraction: true``: each bar scaled to sum to 1);
``metrics: [m1, m2, ...]`` draws the metrics side by side. ``labels`` names the segments / bars
(default: the metric's last part); ``ylabel`` the y axis (default: the metric in words). Every
legend stands beside the last panel, never over the data.
"""
from __future__ import annotations

from pathlib import Path

from common.config import check_keys, suggest
from common.errors import ConfigError

# Every key a plot spec may have (check_plots refuses others), and what its x may be.
PLOT_KEYS = ("name", "x", "metric", "normalize", "where", "stack", "metrics", "labels", "fraction",
             "ylabel")
PLOT_X = ("batch", "draft_length", "sequence_length", "system", "aging_passes")
# A legend's place: beside the axes' right edge, never over the data.
BESIDE = dict(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)


def plot_all(out: Path, experiment: dict, records: list[dict]) -> list[Path]:
    """``plot`` may be one spec or a list; a spec's ``where`` keeps matching records only. With
    ``published:``, ours beside the published ratios too."""
    specs = experiment["plot"] if isinstance(experiment["plot"], list) else [experiment["plot"]]
    paths = []
    for i, spec in enumerate(specs):
        where = spec.get("where", {})
        rows = [r for r in records if all(r.get(k) == v for k, v in where.items())]
        suffix = f"-{spec['name']}" if "name" in spec else ("" if len(specs) == 1 else f"-{i}")
        paths.append(plot(out / f"{experiment['name']}{suffix}.png", experiment, spec, rows,
                          references=records))
    if "published" in experiment:
        from report import published
        path = _published(out, experiment["name"],
                          published.compare(experiment["published"], records))
        if path is not None:
            paths.append(path)
    return paths


def check_plots(plot, src: str, names: list[str], run_fields: tuple[str, ...]) -> None:
    """An experiment's ``plot:`` (a spec or a list of specs), checked before anything runs;
    ``names``: the runs' systems (what ``normalize`` may name), ``run_fields``: what ``where``
    may match. Errors name ``src`` and the key path (``plot[1].x``)."""
    for i, spec in enumerate(plot if isinstance(plot, list) else [plot]):
        at = "plot" + (f"[{i}]" if isinstance(plot, list) else "")
        where = f"{src}: {at}"
        if not isinstance(spec, dict):
            raise ConfigError(f"{where}: expected a mapping (x, metric, ...), found {spec!r}")
        check_keys(spec, PLOT_KEYS, source=src, where=at)
        if spec.get("x", "batch") not in PLOT_X:
            raise ConfigError(f"{where}.x: expected one of {list(PLOT_X)}, found {spec.get('x')!r}")
        check_spec(spec, where)
        norm = spec.get("normalize")
        if norm is not None and norm not in names:
            raise ConfigError(f"{where}.normalize: no system of the experiment is named {norm!r}"
                              f"{suggest(norm, names)}; systems: {', '.join(sorted(names))}")
        plot_where = spec.get("where", {})
        if not isinstance(plot_where, dict):
            raise ConfigError(f"{where}.where: expected a mapping of run field -> value, "
                              f"found {plot_where!r}")
        check_keys(plot_where, run_fields, source=src, where=f"{at}.where")


def check_spec(spec: dict, where: str) -> None:
    """ConfigError naming ``where`` for a plot spec this module cannot draw."""
    for key in ("name", "metric", "normalize", "ylabel"):
        if key in spec and (not isinstance(spec[key], str) or not spec[key]):
            raise ConfigError(f"{where}.{key}: expected a non-empty string, found {spec[key]!r}")
    many = [k for k in ("stack", "metrics") if k in spec]
    if len(many) > 1 or (many and "metric" in spec):
        raise ConfigError(f"{where}: give one of metric, stack or metrics, found {sorted(set(spec) & {'metric', 'stack', 'metrics'})}")
    if many:
        key = many[0]
        names = spec[key]
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise ConfigError(f"{where}.{key}: expected a non-empty list of metric names, found {names!r}")
        if spec.get("x", "batch") != "system":
            raise ConfigError(f"{where}.{key}: needs x: system, found x: {spec.get('x', 'batch')!r}")
        labels = spec.get("labels")
        if labels is not None and (not isinstance(labels, list) or len(labels) != len(names)):
            raise ConfigError(f"{where}.labels: expected a list of {len(names)} names, found {labels!r}")
        if spec.get("normalize"):
            raise ConfigError(f"{where}: normalize does not apply to {key}")


def _value(record: dict, metric: str) -> float:
    value = record
    for part in metric.split("."):
        if not isinstance(value, dict) or part not in value:
            known = sorted(k for k in (value if isinstance(value, dict) else {}))
            raise ConfigError(f"plot metric {metric!r}: the {record.get('system')} run has no "
                              f"{part!r}; it has {', '.join(known)}")
        value = value[part]
    return float(value) if value is not None else float("nan")


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


def plot(path: Path, experiment: dict, spec: dict, records: list[dict],
         references: list[dict] | None = None) -> Path:
    """``references``: where ``normalize`` finds its system (default ``records``; plot_all
    passes every record, so a ``where`` that leaves the reference out still normalises)."""
    x_key, metric, norm = spec.get("x", "batch"), spec.get("metric", "tokens_per_s"), spec.get("normalize")
    pairs = list(dict.fromkeys(r["pair"] for r in records))
    # Wide enough for the bars of the widest panel to keep their labels apart.
    bars = max((len({(r["system"], r["draft_length"], r["batch"], r.get("sequence_length"))
                     for r in records if r["pair"] == pair}) for pair in pairs), default=1)
    width = max(6.5, 0.8 * bars) if ("stack" in spec or "metrics" in spec) else 6.5
    fig, axes = subplots(1, max(1, len(pairs)), figsize=(width * max(1, len(pairs)), 3.6), squeeze=False)
    refs = {_point(r): r for r in (records if references is None else references)
            if norm and r["system"] == norm}

    def value(r):
        v = _value(r, metric)
        if norm:
            ref = refs.get(_point(r))
            v = v / _value(ref, metric) if ref else float("nan")
        return v

    for ax, pair in zip(axes[0], pairs):
        rows = [r for r in records if r["pair"] == pair]
        title_extra, x_title = _panel(ax, rows, spec, x_key, value)
        ax.set_title(pair + title_extra, fontsize=9)
        ax.set_xlabel(x_title)
        ax.set_ylabel(_ylabel(spec, metric, norm))
        ax.grid(alpha=0.3, axis="y" if x_key == "system" else "both")
        if norm and "stack" not in spec and "metrics" not in spec:
            ax.axhline(1.0, color="0.3", linewidth=0.8, linestyle=":")
    _legend_beside(axes[0])
    fig.suptitle(experiment.get("description", experiment["name"]), fontsize=9)
    return save(fig, path)


def _published(out: Path, name: str, rows: list[dict]) -> Path | None:
    """Bars of ours next to published for the numeric claims (ratios); None if there is none."""
    numeric = [r for r in rows if isinstance(r["published"], (int, float)) and isinstance(r["ours"], float)]
    if not numeric:
        return None
    fig, ax = subplots(figsize=(max(5.5, 1.3 * len(numeric) + 1.5), 3.8))
    x = range(len(numeric))
    ax.bar([i - 0.2 for i in x], [r["published"] for r in numeric], 0.4, label="published")
    ax.bar([i + 0.2 for i in x], [r["ours"] for r in numeric], 0.4, label="ours")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xticks(list(x))
    ax.set_xticklabels([r["claim"] for r in numeric], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("claimed ratio")
    ax.set_xlabel("published claim")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8, **BESIDE)
    ax.set_title(f"{name}: ours vs published", fontsize=10)
    return save(fig, out / f"{name}-published.png")


def subplots(*args, **kwargs):
    """``matplotlib.pyplot.subplots`` on the headless backend."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt.subplots(*args, **kwargs)


def save(fig, path: Path, dpi: int = 120) -> Path:
    import matplotlib.pyplot as plt
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def _panel(ax, rows: list[dict], spec: dict, x_key: str, value) -> tuple[str, str]:
    """One pair's panel; returns what its title adds and the x axis title."""
    names = _names(rows)
    series = list(dict.fromkeys(names[id(r)] for r in rows))
    if "stack" in spec or "metrics" in spec:
        return _multi_bars(ax, rows, names, series, spec)
    if x_key == "system":
        return _system_bars(ax, rows, names, series, value)
    if x_key in ("draft_length", "aging_passes"):
        _lines_per_system(ax, rows, x_key, value)
    else:
        drawn: dict[tuple, str] = {}
        for name in series:
            pts = sorted((r[x_key], value(r)) for r in rows if names[id(r)] == name
                         and r.get(x_key) is not None)
            if pts:
                _line(ax, drawn, name, [(str(x), y) for x, y in pts])
    return "", X_TITLES.get(x_key, x_key)


def _line(ax, drawn: dict[tuple, str], name: str, pts: list[tuple]) -> None:
    """A line through ``pts``; one that coincides with a line of ``drawn`` (the same points) is
    dashed over it and named as equal to it, so that neither hides the other."""
    same = drawn.setdefault(tuple((x, round(y, 9)) for x, y in pts), name)
    style = {"label": name} if same == name else {"label": f"{name} (= {same})",
                                                  "linestyle": "--", "marker": "x"}
    ax.plot([p[0] for p in pts], [p[1] for p in pts], **({"marker": "o"} | style))


def _groups(rows: list[dict]) -> list[tuple]:
    return list(dict.fromkeys((r["batch"], r.get("sequence_length")) for r in rows))


def _at(rows: list[dict], names: dict[int, str], name: str, batch, seq) -> dict | None:
    """The first row of series ``name`` at (batch, sequence length), if any."""
    return next((r for r in rows if names[id(r)] == name and r["batch"] == batch
                 and r.get("sequence_length") == seq), None)


def _system_bars(ax, rows: list[dict], names: dict[int, str], series: list[str],
                 value) -> tuple[str, str]:
    groups = _groups(rows)
    if len(groups) == 1:
        # One point: a bar per system, named on the axis; the point goes in the title.
        for j, name in enumerate(series):
            ax.bar(j, value(_at(rows, names, name, *groups[0])), 0.7, color=f"C{j % 10}")
        ax.set_xticks(range(len(series)))
        ax.set_xticklabels(series, rotation=30 if len(series) > 4 else 0,
                           ha="right" if len(series) > 4 else "center", fontsize=8)
        batch, seq = groups[0]
        return f", batch {batch}" + (f", sequence length {seq}" if seq else ""), X_TITLES["system"]
    width = 0.8 / max(1, len(series))
    for j, name in enumerate(series):
        xs, ys = [], []
        for g, group in enumerate(groups):
            if (r := _at(rows, names, name, *group)) is not None:
                xs.append(g + (j - (len(series) - 1) / 2) * width)
                ys.append(value(r))
        ax.bar(xs, ys, width, label=name)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"{b}" + (f", L={s}" if s else "") for b, s in groups])
    return "", "batch size" + (", sequence length" if any(s for _, s in groups) else "")


def _lines_per_system(ax, rows: list[dict], x_key: str, value) -> None:
    """A line per system (and batch) against ``x_key``; with one batch, a system without that
    setting is a horizontal line. A line that coincides with one drawn before (the same points)
    is named as equal to it (``_line``)."""
    systems = list(dict.fromkeys(r["system"] for r in rows))
    batches = list(dict.fromkeys(r["batch"] for r in rows))
    drawn: dict[tuple, str] = {}
    for k, system in enumerate(systems):
        for batch in batches:
            name = system if len(batches) == 1 else f"{system} b{batch}"
            pts = sorted((r[x_key], value(r)) for r in rows if r["system"] == system
                         and r["batch"] == batch and r.get(x_key) is not None)
            if pts:
                _line(ax, drawn, name, pts)
            elif len(batches) == 1:
                for r in rows:
                    if r["system"] == system:
                        ax.axhline(value(r), linestyle="--", linewidth=1, color=f"C{k}",
                                   label=system)


def _legend_beside(axes) -> None:
    """One legend for all panels (they share their series), beside the last: never over a bar
    or a line."""
    legend: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(label, handle)
    if legend:
        axes[-1].legend(legend.values(), legend.keys(), fontsize=7, **BESIDE)


X_TITLES = {"batch": "batch size", "draft_length": "draft length d",
            "aging_passes": "aging K (passes passed over before served first)",
            "sequence_length": "sequence length (tokens)", "system": "system"}
# Axis titles of the metrics records carry; others are spelt out from the key.
METRIC_TITLES = {
    "tokens_per_s": "throughput (tokens/s)", "tokens_per_joule": "energy efficiency (tokens/J)",
    "run_tokens_per_s": "throughput over the whole run (tokens/s)", "time_s": "run time (s)",
    "energy_j": "energy (J)", "acceptance_rate": "acceptance rate",
    "tokens_per_joule_dynamic": "energy efficiency, dynamic energy only (tokens/J)",
    "energy_static_j": "static energy (J)", "verification_s": "verification time (s)",
    "pim_op_fraction": "share of operations on PIM", "utilization": "utilization",
    "utilization.gpu": "GPU utilization", "utilization.pim": "PIM utilization",
    "verification_comm_share": "communication share of verification",
    "request_latency_s.p50": "median request latency (s)",
    "request_latency_s.p99": "p99 request latency (s)", "latency_breakdown": "time (s)",
    "request_latency_s.max": "longest request latency (s)",
    "request_time_per_token_s.p99": "p99 time per output token (s)",
    "request_rate_jain": "Jain's index of request token rates",
}


def metric_title(metric: str) -> str:
    return METRIC_TITLES.get(metric) or metric.replace(".", " ").replace("_", " ")


def _ylabel(spec: dict, metric: str, norm: str | None) -> str:
    if "ylabel" in spec:
        return spec["ylabel"]
    if "stack" in spec:
        return "share of the total" if spec.get("fraction") else "time (s)"
    if "metrics" in spec:
        parents = {m.rsplit(".", 1)[0] for m in spec["metrics"]}
        if len(parents) == 1 and "." in spec["metrics"][0]:
            return metric_title(parents.pop())
        return ", ".join(_labels(spec, "metrics"))
    title = metric_title(metric)
    if norm:        # a ratio has no unit
        return f"{title.split(' (')[0]} relative to {norm}"
    return title


def _labels(spec: dict, key: str) -> list[str]:
    return spec.get("labels") or [m.split(".")[-1] for m in spec[key]]


def _multi_bars(ax, rows: list[dict], names: dict[int, str], series: list[str],
                spec: dict) -> tuple[str, str]:
    """One position per (batch, sequence length) x series; stacked segments or side-by-side
    bars. Returns what the panel title adds and the x axis title: a batch or sequence length
    shared by every bar goes in the title, the others label the bars."""
    groups = _groups(rows)
    batches = {b for b, _ in groups}
    seqs = {s for _, s in groups}
    bars = []       # (x label, record)
    for batch, seq in groups:
        for name in series:
            if (r := _at(rows, names, name, batch, seq)) is not None:
                tag = " ".join(([f"b{batch}"] if len(batches) > 1 else [])
                               + ([f"L{seq}"] if len(seqs) > 1 and seq else []))
                bars.append((f"{name}\n{tag}" if tag else name, r))
    xs = range(len(bars))
    if "stack" in spec:
        metrics, labels = spec["stack"], _labels(spec, "stack")
        values = [[_value(r, m) for m in metrics] for _, r in bars]
        if spec.get("fraction"):
            values = [[v / sum(vs) if sum(vs) else 0.0 for v in vs] for vs in values]
        bottom = [0.0] * len(bars)
        for k, label in enumerate(labels):
            heights = [vs[k] for vs in values]
            ax.bar(xs, heights, 0.7, bottom=bottom, label=label)
            bottom = [b + h for b, h in zip(bottom, heights)]
    else:
        metrics, labels = spec["metrics"], _labels(spec, "metrics")
        width = 0.8 / len(metrics)
        for k, (metric, label) in enumerate(zip(metrics, labels)):
            ax.bar([x + (k - (len(metrics) - 1) / 2) * width for x in xs],
                   [_value(r, metric) for _, r in bars], width, label=label)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([label for label, _ in bars], fontsize=7)
    title = ", ".join(([f"batch {next(iter(batches))}"] if len(batches) == 1 else [])
                      + ([f"sequence length {next(iter(seqs))}"] if len(seqs) == 1 and None not in seqs
                         else []))
    x_title = "system" + (", batch (b)" if len(batches) > 1 else "") \
        + (", sequence length (L)" if len(seqs) > 1 else "")
    return (f", {title}" if title else ""), x_title
