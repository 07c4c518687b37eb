"""Synthetic Dolly-shaped decoding traces, calibrated per model pair (configs/traces/PAIR.yaml).

The acceptance process of one request r at output position i works in log-odds:

    l[r, i] = logit_mean[c](i) + difficulty[r] + burst[r, i]
    logit_mean[c](i) = L_end + (L_start - L_end) * exp(-i / drift_tokens)     (per category c)
    difficulty[r] ~ Normal(0, difficulty_sd)                                  (per request)
    burst[r, i] = burst_corr * burst[r, i-1] + sqrt(1 - burst_corr^2) * burst_sd * e   (AR(1))
    accepted[r, i] ~ Bernoulli(sigmoid(l[r, i]))

with L_start = logit(accept_start), L_end = logit(accept_end). The correlated AR(1) term makes
mismatches come in bursts; the drift makes accepted tokens per round change with a request's
age. The DLM's probability p of its token comes from the acceptance probability through the
calibration curve P(accept | p) = sigmoid(bias + slope * logit(p)), inverted:
logit(p) = (l - bias) / slope. So the trace's reliability diagram follows that curve; bias < 0
or slope < 1 make the DLM over-confident. After a mismatch at i, the off-path probabilities
at i+1+j are logit(p_off) = logit(p[i+1+j]) + offpath.logit_shift + offpath.noise_sd * e.

Everything runs vectorised over a padded (requests x positions) matrix; one numpy Generator
seeded from ``seed`` draws every random number in a fixed order, so a seed fixes the bytes.

Extension to a fixed context (the paper's workload: every request decodes until its context
reaches the sequence length). With ``context`` C, each request's record goes on past its
natural end n (recorded as ``natural_len``) up to C - prompt positions, with the same process:
the drift keeps its formula (by then it is at accept_end), the difficulty stays, the AR(1)
burst continues from its value at n - 1, and the off-path lists of the last natural mismatches
are completed past n. The extension draws from its own Generators, one per block of
``EXTENSION_BLOCK`` extension positions, seeded from (seed, block), and indexed by (request,
position - n): the natural part is exactly the trace without extension, and a longer context
only appends positions (the first C - prompt positions of every request are the same for
every context >= C).

Entropy (optional, ``with_entropy``; ``saddle trace synth --entropy``): the DLM's entropy at a
token of probability p is modelled as that of a distribution with mass p on the token and the
rest spread over an effective number N of other tokens:

    entropy = h2(p) + (1 - p) * g,    h2(p) = -p ln p - (1 - p) ln(1 - p),   g = ln N
    g ~ LogNormal(ln(median), sigma), at least ln((1-p)/p)   (p stays the largest probability)

with (median, sigma) by what becomes of the token (configs/trace_entropy.yaml): ``accepted`` and
``rejected`` on-path tokens, ``offpath`` tokens (after a mismatch, where acceptance is
undefined). So, given p, a token drawn as accepted tends to have a lower entropy: the entropy
carries information about acceptance beyond p, as in the real SmolLM2 capture, where within
every tenth of p the tokens below the median entropy are accepted about twice as often
(traces/CAPTURE.md); the three pairs share the parameters fitted there (``python -m
traces.realfit``), an assumption: it is the only real trace. g is drawn per token from its own
Generator (seeded from (seed, ``_ENTROPY_TAG``)), so every other field is the trace without
entropy.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from common.config import config_path, get, load_yaml
from common.errors import ConfigError
from common.paths import BUILD, CONFIGS, TRACE_DATA, write_whole
from traces.format import CATEGORIES, RequestTrace, TraceHeader, split_flat
from traces.io import write_trace

GENERATOR = "saddle.traces.synth"
EXTENSION_BLOCK = 256     # extension positions per seeded Generator (see the module doc)
_EXTENSION_TAG = 0x5AD1E  # mixed into the extension's seeds, apart from the main Generator
_ENTROPY_TAG = 0xE7120    # the entropy's Generator (module doc)
ENTROPY_KINDS = ("accepted", "rejected", "offpath")   # the entropy model's token kinds


@dataclass(frozen=True)
class Lengths:
    """Lognormal token counts: median exp(mu), log-space standard deviation sigma, floor min."""

    median: float
    sigma: float
    min: int


@dataclass(frozen=True)
class CategoryParams:
    prompt: Lengths
    output: Lengths
    accept_start: float
    accept_end: float
    drift_tokens: float


@dataclass(frozen=True)
class SynthParams:
    """Everything the generator needs; built from configs/traces/PAIR.yaml by ``load_params``."""

    pair: str
    target: str
    draft: str
    dataset: str
    max_seq_len: int
    offpath_len: int
    decimals: int
    category_mix: dict[str, float]
    categories: dict[str, CategoryParams]
    difficulty_sd: float
    burst_sd: float
    burst_corr: float
    calibration_bias: float
    calibration_slope: float
    offpath_logit_shift: float
    offpath_noise_sd: float
    default_seed: int
    default_splits: dict[str, int]
    default_context: int | None          # the shipped trace's extension (None: natural only)
    source: dict = field(default_factory=dict, compare=False)  # the YAML, for provenance
    config: str = field(default="", compare=False)             # its path, for provenance


def pair_names() -> list[str]:
    return sorted(p.stem for p in (CONFIGS / "traces").glob("*.yaml"))


def load_params(pair: str, path: str | Path | None = None) -> SynthParams:
    """Parse and check configs/traces/PAIR.yaml, or the file ``path`` (a variant being tuned);
    errors name the file and the key path."""
    path = Path(path) if path is not None else config_path("traces", pair)
    data = load_yaml(path)
    src = path.relative_to(CONFIGS.parent) if path.is_relative_to(CONFIGS.parent) else path

    def sub(parent: dict, key: str, prefix: str = "") -> dict:
        return get(parent, key, dict, source=src, prefix=prefix)

    def prob(parent: dict, key: str, prefix: str) -> float:
        value = get(parent, key, float, source=src, prefix=prefix)
        if not 0.0 < value < 1.0:
            raise ConfigError(f"{src}: {prefix}.{key}: expected a probability in (0, 1), found {value!r}")
        return value

    def lengths(parent: dict, key: str, prefix: str) -> Lengths:
        d = sub(parent, key, prefix)
        where = f"{prefix}.{key}"
        minimum = get(d, "min", int, source=src, prefix=where, positive=True)
        return Lengths(get(d, "median", float, source=src, prefix=where, positive=True),
                       get(d, "sigma", float, source=src, prefix=where, positive=True), minimum)

    mix = sub(data, "category_mix")
    unknown = sorted(set(mix) - set(CATEGORIES))
    if unknown:
        raise ConfigError(f"{src}: category_mix: unknown categories {unknown}; known: {list(CATEGORIES)}")
    weights = {c: get(mix, c, float, source=src, prefix="category_mix", positive=True)
               for c in CATEGORIES if c in mix}
    cats_cfg = sub(data, "categories")
    categories = {}
    for c in weights:
        d = get(cats_cfg, c, dict, source=src, prefix="categories")
        where = f"categories.{c}"
        categories[c] = CategoryParams(
            prompt=lengths(d, "prompt_tokens", where), output=lengths(d, "output_tokens", where),
            accept_start=prob(d, "accept_start", where), accept_end=prob(d, "accept_end", where),
            drift_tokens=get(d, "drift_tokens", float, source=src, prefix=where, positive=True))
    acc = sub(data, "acceptance")
    cal = sub(data, "calibration")
    off = sub(data, "offpath")
    defaults = sub(data, "defaults")
    splits = get(defaults, "splits", dict, source=src, prefix="defaults")
    for name in splits:
        get(splits, name, int, source=src, prefix="defaults.splits", positive=True)
    burst_corr = get(acc, "burst_corr", float, source=src, prefix="acceptance")
    if not 0.0 <= burst_corr < 1.0:
        raise ConfigError(f"{src}: acceptance.burst_corr: expected a number in [0, 1), found {burst_corr!r}")
    params = SynthParams(
        pair=pair, target=get(data, "target", str, source=src), draft=get(data, "draft", str, source=src),
        dataset=get(data, "dataset", str, source=src),
        max_seq_len=get(data, "max_seq_len", int, source=src, positive=True),
        offpath_len=get(data, "offpath_len", int, source=src),
        decimals=get(data, "decimals", int, source=src, positive=True),
        category_mix=weights, categories=categories,
        difficulty_sd=get(acc, "difficulty_sd", float, source=src, prefix="acceptance"),
        burst_sd=get(acc, "burst_sd", float, source=src, prefix="acceptance"),
        burst_corr=burst_corr,
        calibration_bias=get(cal, "bias", float, source=src, prefix="calibration"),
        calibration_slope=get(cal, "slope", float, source=src, prefix="calibration", positive=True),
        offpath_logit_shift=get(off, "logit_shift", float, source=src, prefix="offpath"),
        offpath_noise_sd=get(off, "noise_sd", float, source=src, prefix="offpath"),
        default_seed=get(defaults, "seed", int, source=src, prefix="defaults"),
        default_splits=dict(splits),
        default_context=get(defaults, "context", int, source=src, prefix="defaults", default=None),
        source=data, config=str(src))
    for key in ("difficulty_sd", "burst_sd", "offpath_noise_sd"):
        if getattr(params, key) < 0:
            raise ConfigError(f"{src}: {key}: expected a number >= 0, found {getattr(params, key)!r}")
    if params.default_context is not None and params.default_context < params.max_seq_len:
        raise ConfigError(f"{src}: defaults.context: {params.default_context}, expected >= "
                          f"max_seq_len {params.max_seq_len} (the extension only adds positions)")
    if params.offpath_len < 0:
        raise ConfigError(f"{src}: offpath_len: expected an integer >= 0, found {params.offpath_len!r}")
    for c, cp in categories.items():
        if cp.prompt.min + cp.output.min > params.max_seq_len:
            raise ConfigError(f"{src}: categories.{c}: prompt_tokens.min + output_tokens.min = "
                              f"{cp.prompt.min + cp.output.min}, expected <= max_seq_len {params.max_seq_len}")
    return params


def category_counts(mix: dict[str, float], n: int) -> dict[str, int]:
    """``n`` split over categories in proportion to ``mix`` (largest remainder, ties in
    Dolly order), so every split has the dataset's mix as closely as integers allow."""
    names = list(mix)
    w = np.array([mix[c] for c in names], dtype=np.float64)
    exact = n * w / w.sum()
    counts = np.floor(exact).astype(np.int64)
    order = sorted(range(len(names)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[: n - int(counts.sum())]:
        counts[i] += 1
    return {c: int(k) for c, k in zip(names, counts)}


def _logit(x: np.ndarray | float):
    return np.log(x) - np.log1p(-x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def synthesize(params: SynthParams, splits: dict[str, int], seed: int,
               output_len: int | None = None,
               context: int | None = None) -> tuple[TraceHeader, list[RequestTrace]]:
    """Requests for each split (consecutive in file order, ids ``<split>-<index>``).

    ``output_len`` fixes every request's output length (benchmarks); prompts are then capped
    to ``max_seq_len - output_len``. ``context``: extend every request to ``context - prompt``
    output positions (module doc); at least ``max_seq_len``.
    """
    if context is not None and context < params.max_seq_len:
        raise ConfigError(f"context {context}: expected >= max_seq_len {params.max_seq_len} of "
                          f"{params.pair} (the extension only adds positions)")
    rng = np.random.default_rng(seed)
    names = list(params.category_mix)
    cat_blocks, ids = [], []
    for split, n in splits.items():
        counts = category_counts(params.category_mix, n)
        cat_blocks.append(rng.permutation(np.repeat(np.arange(len(names)), [counts[c] for c in names])))
        ids += [f"{split}-{i:04d}" for i in range(n)]
    cat = np.concatenate(cat_blocks) if cat_blocks else np.zeros(0, dtype=np.int64)
    prompt, out = _lengths(params, names, cat, rng, output_len)
    logit_p, accepted, burst, difficulty = _acceptance(params, names, cat, out, rng)
    burst_end = burst[np.maximum(out - 1, 0), np.arange(len(cat))]   # AR(1) state at each end
    off_values, off_len = _offpath(params, logit_p, accepted, out, rng)
    recorded = np.arange(params.offpath_len)[None, :] < off_len[:, None]
    offpath = split_flat(off_values[recorded], off_len)
    p = _round_prob(_sigmoid(logit_p), params.decimals)
    requests, first_miss = [], 0
    for r in range(len(cat)):
        n_out = int(out[r])
        acc_row = accepted[r, :n_out]
        n_miss = n_out - int(np.count_nonzero(acc_row))
        requests.append(RequestTrace(ids[r], names[cat[r]], int(prompt[r]), p[r, :n_out],
                                     acc_row, offpath[first_miss:first_miss + n_miss]))
        first_miss += n_miss
    provenance = {"generator": GENERATOR, "config": params.config, "seed": seed,
                  "output_len": output_len, "parameters": params.source}
    if context is not None:
        requests = _extend(params, names, cat, requests, logit_p, difficulty, burst_end, seed,
                           context)
        provenance["context"] = context
    header = TraceHeader(
        pair=params.pair, target=params.target, draft=params.draft, dataset=params.dataset,
        max_seq_len=params.max_seq_len if context is None else context,
        offpath_len=params.offpath_len, provenance=provenance, splits=dict(splits))
    return header, requests


def _per_request(values: list, cat: np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=np.float64)[cat]


def _lengths(params: SynthParams, names: list[str], cat: np.ndarray, rng: np.random.Generator,
             output_len: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Prompt and output lengths; prompt + output never exceeds max_seq_len."""
    cps = [params.categories[c] for c in names]

    def draw(which: str, high: np.ndarray | int) -> np.ndarray:
        dist = [getattr(cp, which) for cp in cps]
        mu = _per_request([math.log(d.median) for d in dist], cat)
        sigma = _per_request([d.sigma for d in dist], cat)
        low = _per_request([d.min for d in dist], cat)
        raw = np.rint(np.exp(mu + sigma * rng.standard_normal(len(cat))))
        return np.clip(raw, np.minimum(low, high), high).astype(np.int64)

    if output_len is not None:
        if not 1 <= output_len < params.max_seq_len:
            raise ConfigError(f"output_len {output_len}: expected 1 <= output_len < max_seq_len "
                              f"{params.max_seq_len} of {params.pair}")
        return draw("prompt", params.max_seq_len - output_len), np.full(len(cat), output_len)
    out_min = _per_request([cp.output.min for cp in cps], cat)
    prompt = draw("prompt", params.max_seq_len - out_min)
    return prompt, draw("output", params.max_seq_len - prompt)


def _acceptance(params: SynthParams, names: list[str], cat: np.ndarray, out: np.ndarray,
                rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """logit(p) and accepted, both (requests x longest output), and the AR(1) burst term
    (positions x requests) and difficulty (requests); entries past a request's output length are padding."""
    n, width = len(cat), int(out.max(initial=1))
    cps = [params.categories[c] for c in names]
    start = _per_request([_logit(cp.accept_start) for cp in cps], cat)
    end = _per_request([_logit(cp.accept_end) for cp in cps], cat)
    drift = _per_request([cp.drift_tokens for cp in cps], cat)
    pos = np.arange(width, dtype=np.float64)
    mean = end[:, None] + (start - end)[:, None] * np.exp(-pos[None, :] / drift[:, None])
    difficulty = params.difficulty_sd * rng.standard_normal(n)
    # AR(1) over positions, stepped column by column (position-major for contiguous rows).
    shocks = rng.standard_normal((width, n))
    burst = np.empty((width, n))
    burst[0] = params.burst_sd * shocks[0]
    rho = params.burst_corr
    innovation = math.sqrt(1.0 - rho * rho) * params.burst_sd
    for i in range(1, width):
        burst[i] = rho * burst[i - 1] + innovation * shocks[i]
    log_odds = mean + difficulty[:, None] + burst.T
    accepted = rng.random((n, width)) < _sigmoid(log_odds)
    logit_p = (log_odds - params.calibration_bias) / params.calibration_slope
    return logit_p, accepted, burst, difficulty


def _logit_mean(cp: CategoryParams, pos: np.ndarray) -> np.ndarray:
    start, end = _logit(cp.accept_start), _logit(cp.accept_end)
    return end + (start - end) * np.exp(-pos / cp.drift_tokens)


def _extend(params: SynthParams, names: list[str], cat: np.ndarray, requests: list[RequestTrace],
            logit_p: np.ndarray, difficulty: np.ndarray, burst_end: np.ndarray, seed: int,
            context: int) -> list[RequestTrace]:
    """Each request continued to ``context - prompt`` positions (module doc)."""
    n = len(requests)
    natural = np.array([r.output_len for r in requests], dtype=np.int64)
    total = np.array([context - r.prompt_len for r in requests], dtype=np.int64)
    width = int((total - natural).max(initial=0))
    if width == 0:
        return requests
    m, rho = params.offpath_len, params.burst_corr
    innovation = math.sqrt(1.0 - rho * rho) * params.burst_sd
    # Burst and acceptance for every extension position first; the off-path noise is drawn
    # with them, block by block, and only the rows of mismatches are kept (memory stays one
    # block's worth at any context).
    burst = np.empty((width, n))
    accepted = np.empty((n, width), dtype=bool)
    log_odds = np.empty((n, width))
    pos = natural[:, None] + np.arange(width)[None, :]
    mean = np.empty((n, width))
    for r in range(n):
        mean[r] = _logit_mean(params.categories[names[cat[r]]], pos[r].astype(np.float64))
    state = burst_end
    noise_rows: dict[tuple[int, int], np.ndarray] = {}
    for b in range(-(-width // EXTENSION_BLOCK)):
        g = np.random.default_rng([seed, _EXTENSION_TAG, b])
        shocks = g.standard_normal((EXTENSION_BLOCK, n))
        uniforms = g.random((n, EXTENSION_BLOCK))
        noise = g.standard_normal((n, EXTENSION_BLOCK, m))
        lo, hi = b * EXTENSION_BLOCK, min(width, (b + 1) * EXTENSION_BLOCK)
        for j in range(lo, hi):
            state = rho * state + innovation * shocks[j - lo]
            burst[j] = state
        log_odds[:, lo:hi] = mean[:, lo:hi] + difficulty[:, None] + burst[lo:hi].T
        accepted[:, lo:hi] = uniforms[:, :hi - lo] < _sigmoid(log_odds[:, lo:hi])
        rows, cols = np.nonzero(~accepted[:, lo:hi] & (pos[:, lo:hi] < total[:, None]))
        for r, c in zip(rows.tolist(), cols.tolist()):
            noise_rows[r, lo + c] = noise[r, c]
    # The natural part's last off-path lists, completed past n, use the noise of a Generator of
    # their own (never more than offpath_len mismatches per request need it).
    tail_noise = np.random.default_rng([seed, _EXTENSION_TAG, -1 & 0xFFFFFFFF]).standard_normal((n, m, m))
    out = []
    for r, req in enumerate(requests):
        n0, e = int(natural[r]), int(total[r] - natural[r])
        if e <= 0:
            out.append(req)
            continue
        acc = accepted[r, :e]
        lp = np.concatenate([logit_p[r, :n0],
                             (log_odds[r, :e] - params.calibration_bias) / params.calibration_slope])
        offpath = []
        miss_nat = np.flatnonzero(~req.accepted)
        for k, i in enumerate(miss_nat.tolist()):
            have = req.offpath[k]
            want = min(m, n0 + e - 1 - i)
            if len(have) >= want:
                offpath.append(have)
                continue
            j = np.arange(len(have), want)
            slot = m - (n0 - i)        # 0..m-1: the i-th from the end among the last m positions
            vals = lp[i + 1 + j] + params.offpath_logit_shift + params.offpath_noise_sd * tail_noise[r, slot, j]
            offpath.append(np.concatenate([have, _round_prob(_sigmoid(vals), params.decimals)]))
        for c in np.flatnonzero(~acc).tolist():
            i = n0 + c
            j = np.arange(min(m, n0 + e - 1 - i))
            vals = lp[i + 1 + j] + params.offpath_logit_shift + params.offpath_noise_sd * noise_rows[r, c][j]
            offpath.append(_round_prob(_sigmoid(vals), params.decimals))
        p = np.concatenate([req.p, _round_prob(_sigmoid(lp[n0:]), params.decimals)])
        out.append(RequestTrace(req.id, req.category, req.prompt_len, p,
                                np.concatenate([req.accepted, acc]), offpath, natural_len=n0))
    return out


def _offpath(params: SynthParams, logit_p: np.ndarray, accepted: np.ndarray, out: np.ndarray,
             rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Off-path probabilities (mismatches x offpath_len) in request-then-position order, and
    how many of each row are recorded (never past the request's last output position)."""
    m = params.offpath_len
    width = accepted.shape[1]
    valid = np.arange(width)[None, :] < out[:, None]
    rows, cols = np.nonzero(~accepted & valid)
    lengths = np.minimum(m, out[rows] - 1 - cols)
    ahead = np.minimum(cols[:, None] + 1 + np.arange(m)[None, :], out[rows][:, None] - 1)
    noise = rng.standard_normal((len(rows), m))
    shifted = np.take(logit_p, rows[:, None] * width + ahead)   # flat indices: a fast gather
    shifted += params.offpath_logit_shift + params.offpath_noise_sd * noise
    return _round_prob(_sigmoid(shifted), params.decimals), lengths


def with_entropy(params: SynthParams, header: TraceHeader, requests: list[RequestTrace],
                 seed: int, entropy_config: str | Path | None = None
                 ) -> tuple[TraceHeader, list[RequestTrace]]:
    """The trace with ``entropy`` and ``offpath_entropy`` drawn by the model of the module doc,
    with the parameters of ``entropy_config`` (default configs/trace_entropy.yaml)."""
    entropy_config = Path(entropy_config) if entropy_config else CONFIGS / "trace_entropy.yaml"
    src = str(entropy_config)
    block = load_yaml(entropy_config)
    tails = {}
    for kind in ENTROPY_KINDS:
        at = f"tail_nats.{kind}"
        tail = block.get("tail_nats", {}).get(kind) if isinstance(block.get("tail_nats"), dict) else None
        if not isinstance(tail, dict):
            raise ConfigError(f"{src}: {at}: missing; a trace with entropy needs its model's "
                              "parameters (median, sigma; traces/README.md)")
        median = get(tail, "median", float, source=src, prefix=at, positive=True)
        sigma = get(tail, "sigma", float, source=src, prefix=at)
        if sigma < 0:
            raise ConfigError(f"{src}: {at}.sigma: expected a number >= 0, found {sigma!r}")
        tails[kind] = (median, sigma)
    rng = np.random.default_rng([seed, _ENTROPY_TAG])

    def entropy(p: np.ndarray, kind: np.ndarray) -> np.ndarray:
        """``kind[i]``: index into ENTROPY_KINDS of token i."""
        median = np.array([tails[k][0] for k in ENTROPY_KINDS])[kind]
        sigma = np.array([tails[k][1] for k in ENTROPY_KINDS])[kind]
        q = 1.0 - p
        g = median * np.exp(sigma * rng.standard_normal(len(p)))
        with np.errstate(divide="ignore"):
            h2 = -p * np.log(p) - np.where(q > 0, q * np.log(np.where(q > 0, q, 1.0)), 0.0)
            floor = np.log(np.maximum(q / p, 1.0))
        return np.round(h2 + q * np.maximum(g, floor), params.decimals) + 0.0

    out = []
    for r in requests:
        sizes = np.fromiter(map(len, r.offpath), dtype=np.int64, count=len(r.offpath))
        off = np.concatenate(r.offpath) if r.offpath else np.zeros(0)
        onpath = entropy(r.p, np.where(r.accepted, 0, 1))
        offpath = entropy(off, np.full(len(off), 2))
        extra = dict(r.extra, entropy=onpath, offpath_entropy=split_flat(offpath, sizes))
        out.append(RequestTrace(r.id, r.category, r.prompt_len, r.p, r.accepted, r.offpath, extra,
                                r.natural_len))
    provenance = dict(header.provenance, entropy={"config": str(entropy_config), "tail_nats": {
        k: {"median": m, "sigma": sd} for k, (m, sd) in tails.items()}})
    return TraceHeader(pair=header.pair, target=header.target, draft=header.draft,
                       dataset=header.dataset, max_seq_len=header.max_seq_len,
                       offpath_len=header.offpath_len, provenance=provenance,
                       decoding=header.decoding, splits=header.splits, extra=header.extra), out


def _round_prob(p: np.ndarray, decimals: int) -> np.ndarray:
    """Rounded for compact files, and kept inside (0, 1]."""
    return np.clip(np.round(p, decimals), 10.0 ** -decimals, 1.0)


def default_trace(pair: str) -> Path:
    """The shipped synthetic trace of ``pair`` (traces/data/PAIR.synth.jsonl.gz); generated from
    the pair's config (defaults.seed, defaults.splits) and cached if it is missing."""
    path = default_trace_path(pair)
    if not path.is_file():
        write_default_trace(pair)
    return path


def write_default_trace(pair: str, path: Path | None = None) -> Path:
    """(Re)generate the shipped trace of ``pair`` (or write it to ``path``), whole or not at all."""
    params = load_params(pair)
    path = path or default_trace_path(pair)
    path.parent.mkdir(parents=True, exist_ok=True)
    made = synthesize(params, params.default_splits, params.default_seed, context=params.default_context)
    write_whole(path, lambda tmp: write_trace(tmp, *made), suffix=".tmp.gz")
    return path


def default_trace_path(pair: str) -> Path:
    return TRACE_DATA / f"{pair}.synth.jsonl.gz"


def trace_for_context(pair: str, context: int | None, entropy: bool = False) -> Path:
    """The synthetic trace of ``pair`` that reaches ``context``: the shipped one when its
    extension does (or for the natural workload, ``None``); otherwise the same generation
    (config, seed, splits) extended to ``context``, made once under build/traces/ (not
    shipped: a 8192-token extension is tens of MB). Its first positions are the shipped
    trace's (the extension is prefix-consistent, module doc). ``entropy``: the same trace with
    the modelled entropy (``with_entropy``), also made once under build/traces/ (the shipped
    traces carry none: every other field is identical, and they stay half the size)."""
    params = load_params(pair)
    shipped = context is None or context <= (params.default_context or params.max_seq_len)
    if shipped and not entropy:
        return default_trace(pair)
    extend = None if shipped else context
    if shipped and params.default_context is not None:
        extend = params.default_context
    name = "" if shipped else f".context{context}"
    path = BUILD / "traces" / f"{pair}.synth{name}{'.entropy' if entropy else ''}.jsonl.gz"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        made = synthesize(params, params.default_splits, params.default_seed, context=extend)
        if entropy:
            made = with_entropy(params, *made, params.default_seed)
        # Whole, under a name of this call's: processes making the same trace at once both finish.
        write_whole(path, lambda tmp: write_trace(tmp, *made), suffix=".tmp.gz")
    return path
