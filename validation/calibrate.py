"""``saddle calibrate --pair PAIR``: fit a pair's synthetic acceptance level to the published
shape of the motivation experiment (SADDLE (HPCA 2026), fig3), the one result we may fit to.

Knob. One number, delta: every category's ``accept_start`` and ``accept_end`` in
``configs/traces/PAIR.yaml`` move by delta in log-odds (every other part of the shape stays).
Each candidate writes a variant config under ``build/calibration/`` and a trace from it
(``traces.synth``, the generator of the shipped traces, same seed and splits).

Criteria, on the 4-GPU SpecPIM system with the validation split and fig3's workload
(``configs/experiments/calibrate.yaml``): speedup s_d(b) = tokens/s of specpim-sd with fixed d
over specpim-ad at batch b. Constraints: s_8(b) > 1 for b in 8, 16, 32; s_8(b) < 1 for b in 64,
128; s_12(64) < 1; s_4(64) > s_8(64) and s_4(64) > s_12(64). Score = (violated constraints,
|ln(s_4(64) / 1.41)|), lexicographically; the lowest wins. ``--write`` stores the winner's
values in ``configs/traces/PAIR.yaml``, regenerates the shipped trace, and records every
candidate in ``configs/calibration/PAIR.yaml``.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import yaml

from common.config import check_keys, config_path, get, load_yaml
from common.errors import ConfigError
from common.paths import BUILD, CONFIGS
from sim.experiments.grid import (
    check_batches,
    check_pair,
    check_sequence_length,
    resolve_sequence_length,
)
from sim.systems.run import RunParams, simulate

SETTINGS_KEYS = ("deltas", "batches", "requests", "sequence_length", "acceptance_shape")
SHAPE_KEYS = ("category", "first_round", "rounds_10_12_max")
_ACCEPT = re.compile(r"^(\s+accept_(?:start|end):\s*)([0-9.]+)(.*)$")


def shifted_config(text: str, delta: float) -> str:
    """The trace config with every accept_start / accept_end moved by ``delta`` in log-odds."""
    out = []
    for line in text.splitlines(keepends=True):
        m = _ACCEPT.match(line.rstrip("\n"))
        if m:
            p = float(m.group(2))
            q = 1 / (1 + math.exp(-(math.log(p / (1 - p)) + delta)))
            line = f"{m.group(1)}{min(max(q, 0.001), 0.999):.3f}{m.group(3)}\n"
        out.append(line)
    return "".join(out)


def _trace_for(pair: str, config_text: str, tag: str) -> Path:
    from traces.io import write_trace
    from traces.synth import load_params, synthesize

    folder = BUILD / "calibration" / pair
    folder.mkdir(parents=True, exist_ok=True)
    cfg = folder / f"{tag}.yaml"
    cfg.write_text(config_text)
    params = load_params(pair, cfg)
    trace = folder / f"{tag}.jsonl.gz"
    write_trace(trace, *synthesize(params, params.default_splits, params.default_seed,
                                   context=params.default_context))
    return trace


def evaluate(pair: str, trace: Path, settings: dict, src: str) -> dict:
    requests = get(settings, "requests", int, source=src, default=None)
    batches = get(settings, "batches", list, source=src)
    check_sequence_length(settings.get("sequence_length"), f"{src}: sequence_length")
    seq = resolve_sequence_length(settings.get("sequence_length"), pair)

    def tps(system, batch, d=None):
        m, _ = simulate(RunParams(system=system, pair=pair, batch=batch, draft_length=d,
                                  trace=str(trace), split="validation", requests=requests,
                                  sequence_length=seq, source=src))
        return m.to_dict()["tokens_per_s"]

    ad = {b: tps("specpim-ad", b) for b in batches}
    speed = {f"s8@{b}": tps("specpim-sd", b, 8) / ad[b] for b in batches}
    return speed | {f"s{d}@64": tps("specpim-sd", 64, d) / ad[64] for d in (4, 12)}


def shape_violations(trace: Path, shape: dict) -> tuple[int, dict]:
    """Broken bounds of the published acceptance shape, and the measured values."""
    import numpy as np

    from traces.io import read_trace
    from traces.stats import trace_stats

    header, requests = read_trace(trace)
    rows = trace_stats(header, requests)["accepted_per_round"]["by_category"][shape["category"]]["mean"]
    first, late = float(rows[0]), float(np.mean(rows[10:13]))
    low, high = shape["first_round"]
    broken = int(not low <= first <= high) + int(late > shape["rounds_10_12_max"])
    return broken, {"shape_first": first, "shape_late": late}


def score(s: dict) -> tuple[int, float]:
    bad = sum(s[f"s8@{b}"] <= 1 for b in (8, 16, 32)) + sum(s[f"s8@{b}"] >= 1 for b in (64, 128))
    bad += (s["s12@64"] >= 1) + (s["s4@64"] <= s["s8@64"]) + (s["s4@64"] <= s["s12@64"])
    return int(bad), abs(math.log(s["s4@64"] / 1.41))


_LOG_LINE = re.compile(r"^delta ([+-][0-9.]+): violations \d+, (.*)$")


def read_log(path: str | Path) -> dict[float, dict]:
    """Candidates printed by an earlier ``saddle calibrate`` run (its standard output), so
    ``--write --from-log`` stores a finished evaluation without simulating it again."""
    return {float(m.group(1)): {k: float(v) for k, v in (item.split("=") for item in m.group(2).split())}
            for line in Path(path).read_text().splitlines() if (m := _LOG_LINE.match(line))}


def check_settings(path: Path, pair: str, from_log: str | None = None) -> tuple[dict, dict | None]:
    """The settings file and ``--pair`` checked completely (keys, names, values, files) before
    any candidate is made; returns the settings and the pair's acceptance shape (or None)."""
    settings = load_yaml(path)
    src = str(path)
    check_keys(settings, SETTINGS_KEYS, source=src)
    check_pair(pair, None, "--pair")
    config_path("traces", pair, where="--pair")
    deltas = get(settings, "deltas", list, source=src)
    if not deltas or not all(isinstance(d, (int, float)) and not isinstance(d, bool) for d in deltas):
        raise ConfigError(f"{src}: deltas: expected a non-empty list of numbers, found {deltas!r}")
    check_batches(get(settings, "batches", list, source=src), src)
    missing = sorted({8, 16, 32, 64, 128} - set(settings["batches"]))
    if missing:
        raise ConfigError(f"{src}: batches: the criteria read batches 8, 16, 32, 64 and 128; "
                          f"missing {missing}")
    get(settings, "requests", int, source=src, default=None, positive=True)
    check_sequence_length(settings.get("sequence_length"), f"{src}: sequence_length")
    shapes = get(settings, "acceptance_shape", dict, source=src, default={})
    for name, shape in shapes.items():
        at = f"acceptance_shape.{name}"
        check_pair(name, src, at)
        if not isinstance(shape, dict):
            raise ConfigError(f"{src}: {at}: expected a mapping, found {shape!r}")
        check_keys(shape, SHAPE_KEYS, source=src, where=at)
        if missing := [key for key in SHAPE_KEYS if key not in shape]:
            raise ConfigError(f"{src}: {at}: missing key {missing[0]!r}")
    if from_log and not Path(from_log).is_file():
        raise ConfigError(f"--from-log {from_log}: no such file")
    return settings, shapes.get(pair)


def calibrate(pair: str, write: bool, from_log: str | None = None) -> float:
    settings_path = config_path("experiments", "calibrate")
    settings, shape = check_settings(settings_path, pair, from_log)
    src = str(settings_path)
    deltas = settings["deltas"]
    base_path = config_path("traces", pair)
    base = base_path.read_text()
    results = {}
    logged = read_log(from_log) if from_log else {}
    for delta in deltas:
        trace = _trace_for(pair, shifted_config(base, float(delta)), f"delta{delta:+.2f}")
        speed = logged[float(delta)] if float(delta) in logged else evaluate(pair, trace, settings, src)
        broken, measured = shape_violations(trace, shape) if shape else (0, {})
        bad, gap = score(speed)
        results[float(delta)] = ((bad + broken, gap), speed | measured)
        shown = " ".join(f"{k}={v:.2f}" for k, v in (speed | measured).items())
        print(f"delta {delta:+.2f}: violations {bad + broken}, {shown}")
    best = min(results, key=lambda d: (results[d][0], abs(d)))
    print(f"chosen delta for {pair}: {best:+.2f}")
    if write:
        from traces.synth import write_default_trace
        base_path.write_text(shifted_config(base, best))
        write_default_trace(pair)
        record = {
            "pair": pair, "chosen_delta_logodds": best,
            "method": "saddle calibrate (validation/calibrate.py): shift of every category's "
            "accept_start/accept_end in log-odds; fig3 criteria on the validation split at fig3's "
            "sequence length",
            "settings": {k: settings[k] for k in settings},
            "candidates": {d: {"violations": r[0][0], "log_gap_s4_64": round(r[0][1], 4),
                               "speedups": {k: round(v, 4) for k, v in r[1].items()}}
                           for d, r in results.items()},
        }
        out = CONFIGS / "calibration" / f"{pair}.yaml"
        out.parent.mkdir(exist_ok=True)
        out.write_text(f"# Written by `saddle calibrate --pair {pair} --write`.\n"
                       + yaml.safe_dump(record, sort_keys=False))
    return best
