"""How well the synthetic generator's families (traces/synth.py) fit a real trace.

Two questions, each answered with numbers:

1. Calibration. The generator assumes P(accept | p) = sigmoid(bias + slope * logit(p)). We fit
   bias and slope to every on-path position of the real trace by maximum likelihood (Newton's
   method on the logistic log-likelihood) and compare, per reliability bin, the observed
   acceptance with the fitted curve's mean over the bin's positions. The log-loss of the fit
   is set against two references: the identity curve (bias 0, slope 1: p taken at face value)
   and the binned curve (each bin's own acceptance rate: what any monotone curve could reach
   at this resolution).

2. Acceptance vs d. Fixed-d acceptance (traces.stats) depends on how mismatches cluster, which
   the generator models with a per-request difficulty and an AR(1) burst term. We search
   difficulty_sd, burst_sd and burst_corr on a grid; for each point every category's log-odds
   level is shifted until its synthetic on-path acceptance equals the real one, so only the
   shape over d is left to fit. The synthetic traces keep the real trace's exact category
   and output length of every request (repeated ``copies`` times, seeded).

3. Entropy (when the trace has it). The generator's entropy model (traces/synth.py,
   ``with_entropy``) is entropy = h2(p) + (1 - p) g with g = ln N lognormal per kind of token
   (accepted, rejected, off-path): g is solved from every token with p < ``ENTROPY_P_MAX``
   (above it 1 - p is too small to say anything about g) and fitted by the mean and standard
   deviation of ln g. Whether entropy
   says anything about acceptance that p does not: within each reliability bin of p, the
   acceptance of the positions below the bin's median entropy against those at or above it.

``python -m traces.realfit TRACE --pair PAIR [--out DIR]`` prints the report as JSON and, with
``--out``, writes it and a figure.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

from traces.format import RequestTrace
from traces.stats import FIXED_D, reliability_table

GRID = {
    "difficulty_sd": (0.0, 0.5, 1.0, 1.5, 2.0),
    "burst_sd": (0.0, 0.5, 1.0, 1.5, 2.0, 2.5),
    "burst_corr": (0.0, 0.5, 0.8, 0.9, 0.95),
}


def _logit(x):
    x = np.clip(x, 1e-12, 1 - 1e-12)
    return np.log(x) - np.log1p(-x)


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _log_loss(prob: np.ndarray, accepted: np.ndarray) -> float:
    prob = np.clip(prob, 1e-12, 1 - 1e-12)
    return float(-np.mean(np.where(accepted, np.log(prob), np.log1p(-prob))))


def fit_calibration(p: np.ndarray, accepted: np.ndarray, iterations: int = 50) -> tuple[float, float]:
    """Maximum-likelihood (bias, slope) of sigmoid(bias + slope * logit(p))."""
    x = _logit(p)
    y = accepted.astype(np.float64)
    X = np.stack([np.ones_like(x), x], axis=1)
    w = np.zeros(2)
    for _ in range(iterations):
        q = _sigmoid(X @ w)
        grad = X.T @ (y - q)
        hess = (X * (q * (1 - q))[:, None]).T @ X
        step = np.linalg.solve(hess + 1e-9 * np.eye(2), grad)
        w += step
        if np.abs(step).max() < 1e-10:
            break
    return float(w[0]), float(w[1])


def calibration_report(requests: list[RequestTrace], bins: int = 10) -> dict:
    p = np.concatenate([r.p for r in requests])
    acc = np.concatenate([r.accepted for r in requests])
    bias, slope = fit_calibration(p, acc)
    fitted = _sigmoid(bias + slope * _logit(p))
    table = reliability_table(requests, bins)
    index = np.minimum((p * bins).astype(np.int64), bins - 1)
    binned = np.zeros_like(p)
    rows = []
    for i, row in enumerate(table["bins"]):
        inside = index == i
        if not inside.any():
            continue
        binned[inside] = acc[inside].mean()
        rows.append({"low": row["low"], "high": row["high"], "positions": int(inside.sum()),
                     "mean_p": round(float(p[inside].mean()), 4),
                     "acceptance": round(float(acc[inside].mean()), 4),
                     "fitted": round(float(fitted[inside].mean()), 4)})
    gaps = [abs(r["acceptance"] - r["fitted"]) for r in rows]
    weights = [r["positions"] for r in rows]
    return {
        "bias": round(bias, 4), "slope": round(slope, 4), "positions": int(len(p)),
        "bins": rows,
        "max_bin_gap": round(max(gaps), 4),
        "mean_bin_gap": round(float(np.average(gaps, weights=weights)), 4),
        "log_loss": {"fitted": round(_log_loss(fitted, acc), 4),
                     "identity": round(_log_loss(p, acc), 4),
                     "binned": round(_log_loss(binned, acc), 4),
                     "constant": round(_log_loss(np.full_like(p, acc.mean()), acc), 4)},
    }


def fixed_d_curve(requests: list[RequestTrace]) -> dict[int, float]:
    """Pooled fixed-d acceptance sum(k) / sum(m) over all rounds, as in traces.stats."""
    curve = {}
    for d in FIXED_D:
        k = m = 0
        for r in requests:
            a, b = r.fixed_d_rounds(d)
            k += int(a.sum())
            m += int(b.sum())
        curve[d] = k / m
    return curve


def _synthetic_acceptance(categories: np.ndarray, lengths: np.ndarray, level: np.ndarray,
                          difficulty_sd: float, burst_sd: float, burst_corr: float,
                          rng: np.random.Generator) -> np.ndarray:
    """The generator's acceptance process (traces.synth._acceptance without drift) for
    given per-request log-odds levels; returns accepted (requests x longest output)."""
    n, width = len(lengths), int(lengths.max())
    difficulty = difficulty_sd * rng.standard_normal(n)
    shocks = rng.standard_normal((width, n))
    burst = np.empty((width, n))
    burst[0] = burst_sd * shocks[0]
    innovation = math.sqrt(1.0 - burst_corr ** 2) * burst_sd
    for i in range(1, width):
        burst[i] = burst_corr * burst[i - 1] + innovation * shocks[i]
    log_odds = level[categories][:, None] + difficulty[:, None] + burst.T
    return rng.random((n, width)) < _sigmoid(log_odds)


def fixed_d_matrix(accepted: np.ndarray, lengths: np.ndarray, d: int) -> float:
    """``fixed_d_curve`` for an (requests x positions) acceptance matrix, vectorised over
    requests (the grid search runs it thousands of times); same round rule as
    ``RequestTrace.fixed_d_rounds``."""
    n, width = accepted.shape
    valid = np.arange(width)[None, :] < lengths[:, None]
    run = np.zeros((n, width + 1), dtype=np.int64)   # leading accepted tokens from each position
    for t in range(width - 1, -1, -1):
        run[:, t] = np.where(accepted[:, t] & valid[:, t], run[:, t + 1] + 1, 0)
    t = np.zeros(n, dtype=np.int64)
    rows = np.arange(n)
    k_sum = m_sum = 0
    while True:
        active = t < lengths
        if not active.any():
            break
        m = np.minimum(d, lengths - t)
        k = np.minimum(run[rows, np.minimum(t, width)], m)
        k_sum += int(k[active].sum())
        m_sum += int(m[active].sum())
        t = np.where(active, t + k + 1, t)
    return k_sum / m_sum


def fit_acceptance_shape(requests: list[RequestTrace], copies: int = 8, seed: int = 0) -> dict:
    """Grid search of (difficulty_sd, burst_sd, burst_corr); per-category levels matched."""
    names = sorted({r.category for r in requests})
    cats = np.array([names.index(r.category) for r in requests] * copies)
    lengths = np.array([r.output_len for r in requests] * copies)
    target_rate = np.array([np.concatenate([r.accepted for r in requests if r.category == c]).mean()
                            for c in names])
    real = fixed_d_curve(requests)
    best = None
    for ds in GRID["difficulty_sd"]:
        for bs in GRID["burst_sd"]:
            for rho in GRID["burst_corr"]:
                if bs == 0 and rho != GRID["burst_corr"][0]:
                    continue   # without bursts the correlation means nothing
                level = _logit(target_rate)
                for _ in range(6):   # match each category's on-path acceptance
                    acc = _synthetic_acceptance(cats, lengths, level, ds, bs, rho,
                                                np.random.default_rng(seed))
                    valid = np.arange(acc.shape[1])[None, :] < lengths[:, None]
                    rate = np.array([acc[(cats == c)[:, None] & valid].mean() for c in range(len(names))])
                    level = level + _logit(target_rate) - _logit(rate)
                synth = {d: fixed_d_matrix(acc, lengths, d) for d in FIXED_D}
                err = math.sqrt(np.mean([(synth[d] - real[d]) ** 2 for d in FIXED_D]))
                if best is None or err < best["rms_error"]:
                    best = {"difficulty_sd": ds, "burst_sd": bs, "burst_corr": rho,
                            "rms_error": err, "synthetic": synth}
    return {"real": {str(d): round(v, 4) for d, v in real.items()},
            "fitted": {str(d): round(v, 4) for d, v in best["synthetic"].items()},
            "difficulty_sd": best["difficulty_sd"], "burst_sd": best["burst_sd"],
            "burst_corr": best["burst_corr"], "rms_error": round(best["rms_error"], 4),
            "grid": {k: list(v) for k, v in GRID.items()}, "copies": copies, "seed": seed}


def pair_reference(pair: str) -> dict:
    """The shipped synthetic trace of ``pair``: its calibration fit and fixed-d curve."""
    from traces.io import read_trace
    from traces.synth import default_trace, load_params

    params = load_params(pair)
    _, requests = read_trace(default_trace(pair))
    return {"pair": pair, "config_calibration": {"bias": params.calibration_bias,
                                                 "slope": params.calibration_slope},
            "fixed_d": {str(d): round(v, 4) for d, v in fixed_d_curve(requests).items()},
            "acceptance": {"difficulty_sd": params.difficulty_sd, "burst_sd": params.burst_sd,
                           "burst_corr": params.burst_corr}}


ENTROPY_P_MAX = 0.99


def _tail_fit(p: np.ndarray, e: np.ndarray) -> dict:
    """Lognormal fit of g = (e - h2(p)) / (1 - p) over the tokens with p < ENTROPY_P_MAX."""
    keep = p < ENTROPY_P_MAX
    p, e = p[keep], e[keep]
    q = 1.0 - p
    g = (e + p * np.log(p) + q * np.log(q)) / q
    log_g = np.log(g[g > 0])
    return {"tokens": int(keep.sum()), "share_positive": round(float((g > 0).mean()), 4),
            "median": round(float(np.exp(log_g.mean())), 4), "sigma": round(float(log_g.std()), 4)}


def entropy_report(requests: list[RequestTrace], bins: int = 10) -> dict:
    """Section 3 of the module doc: the tail fit per kind of token and acceptance by entropy
    within p-bins (needs ``entropy``; ``offpath_entropy`` for the off-path fit)."""
    p = np.concatenate([r.p for r in requests])
    e = np.concatenate([np.asarray(r.extra["entropy"], dtype=np.float64) for r in requests])
    acc = np.concatenate([r.accepted for r in requests])
    tails = {"accepted": _tail_fit(p[acc], e[acc]), "rejected": _tail_fit(p[~acc], e[~acc])}
    if all("offpath_entropy" in r.extra for r in requests):
        off = [r for r in requests if r.offpath]
        tails["offpath"] = _tail_fit(np.concatenate([np.concatenate(r.offpath) for r in off]),
                                     np.concatenate([np.concatenate(r.extra["offpath_entropy"]) for r in off]))
    index = np.minimum((p * bins).astype(np.int64), bins - 1)
    rows = []
    for i in range(bins):
        inside = index == i
        if inside.sum() < 2:
            continue
        low = inside & (e < np.median(e[inside]))
        high = inside & ~low
        rows.append({"low": i / bins, "high": (i + 1) / bins, "positions": int(inside.sum()),
                     "acceptance_low_entropy": round(float(acc[low].mean()), 4) if low.any() else None,
                     "acceptance_high_entropy": round(float(acc[high].mean()), 4) if high.any() else None})
    return {"tail_nats": tails, "by_p_bin": rows}


def report(path: str | Path, pair: str | None = None) -> dict:
    from traces.io import read_trace

    header, requests = read_trace(path)
    result = {"trace": str(path), "pair": header.pair, "requests": len(requests),
              "tokens": int(sum(r.output_len for r in requests)),
              "calibration": calibration_report(requests),
              "acceptance_vs_d": fit_acceptance_shape(requests)}
    if all("entropy" in r.extra for r in requests):
        result["entropy"] = entropy_report(requests)
    if pair:
        result["synthetic_reference"] = pair_reference(pair)
    return result


def plot(result: dict, out_dir: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    rows = result["calibration"]["bins"]
    mp = [r["mean_p"] for r in rows]
    a.plot([0, 1], [0, 1], color="grey", lw=0.8, ls=":", label="identity")
    a.plot(mp, [r["acceptance"] for r in rows], "o-", label="real (binned)")
    xs = np.linspace(0.005, 0.995, 200)
    cal = result["calibration"]
    a.plot(xs, _sigmoid(cal["bias"] + cal["slope"] * _logit(xs)), label=(
        f"fitted family: bias {cal['bias']:.2f}, slope {cal['slope']:.2f}"))
    a.set(xlabel="draft probability p of its token", ylabel="acceptance", title="calibration")
    a.legend(fontsize=8)
    shape = result["acceptance_vs_d"]
    ds = [int(d) for d in shape["real"]]
    b.plot(ds, list(shape["real"].values()), "o-", label="real trace")
    b.plot(ds, list(shape["fitted"].values()), "s--", label=(
        f"generator fit (difficulty {shape['difficulty_sd']}, burst {shape['burst_sd']}, "
        f"corr {shape['burst_corr']})"))
    ref = result.get("synthetic_reference")
    if ref:
        b.plot(ds, list(ref["fixed_d"].values()), "^:", label=f"shipped synthetic {ref['pair']}")
    b.set(xlabel="draft length d", ylabel="fixed-d acceptance", title="acceptance vs d", xticks=ds)
    b.legend(fontsize=7)
    fig.suptitle(result["pair"])
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "real_vs_synth.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m traces.realfit", description=__doc__.split("\n\n")[0])
    parser.add_argument("trace")
    parser.add_argument("--pair", help="also report the shipped synthetic trace of this pair")
    parser.add_argument("--out", type=Path, help="write real_vs_synth.json and .png here")
    args = parser.parse_args(argv)
    result = report(args.trace, args.pair)
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "real_vs_synth.json").write_text(text + "\n")
        plot(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
