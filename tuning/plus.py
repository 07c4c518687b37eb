"""``saddle tune-plus --pair PAIR``: SADDLE+'s tables chosen on the validation split:
for each stop rule the Controller reads (``threshold``: tau; ``calibrated``: 1 - h) and each
batch, the threshold with the highest tokens/s of SADDLE+ with one tau (``saddle-plus-flat-tau``,
given each candidate); then the planner's wait bound
at those tables. Writes configs/tau/plus/<pair>.yaml: per rule the tau table (entry
``tau_bucket(L)`` for L live requests: batch 8's value serves 1-8) and every candidate's
tokens/s, and ``wait_bound``. Requests: the first 4 x batch of the split (at most all 256).
"""
from __future__ import annotations

import math
from datetime import date

import yaml

from sim.manager.controller import TAU_BUCKETS, tau_bucket
from sim.model import load_pair
from sim.systems.resolve import PLUS_FILE, RunParams
from sim.systems.run import simulate

GRID = (0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 0.95)
BATCHES = (8, 16, 32, 64, 128)
WAITS = (16, 32, 64)


def _score(pair: str, batch: int, rule: str, threshold: float) -> float:
    length = load_pair(pair).max_sequence_length
    kw = {"tau": threshold} if rule == "threshold" else {"stop": rule, "stop_param": 1 - threshold}
    p = RunParams(system="saddle-plus-flat-tau", pair=pair, batch=batch, split="validation",
                  requests=min(256, 4 * batch), sequence_length=length, **kw)
    return simulate(p)[0].tokens_per_s


def tune(pair: str) -> dict:
    path = PLUS_FILE / f"{pair}.yaml"
    data = yaml.safe_load(path.read_text()) if path.is_file() else {}
    data.setdefault("wait_bound", 32)
    path.parent.mkdir(parents=True, exist_ok=True)
    for rule in ("threshold", "calibrated"):
        scores = {b: {t: round(_score(pair, b, rule, t), 1) for t in GRID} for b in BATCHES}
        best = {b: max(GRID, key=lambda t: scores[b][t]) for b in BATCHES}
        table = [best[next(b for b in BATCHES if tau_bucket(b) >= i)] for i in range(TAU_BUCKETS)]
        data[rule] = {"table": table, "best_tokens_per_s": {b: scores[b][best[b]] for b in BATCHES},
                      "candidates_tokens_per_s": scores}
        print(pair, rule, table, flush=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    waits = {}
    for w in WAITS:
        data["wait_bound"] = w
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        waits[w] = round(math.exp(sum(math.log(_score(pair, b, "threshold", data["threshold"]["table"][tau_bucket(b)]))
                                      for b in BATCHES) / len(BATCHES)), 1)
    data["wait_bound"] = max(WAITS, key=waits.__getitem__)
    data["wait_bound_candidates"] = waits
    data["method"] = (f"saddle tune-plus --pair {pair}: saddle-plus-flat-tau on the validation "
                      f"split, 4 x batch requests, batches {list(BATCHES)}, thresholds {list(GRID)}; "
                      f"wait bound by geometric-mean tokens/s over {list(WAITS)}")
    data["tuned_at"] = str(date.today())
    path.write_text("# SADDLE+'s tuned Controller tables (tuning/plus.py)\n"
                    + yaml.safe_dump(data, sort_keys=False))
    return data

