"""Plot specs: stacked and side-by-side bars from result records, and their config errors."""
import pytest

from common.errors import ConfigError
from report.plots import check_spec, plot

RECORDS = [
    {"system": s, "pair": "p", "batch": 64, "draft_length": None, "sequence_length": None,
     "latency_breakdown": {"prediction": pred, "verification": ver, "overlap": ov},
     "utilization": {"gpu": 0.8, "pim": 0.1}}
    for s, pred, ver, ov in (("a", 1.0, 3.0, 0.0), ("b", 0.0, 2.0, 2.0))
]


def _bars(path, spec):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.figure

    captured = {}
    original = matplotlib.figure.Figure.savefig

    def keep(fig, *a, **kw):
        captured["axes"] = fig.axes
        return original(fig, *a, **kw)

    matplotlib.figure.Figure.savefig = keep
    try:
        plot(path, {"name": "t"}, spec, RECORDS)
    finally:
        matplotlib.figure.Figure.savefig = original
    (ax,) = captured["axes"]
    return [(round(p.get_x() + p.get_width() / 2, 6), round(p.get_y(), 6), round(p.get_height(), 6))
            for p in ax.patches]


def test_stacked_fractions_sum_to_one_per_bar(tmp_path):
    spec = {"x": "system", "stack": ["latency_breakdown.prediction", "latency_breakdown.verification",
                                     "latency_breakdown.overlap"], "fraction": True}
    check_spec(spec, "t")
    bars = _bars(tmp_path / "s.png", spec)
    assert (tmp_path / "s.png").is_file()
    # Segments in stack order; system a: 1/4, 3/4, 0; system b: 0, 1/2, 1/2.
    assert bars == [(0, 0, 0.25), (1, 0, 0), (0, 0.25, 0.75), (1, 0, 0.5), (0, 1, 0), (1, 0.5, 0.5)]


def test_side_by_side_metrics(tmp_path):
    spec = {"x": "system", "metrics": ["utilization.gpu", "utilization.pim"]}
    check_spec(spec, "t")
    bars = _bars(tmp_path / "m.png", spec)
    assert [h for _, _, h in bars] == [0.8, 0.8, 0.1, 0.1]
    assert [x for x, _, _ in bars] == [-0.2, 0.8, 0.2, 1.2]


@pytest.mark.parametrize("spec, message", [
    ({"x": "batch", "stack": ["a"]}, "needs x: system"),
    ({"x": "system", "stack": []}, "non-empty list"),
    ({"x": "system", "stack": ["a"], "metric": "b"}, "one of metric, stack or metrics"),
    ({"x": "system", "metrics": ["a", "b"], "labels": ["x"]}, "list of 2 names"),
    ({"x": "system", "stack": ["a"], "normalize": "gpu-ad"}, "normalize does not apply"),
])
def test_bad_specs_name_the_plot(spec, message):
    with pytest.raises(ConfigError, match=message) as err:
        check_spec(spec, "exp.yaml: plot[1]")
    assert "exp.yaml: plot[1]" in str(err.value)
