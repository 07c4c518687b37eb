"""``saddle tune-tau``: SADDLE's stopping threshold, chosen on the validation split; and
``saddle tune-stop``: the parameter of another stopping rule, by the same procedure.

Every candidate (``tau_grid`` of ``configs/experiments/tune-tau.yaml``, ``grids.RULE`` of
``tune-stop.yaml``) is simulated with the settings' system (SADDLE; for tune-stop with the rule
in place of its threshold) on the validation split of the pair's trace, at each batch size
listed; the candidate with the highest geometric-mean throughput over those batch sizes wins.
``configs/tau/<pair>.yaml`` (the rule's entry of ``configs/stopping/<pair>.yaml``) is rewritten
with the choice, the settings and every candidate's score, so how it was found stays next to
the value. Experiments then evaluate on ``test``. tune-stop's runs go through the experiment
runner (``results/tune-stop/<pair>/``), so an interrupted tuning resumes and ``--jobs``
spreads it.
"""
from __future__ import annotations

import math
import re
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import yaml

from common.config import check_keys, get, load_yaml
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
from sim.systems.registry import STOP_RULES, reads_tau
from sim.systems.resolve import check_stop
from sim.systems.run import RunParams, simulate
from sim.systems.spec import SystemSpec

_LOG_LINE = re.compile(r"^tau ([0-9.]+): ([0-9.]+) tokens/s")
SETTINGS_KEYS = ("system", "batches", "requests", "sequence_length")


def read_log(path: str | Path) -> dict[float, float]:
    """Scores printed by an earlier ``saddle tune-tau`` run (its standard output), so a tuning
    that was interrupted or run with ``--dry-run`` is finished without simulating them again."""
    return {float(m.group(1)): float(m.group(2)) for line in Path(path).read_text().splitlines()
            if (m := _LOG_LINE.match(line))}


def geomean(rates: list[float]) -> float:
    return math.exp(sum(math.log(r) for r in rates) / len(rates))


def best_of(scores: dict[float, float]) -> float:
    """The highest score; a tie goes to the smaller value."""
    return max(scores, key=lambda t: (scores[t], -t))


def _settings(pair: str, settings: str, grid_key: str) -> tuple[Path, dict, str, SystemSpec]:
    """The settings file checked with ``--pair``: its path, contents, system and spec."""
    path = resolve_path(settings, where="--config")
    data = load_yaml(path)
    check_keys(data, SETTINGS_KEYS + (grid_key,), source=str(path))
    check_pair(pair, None, "--pair")
    system = get(data, "system", str, source=str(path), default="saddle")
    return path, data, system, check_system(system, str(path), "system")


def _runs(pair: str, path: Path, data: dict, **fields) -> tuple[list, RunParams]:
    """The settings' batches and the validation run at the first, which every candidate's runs
    copy (its workload read and checked)."""
    src = str(path)
    batches = check_batches(get(data, "batches", list, source=src), src)
    requests = get(data, "requests", int, source=src, default=None, positive=True)
    check_sequence_length(data.get("sequence_length"), f"{src}: sequence_length")
    seq = resolve_sequence_length(data.get("sequence_length"), pair)
    run = RunParams(pair=pair, batch=batches[0], split="validation", requests=requests,
                    sequence_length=seq, source=src, **fields)
    check_workloads([run])
    return batches, run


def _candidates(grid, where: str, what: str) -> list[float]:
    if not grid or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1
                           for v in grid):
        raise ConfigError(f"{where}: expected a non-empty list of {what} in [0, 1]")
    return [float(v) for v in grid]


def _record(key: str, best: float, method: str, scores: dict[float, float]) -> dict:
    return {key: best, "method": method,
            "tuned_at": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
            "candidates_tokens_per_s": {v: round(x, 1) for v, x in scores.items()}}


def tune_tau(pair: str, settings: str = "tune-tau", write: bool = True,
             from_log: str | None = None) -> float:
    path, data, system, spec = _settings(pair, settings, "tau_grid")
    grid = get(data, "tau_grid", list, source=str(path))
    if not reads_tau(spec.stop):
        raise ConfigError(f"{path}: system: {system} has no stopping threshold to tune")
    grid = _candidates(grid, f"{path}: tau_grid", "probabilities")
    batches, run = _runs(pair, path, data, system=system)
    scores = {}
    logged = read_log(from_log) if from_log else {}
    for tau in grid:
        if tau in logged:
            scores[tau] = logged[tau]
            print(f"tau {tau:.3f}: {scores[tau]:.1f} tokens/s (from {from_log})")
            continue
        rates = [simulate(replace(run, batch=b, tau=tau))[0].to_dict()["tokens_per_s"]
                 for b in batches]
        scores[tau] = geomean(rates)
        print(f"tau {tau:.3f}: {scores[tau]:.1f} tokens/s (geomean over batches {batches})")
    best = best_of(scores)
    print(f"chosen tau for {pair}: {best}")
    if write:
        record = _record("tau", best, (
            f"saddle tune-tau --pair {pair}: system {system} on the validation split, batches "
            f"{batches}, sequence length {run.sequence_length or 'natural'}, highest geometric-mean "
            f"tokens/s over tau_grid (settings {path.name})"), scores)
        (CONFIGS / "tau" / f"{pair}.yaml").write_text(
            f"# Stopping threshold of SADDLE's Controller for {pair}; written by "
            f"`saddle tune-tau`.\n" + yaml.safe_dump(record, sort_keys=False))
    return best


def tune_stop(pair: str, rule: str, settings: str = "tune-stop", write: bool = True,
              jobs: int = 1, out: Path | None = None) -> float:
    """Choose ``rule``'s parameter for ``pair`` on the validation split (module doc)."""
    from common.paths import results_dir
    from sim.experiments.runner import execute

    path, data, system, spec = _settings(pair, settings, "grids")
    check_stop(rule, spec, "--rule")
    name = STOP_RULES[rule].param_name
    if name is None:
        raise ConfigError(f"--rule {rule}: has no parameter to tune")
    grids = get(data, "grids", dict, source=str(path))
    grid = _candidates(get(grids, rule, list, source=str(path), prefix="grids"),
                       f"{path}: grids.{rule}", "numbers")
    batches, run = _runs(pair, path, data, system=system, stop=rule)
    records = execute(f"tune-stop {pair} {rule}", [
        replace(run, batch=b, stop_param=v) for v in grid for b in batches],
        out or results_dir() / "tune-stop" / pair, jobs=jobs)
    scores = {}
    for i, v in enumerate(grid):
        scores[v] = geomean([r["tokens_per_s"] for r in records[i * len(batches):(i + 1) * len(batches)]])
        print(f"{rule} {name} {v:.3f}: {scores[v]:.1f} tokens/s (geomean over batches {batches})")
    best = best_of(scores)
    print(f"chosen {name} of {rule} for {pair}: {best}")
    if write:
        target = CONFIGS / "stopping" / f"{pair}.yaml"
        entries = load_yaml(target) if target.is_file() else {}
        entries[rule] = _record("value", best, (
            f"saddle tune-stop --pair {pair} --rule {rule}: system {system} with stop {rule} on "
            f"the validation split, batches {batches}, {run.requests} requests, sequence length "
            f"{run.sequence_length or 'natural'}, highest geometric-mean tokens/s over "
            f"grids.{rule} (settings {path.name})"), scores)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"# Parameters of the stopping rules beyond the paper for {pair} "
                          "(sim/systems/registry.py); written by `saddle tune-stop`.\n"
                          + yaml.safe_dump({k: entries[k] for k in sorted(entries)}, sort_keys=False))
    return best
