"""Statistics of a trace: sizes per category, fixed-d acceptance, accepted tokens per round,
reliability of the DLM's probabilities; and plots of them.

Fixed-d acceptance simulates greedy speculative decoding with a fixed draft length d on each
request (``RequestTrace.fixed_d_rounds``, built on the same leading-accepted index as the
simulator's ``draft_probs``): a round at output position t drafts m = min(d, output_len - t)
tokens, k of them are accepted, the round emits k + 1 tokens (k accepted plus the target's
correction or bonus token) and the next round starts at t + k + 1. The rate is
sum(k) / sum(m) over all rounds of all requests of a category.

Every statistic is of the natural outputs (each request up to its ``natural_len``): what the
generator's parameters describe and what the acceptance shape was checked against; an
extended trace's positions past the natural end are only counted in ``extension_tokens``.
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from traces.format import CATEGORIES, RequestTrace, TraceHeader

FIXED_D = (2, 4, 8, 12)  # the draft lengths of the paper's d sweep
ROUND_D = 8              # d of the accepted-tokens-per-round statistic (the paper's figure)
PLOT_ROUNDS = 24         # rounds shown in its plot (the paper's figure shows the first 12)


def reliability_table(requests: Iterable[RequestTrace], bins: int) -> dict:
    """Acceptance rate per equal-width bin of the on-path DLM probability p (bin i holds
    i/bins <= p < (i+1)/bins; p = 1 joins the last bin), and the expected calibration error
    (position-weighted mean |acceptance - mean p| over the bins)."""
    requests = list(requests)
    p = np.concatenate([r.p for r in requests]) if requests else np.zeros(0)
    acc = np.concatenate([r.accepted for r in requests]) if requests else np.zeros(0, bool)
    index = np.minimum((p * bins).astype(np.int64), bins - 1)
    count = np.bincount(index, minlength=bins)
    sum_p = np.bincount(index, weights=p, minlength=bins)
    sum_acc = np.bincount(index, weights=acc.astype(np.float64), minlength=bins)
    rows, ece = [], 0.0
    for i in range(bins):
        row = {"low": i / bins, "high": (i + 1) / bins, "positions": int(count[i]),
               "mean_p": None, "acceptance": None}
        if count[i]:
            row["mean_p"] = _r(sum_p[i] / count[i])
            row["acceptance"] = _r(sum_acc[i] / count[i])
            ece += count[i] / len(p) * abs(sum_acc[i] / count[i] - sum_p[i] / count[i])
        rows.append(row)
    return {"bins": rows, "ece": _r(ece)}


def trace_stats(header: TraceHeader, requests: list[RequestTrace], bins: int = 10) -> dict:
    """Everything ``saddle trace stats`` reports, as a JSON-ready dict."""
    extension = int(sum(r.output_len - r.natural_output_len for r in requests))
    requests = [r.truncated(r.natural_output_len) for r in requests]
    present = [c for c in CATEGORIES if any(r.category == c for r in requests)]
    by_cat = {c: [r for r in requests if r.category == c] for c in present}
    categories = {}
    for c, rs in by_cat.items():
        out = np.array([r.output_len for r in rs])
        prompt = np.array([r.prompt_len for r in rs])
        categories[c] = {"requests": len(rs), "tokens": int(out.sum()),
                         "prompt_tokens": int(prompt.sum()),
                         "mean_output_len": _r(out.mean()), "mean_prompt_len": _r(prompt.mean()),
                         "onpath_acceptance": _r(np.mean(np.concatenate([r.accepted for r in rs])))}
    rates: dict[str, dict[str, float]] = {}
    totals = {d: [0, 0] for d in FIXED_D}
    per_round: dict[str, dict] = {}
    pooled: list[np.ndarray] = []
    for c, rs in by_cat.items():
        rates[c] = {}
        for d in FIXED_D:
            runs = [r.fixed_d_rounds(d) for r in rs]
            k = sum(int(a.sum()) for a, _ in runs)
            m = sum(int(b.sum()) for _, b in runs)
            totals[d][0] += k
            totals[d][1] += m
            rates[c][str(d)] = _r(k / m)
            if d == ROUND_D:
                ks = [a for a, _ in runs]
                pooled += ks
                per_round[c] = _by_round(ks)
    return {
        "pair": header.pair, "target": header.target, "draft": header.draft,
        "dataset": header.dataset, "splits": header.splits,
        "requests": len(requests), "tokens": int(sum(r.output_len for r in requests)),
        "prompt_tokens": int(sum(r.prompt_len for r in requests)),
        "extension_tokens": extension,
        "onpath_acceptance": _r(np.mean(np.concatenate([r.accepted for r in requests]))),
        "categories": categories,
        "fixed_d_acceptance": rates,
        "fixed_d_acceptance_all": {str(d): _r(k / m) if m else None for d, (k, m) in totals.items()},
        "accepted_per_round": {"d": ROUND_D, "by_category": per_round, "all": _by_round(pooled)},
        "reliability": reliability_table(requests, bins),
    }


def _by_round(ks: list[np.ndarray]) -> dict:
    """Mean accepted tokens at round index 1, 2, ... and how many requests reach each round."""
    rounds = max((len(k) for k in ks), default=0)
    total = np.zeros(rounds)
    reach = np.zeros(rounds, dtype=np.int64)
    for k in ks:
        total[:len(k)] += k
        reach[:len(k)] += 1
    return {"mean": [_r(x) for x in total / np.maximum(reach, 1)], "requests": reach.tolist()}


def _r(x: float) -> float:
    return round(float(x), 6)


def summary_text(stats: dict) -> str:
    """The human-readable form of ``trace_stats``."""
    lines = [f"pair {stats['pair']} (target {stats['target']}, draft {stats['draft']}), "
             f"dataset {stats['dataset']}: {stats['requests']} requests, "
             f"{stats['tokens']} output tokens, {stats['prompt_tokens']} prompt tokens"
             + (f" (natural outputs; {stats['extension_tokens']} more positions extend them)"
                if stats["extension_tokens"] else "")]
    head = f"{'category':24s}{'requests':>9s}{'tokens':>8s}{'out len':>9s}{'prompt':>8s}" + \
        f"{'on-path':>9s}" + "".join(f"{'d=' + str(d):>7s}" for d in FIXED_D)
    lines += ["", "on-path acceptance = positions where the draft's token is the target's / "
              "natural output positions",
              "fixed-d acceptance = accepted draft tokens / drafted tokens, drafting d at a time",
              head]
    for c, info in stats["categories"].items():
        rate = stats["fixed_d_acceptance"][c]
        lines.append(f"{c:24s}{info['requests']:9d}{info['tokens']:8d}"
                     f"{info['mean_output_len']:9.1f}{info['mean_prompt_len']:8.1f}"
                     f"{info['onpath_acceptance']:9.3f}"
                     + "".join(f"{rate[str(d)]:7.3f}" for d in FIXED_D))
    rate = stats["fixed_d_acceptance_all"]
    lines.append(f"{'all':24s}{stats['requests']:9d}{stats['tokens']:8d}{'':17s}"
                 f"{stats['onpath_acceptance']:9.3f}"
                 + "".join(f"{rate[str(d)]:7.3f}" for d in FIXED_D))
    apr = stats["accepted_per_round"]
    shown = 12
    lines += ["", f"mean accepted tokens per round, d = {apr['d']}, rounds 1..{shown}"]
    for c, row in list(apr["by_category"].items()) + [("all", apr["all"])]:
        lines.append(f"{c:24s}" + "".join(f"{x:5.2f}" for x in row["mean"][:shown]))
    rel = stats["reliability"]
    lines += ["", f"reliability (ECE {rel['ece']:.3f})", f"{'p bin':14s}{'positions':>10s}"
              f"{'mean p':>8s}{'accept':>8s}"]
    for b in rel["bins"]:
        mean_p = "-" if b["mean_p"] is None else f"{b['mean_p']:.3f}"
        accept = "-" if b["acceptance"] is None else f"{b['acceptance']:.3f}"
        lines.append(f"[{b['low']:.2f}, {b['high']:.2f}) {b['positions']:10d}{mean_p:>8s}{accept:>8s}")
    return "\n".join(lines)


def plot_stats(stats: dict, out_dir: str | Path) -> list[Path]:
    """PNG figures of ``trace_stats`` in ``out_dir``; returns their paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    pair = stats["pair"]
    colors = dict(zip(CATEGORIES, plt.get_cmap("tab10").colors))
    paths = []

    def save(fig, name):
        path = out_dir / name
        fig.tight_layout()
        fig.savefig(path, dpi=120, metadata={"Software": None})
        plt.close(fig)
        paths.append(path)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for c, rate in stats["fixed_d_acceptance"].items():
        ax.plot(FIXED_D, [rate[str(d)] for d in FIXED_D], "o-", color=colors[c], label=c)
    ax.plot(FIXED_D, [stats["fixed_d_acceptance_all"][str(d)] for d in FIXED_D], "k--",
            lw=2, label="all")
    ax.set(xlabel="draft length d (tokens)", ylabel="acceptance rate (accepted / drafted)",
           title=f"Fixed-d acceptance per category, greedy verification\n{pair}",
           xticks=FIXED_D, ylim=(0, 1))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    save(fig, "acceptance_vs_d.png")

    apr = stats["accepted_per_round"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for c, row in list(apr["by_category"].items()) + [("all", apr["all"])]:
        # The first PLOT_ROUNDS rounds, as far as a quarter of the requests (min 3) reach.
        need = max(3, row["requests"][0] // 4) if row["requests"] else 0
        n = min(PLOT_ROUNDS, sum(1 for x in row["requests"] if x >= need))
        style = {"color": "k", "ls": "--", "lw": 2} if c == "all" else {"color": colors[c]}
        ax.plot(range(1, n + 1), row["mean"][:n], marker=".", label=c, **style)
    ax.set(xlabel="speculation round index", ylabel="mean accepted draft tokens per round",
           title=f"Accepted tokens per round over a request's life, d = {apr['d']}\n{pair}",
           ylim=(0, apr["d"]), xticks=range(0, PLOT_ROUNDS + 1, 4))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    save(fig, "accepted_per_round.png")

    rel = stats["reliability"]
    bins = [b for b in rel["bins"] if b["positions"]]
    fig, (ax, hist) = plt.subplots(2, 1, figsize=(6, 6), sharex=True,
                                   gridspec_kw={"height_ratios": [3, 1]})
    ax.plot([0, 1], [0, 1], color="grey", ls=":", label="perfect calibration")
    ax.plot([b["mean_p"] for b in bins], [b["acceptance"] for b in bins], "o-", color="C0",
            label="trace")
    ax.set(ylabel="acceptance rate", xlim=(0, 1), ylim=(0, 1),
           title=f"Reliability of the DLM's probability (ECE {rel['ece']:.3f})\n{pair}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    width = 1.0 / len(rel["bins"])
    hist.bar([b["low"] for b in rel["bins"]], [b["positions"] for b in rel["bins"]],
             width=width, align="edge", color="C0", alpha=0.6, edgecolor="white")
    hist.set(xlabel="DLM probability of its greedy token, p (bin)", ylabel="positions")
    save(fig, "reliability.png")

    cats = list(stats["categories"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    y = np.arange(len(cats))
    left.barh(y, [stats["categories"][c]["requests"] for c in cats],
              color=[colors[c] for c in cats])
    left.set(yticks=y, yticklabels=cats, xlabel="requests", title="Requests per category")
    left.invert_yaxis()
    h = 0.4
    right.barh(y - h / 2, [stats["categories"][c]["mean_prompt_len"] for c in cats], h,
               label="prompt", color="C7")
    right.barh(y + h / 2, [stats["categories"][c]["mean_output_len"] for c in cats], h,
               label="output", color="C0")
    right.set(yticks=y, yticklabels=[], xlabel="mean length (tokens)", title="Mean lengths")
    right.invert_yaxis()
    right.legend(fontsize=8)
    fig.suptitle(f"{pair}: {stats['requests']} requests, {stats['tokens']} output tokens")
    save(fig, "categories.png")
    return paths
