"""Plot layout: axis titles in words, bars named on the axis for a single point, legends beside
the panels (never over the data), and every shipped experiment's plots drawable."""
from __future__ import annotations

import copy
import random

import pytest

from report import plots


def _record(system, batch=64, value=1.0, pair="opt-66b+opt-1.3b", d=None, seq=1024):
    return {"system": system, "pair": pair, "batch": batch, "draft_length": d,
            "sequence_length": seq, "tokens_per_s": value, "tokens_per_joule": value / 10,
            "tokens_per_joule_dynamic": value / 8, "time_s": 10.0, "verification_s": 3.0,
            "pim_op_fraction": 0.5, "verification_comm_share": 0.3, "verification_comm_s": 1.0,
            "verification_allreduce_s": 0.6, "verification_transfer_s": 0.4, "verification_compute_s": 2.0,
            "latency_breakdown": {k: 1.0 for k in ("prediction", "verification", "monitoring",
                                                    "decision_making", "overlap", "idle")},
            "utilization": {"gpu": 0.5, "pim": 0.4}}


@pytest.fixture
def figures(monkeypatch):
    """Every figure saved by plots.plot, kept open for inspection."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.figure
    kept = []
    original = matplotlib.figure.Figure.savefig

    def keep(fig, *a, **k):
        fig.canvas.draw()
        fig.renderer_kept = fig.canvas.get_renderer()      # (closing the figure drops its canvas)
        kept.append(fig)
        return original(fig, *a, **k)
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep)
    return kept


def test_the_default_plot_names_its_bars_and_axes(tmp_path, figures):
    """x: system at one batch: one bar per system named on the axis, the batch in the title, a
    y title in words, no legend over the bars."""
    names = ["gpu-ad", "gpu-sd", "pim-ad", "pim-sd", "saddle"]
    records = [_record(s, value=1000 * (i + 1)) for i, s in enumerate(names)]
    spec = {"x": "system", "metric": "tokens_per_s", "normalize": "gpu-ad"}
    plots.plot(tmp_path / "d.png", {"name": "default"}, spec, records)
    (ax,) = figures[0].axes
    assert [t.get_text() for t in ax.get_xticklabels()] == names
    assert ax.get_xlabel() == "system"
    assert "batch 64" in ax.get_title()
    assert ax.get_ylabel() == "throughput relative to gpu-ad"
    assert ax.get_legend() is None
    assert [round(p.get_height(), 6) for p in ax.patches] == [1, 2, 3, 4, 5]


def test_legends_stand_beside_the_data(tmp_path, figures):
    records = [_record(s, batch=b, value=b * (i + 1)) for b in (16, 64)
               for i, s in enumerate(["gpu-ad", "saddle"])]
    records += [dict(r, pair="opt-175b+opt-6.7b") for r in records]
    plots.plot(tmp_path / "g.png", {"name": "g"}, {"x": "system", "metric": "tokens_per_s"}, records)
    axes = figures[0].axes
    assert [ax.get_legend() is not None for ax in axes] == [False, True]     # one legend
    renderer = figures[0].renderer_kept
    legend = axes[-1].get_legend().get_window_extent(renderer)
    assert legend.x0 >= axes[-1].get_window_extent(renderer).x1
    assert axes[0].get_ylabel() == "throughput (tokens/s)"
    assert axes[0].get_xlabel().startswith("batch size")


def test_axis_titles_in_words():
    assert plots._ylabel({}, "tokens_per_joule", None) == "energy efficiency (tokens/J)"
    assert plots._ylabel({}, "pim_op_fraction", None) == "share of operations on PIM"
    assert plots._ylabel({}, "some_new.metric_name", None) == "some new metric name"
    assert plots._ylabel({"ylabel": "mine"}, "tokens_per_s", None) == "mine"


SHIPPED = ["default", "fig3", "fig12", "fig14", "fig15", "fig16", "fig17", "fig18", "fig19", "stopping"]


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_plot_draws(name, tmp_path, monkeypatch, figures):
    """Made-up values on each shipped experiment's grid (no run): every plot is drawn, with
    axis titles in words and every panel holding data."""
    from sim.experiments import grid
    monkeypatch.setattr(grid, "check_workloads", lambda runs: None)   # no trace reading
    experiment, runs = grid.load_experiment(grid.resolve_path(name))
    rng = random.Random(name)
    records = []
    for p in runs:
        r = _record(p.label or p.system, p.batch, 1000 * (1 + rng.random()), p.pair,
                    8 if p.draft_length == "search" else p.draft_length, p.sequence_length)
        records.append(copy.deepcopy(r))
    paths = plots.plot_all(tmp_path, experiment, records)
    assert paths and all(p.is_file() for p in paths)
    for fig in figures:
        for ax in fig.axes:
            assert "_" not in ax.get_ylabel() and ax.get_ylabel()
            assert ax.get_xlabel() or not ax.get_xticklabels()
            finite = [y for line in ax.get_lines() for y in line.get_ydata() if y == y]
            assert ax.patches or finite, f"{name}: an empty panel {ax.get_title()!r}"


def test_coinciding_lines_are_named_as_equal(tmp_path, figures):
    records = [_record(s, batch=b, value=v) for b in (16, 64)
               for s, v in (("gpu-ad", 1.0), ("pim-ad", 2.0 * b), ("pim-ad-copy", 2.0 * b))]
    plots.plot(tmp_path / "c.png", {"name": "c"}, {"x": "batch", "metric": "tokens_per_s"}, records)
    labels = [line.get_label() for line in figures[0].axes[0].get_lines() if line.get_marker() != ""]
    assert labels == ["gpu-ad", "pim-ad", "pim-ad-copy (= pim-ad)"]
