"""``saddle tune-tau``: SADDLE's stopping threshold, chosen on the validation split; and
``saddle tune-stop``: the parameter of another stopping rule, by the same procedure.

Every tau of the candidate grid (``configs/experiments/tune-tau.yaml``) is simulated with the
full SADDLE system on the validation split of the pair's trace, at each batch size listed;
the tau with the highest geometric-mean throughput over those batch sizes wins. The file
``configs/tau/<pair>.yaml`` is rewritten with the choice, the settings and every candidate's
score, so how it was found stays next to the value. Experiments then evaluate on ``test``.
``tune-stop`` (``configs/experiments/tune-stop.yaml``: a grid per rule) does the same for the
rules of sim/systems/registry.py with a parameter, on SADDLE with the rule in place of its
threshold, and writes the rule's entry of ``configs/stopping/<pair>.yaml``; its runs go
through the experiment runner (``results/tune-stop/<pair>/``), so an interrupted tuning
resumes and ``--jobs`` spreads it.
"""
from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from pathlib import Path

import yaml

from common.config import check_keys, config_path, get, load_yaml
from common.errors import ConfigError
from common.paths import CONFIGS
from sim.experiments.grid import (
    check_batches,
    check_pair,
    check_sequence_length,
    check_system,
    check_workloads,
    resolve_path,
    resolve_sequence_length,
)
from sim.systems.registry import reads_tau
from sim.systems.run import RunParams, simulate

_LOG_LINE = re.compile(r"^tau ([0-9.]+): ([0-9.]+) tokens/s")


def read_log(path: str | Path) -> dict[float, float]:
    """Scores printed by an earlier ``saddle tune-tau`` run (its standard output), so a tuning
    that was interrupted or run with ``--dry-run`` is finished without simulating them again."""
    found = {}
    for line in Path(path).read_text().splitlines():
        m = _LOG_LINE.match(line)
        if m:
            found[float(m.group(1))] = float(m.group(2))
    return found


SETTINGS_KEYS = ("system", "tau_grid", "batches", "requests", "sequence_length")


def resolve_settings(name: str) -> Path:
    """A settings file: a name in configs/experiments/ or a path."""
    return resolve_path(name) if name.endswith((".yaml", ".yml")) or "/" in name \
        else config_path("experiments", name, where="--config")


def geomean(rates: list[float]) -> float:
    return math.exp(sum(math.log(r) for r in rates) / len(rates))


def best_of(scores: dict[float, float]) -> float:
    """The highest score; a tie goes to the smaller value."""
    return max(scores, key=lambda t: (scores[t], -t))


def tune_tau(pair: str, settings: str = "tune-tau", write: bool = True,
             from_log: str | None = None) -> float:
    path = resolve_settings(settings)
    data = load_yaml(path)
    src = str(path)
    check_keys(data, SETTINGS_KEYS, source=src)
    check_pair(pair, None, "--pair")
    grid = get(data, "tau_grid", list, source=src)
    batches = check_batches(get(data, "batches", list, source=src), src)
    system = get(data, "system", str, source=src, default="saddle")
    spec = check_system(system, src, "system")
    if not reads_tau(spec.stop):
        raise ConfigError(f"{src}: system: {system} has no stopping threshold to tune")
    requests = get(data, "requests", int, source=src, default=None, positive=True)
    check_sequence_length(data.get("sequence_length"), f"{src}: sequence_length")
    seq = resolve_sequence_length(data.get("sequence_length"), pair)
    if not grid or not all(isinstance(t, (int, float)) and not isinstance(t, bool) and 0 <= t <= 1
                           for t in grid):
        raise ConfigError(f"{src}: tau_grid: expected a non-empty list of probabilities in [0, 1]")
    check_workloads([RunParams(system=system, pair=pair, batch=batches[0], split="validation",
                               requests=requests, sequence_length=seq, source=src)])
    scores = {}
    logged = read_log(from_log) if from_log else {}
    for tau in grid:
        if float(tau) in logged:
            scores[float(tau)] = logged[float(tau)]
            print(f"tau {tau:.3f}: {scores[float(tau)]:.1f} tokens/s (from {from_log})")
            continue
        rates = []
        for batch in batches:
            m, _ = simulate(RunParams(system=system, pair=pair, batch=batch, tau=float(tau),
                                      split="validation", requests=requests, sequence_length=seq,
                                      source=src))
            rates.append(m.to_dict()["tokens_per_s"])
        scores[float(tau)] = geomean(rates)
        print(f"tau {tau:.3f}: {scores[float(tau)]:.1f} tokens/s (geomean over batches {batches})")
    best = best_of(scores)
    print(f"chosen tau for {pair}: {best}")
    if write:
        out = CONFIGS / "tau" / f"{pair}.yaml"
        record = {
            "tau": best,
            "method": (f"saddle tune-tau --pair {pair}: system {system} on the validation split, "
                       f"batches {batches}, sequence length {seq or 'natural'}, highest geometric-mean tokens/s over tau_grid "
                       f"(settings {path.name})"),
            "tuned_at": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
            "candidates_tokens_per_s": {t: round(v, 1) for t, v in scores.items()},
        }
        out.write_text(f"# Stopping threshold of SADDLE's Controller for {pair}; written by "
                       f"`saddle tune-tau`.\n" + yaml.safe_dump(record, sort_keys=False))
    return best


STOP_SETTINGS_KEYS = ("system", "grids", "batches", "requests", "sequence_length")


def tune_stop(pair: str, rule: str, settings: str = "tune-stop", write: bool = True,
              jobs: int = 1, out: Path | None = None) -> float:
    """Choose ``rule``'s parameter for ``pair`` on the validation split (module doc)."""
    from common.paths import results_dir
    from sim.experiments.runner import execute
    from sim.systems.registry import STOP_RULES
    from sim.systems.resolve import check_stop

    path = resolve_settings(settings)
    data = load_yaml(path)
    src = str(path)
    check_keys(data, STOP_SETTINGS_KEYS, source=src)
    check_pair(pair, None, "--pair")
    system = get(data, "system", str, source=src, default="saddle")
    spec = check_system(system, src, "system")
    check_stop(rule, spec, "--rule")
    if STOP_RULES[rule].param_name is None:
        raise ConfigError(f"--rule {rule}: has no parameter to tune")
    grids = get(data, "grids", dict, source=src)
    grid = get(grids, rule, list, source=src, prefix="grids")
    if not grid or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1
                           for v in grid):
        raise ConfigError(f"{src}: grids.{rule}: expected a non-empty list of numbers in [0, 1]")
    batches = check_batches(get(data, "batches", list, source=src), src)
    requests = get(data, "requests", int, source=src, default=None, positive=True)
    check_sequence_length(data.get("sequence_length"), f"{src}: sequence_length")
    seq = resolve_sequence_length(data.get("sequence_length"), pair)
    runs = [RunParams(system=system, pair=pair, batch=b, stop=rule, stop_param=float(v),
                      split="validation", requests=requests, sequence_length=seq, source=src)
            for v in grid for b in batches]
    check_workloads(runs[:1])
    out = out or results_dir() / "tune-stop" / pair
    records = execute(f"tune-stop {pair} {rule}", runs, out, jobs=jobs)
    scores = {}
    for i, v in enumerate(grid):
        rates = [r["tokens_per_s"] for r in records[i * len(batches):(i + 1) * len(batches)]]
        scores[float(v)] = geomean(rates)
        print(f"{rule} {STOP_RULES[rule].param_name} {v:.3f}: {scores[float(v)]:.1f} tokens/s "
              f"(geomean over batches {batches})")
    best = best_of(scores)
    print(f"chosen {STOP_RULES[rule].param_name} of {rule} for {pair}: {best}")
    if write:
        target = CONFIGS / "stopping" / f"{pair}.yaml"
        entries = load_yaml(target) if target.is_file() else {}
        entries[rule] = {
            "value": best,
            "method": (f"saddle tune-stop --pair {pair} --rule {rule}: system {system} with stop "
                       f"{rule} on the validation split, batches {batches}, {requests} requests, "
                       f"sequence length {seq or 'natural'}, highest geometric-mean tokens/s over "
                       f"grids.{rule} (settings {path.name})"),
            "tuned_at": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
            "candidates_tokens_per_s": {v: round(x, 1) for v, x in scores.items()},
        }
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"# Parameters of the stopping rules beyond the paper for {pair} "
                          "(sim/systems/registry.py); written by `saddle tune-stop`.\n"
                          + yaml.safe_dump({k: entries[k] for k in sorted(entries)}, sort_keys=False))
    return best
