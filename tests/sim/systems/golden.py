"""Comparison of run records with golden ones: every field equal, except the fields derived from
energy, which agree to 1e-9 relative (energy is summed in integer femtojoules; the golden
records were made when it was a float sum in picojoules, whose rounding depended on the order
the steps were booked)."""
from __future__ import annotations

import math

ENERGY_FIELDS = frozenset({"energy_j", "tokens_per_joule", "run_tokens_per_joule",
                           "energy_static_j", "tokens_per_joule_dynamic"})
ENERGY_REL = 1e-9


def mismatches(got: object, want: object, path: str = "") -> list[str]:
    """The paths at which ``got`` differs from ``want`` (nested dicts and lists of JSON values)."""
    if isinstance(want, dict) and isinstance(got, dict):
        out = [f"{path}.{k}: missing" for k in want if k not in got]
        out += [f"{path}.{k}: unexpected" for k in got if k not in want]
        for k in want.keys() & got.keys():
            out += _field(got[k], want[k], f"{path}.{k}", k)
        return out
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        return [m for i, (g, w) in enumerate(zip(got, want)) for m in mismatches(g, w, f"{path}[{i}]")]
    return [] if got == want and type(got) is type(want) else [f"{path}: {got!r} != {want!r}"]


def _field(got: object, want: object, path: str, key: str) -> list[str]:
    if key in ENERGY_FIELDS and isinstance(got, float) and isinstance(want, float):
        if math.isclose(got, want, rel_tol=ENERGY_REL, abs_tol=0.0):
            return []
        return [f"{path}: {got!r} != {want!r} (beyond {ENERGY_REL} relative)"]
    return mismatches(got, want, path)
