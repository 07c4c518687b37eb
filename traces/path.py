"""The DLM's per-token values along the path it drafts (``RequestTrace.draft_prob_list``'s
rule), on plain lists. Its own module so that it is compiled with sim/'s per-token path
(build_compiled.py): a simulation asks it at every round's start."""
from __future__ import annotations

# values_along_path's first four arguments for one per-token value of one request
# (RequestTrace.drafting_lists): a simulator keeps them per request.
PathLists = tuple[list[int], list[float], list[list[float]], list[int]]


def values_along_path(run: list[int], onpath_values: list[float], offpath_values: list[list[float]],
                      rank: list[int], t: int, n: int) -> tuple[list[float], int]:
    """The values at the ``min(n, len(run) - t)`` tokens drafted from output position ``t``
    (``0 <= t < len(run)``, ``n >= 1``, checked by the caller), and how many of them are
    accepted: the on-path values up to and including the first mismatch (``run[t]`` tokens
    on from ``t``), then the off-path values recorded at that mismatch (``rank`` numbers the
    mismatches), their last one repeated past their end, or with none recorded the on-path
    values of those positions."""
    m = n if n < len(run) - t else len(run) - t
    k = run[t] if run[t] < m else m
    onpath = k + 1 if k < m else m
    values = onpath_values[t:t + onpath]
    rest = m - onpath
    if rest:
        miss = t + k
        off = offpath_values[rank[miss]]
        take = min(rest, len(off))
        values += off[:take]
        if take < rest:
            values += ([off[-1]] * (rest - take) if off
                       else onpath_values[miss + 1 + take:t + m])
    return values, k
