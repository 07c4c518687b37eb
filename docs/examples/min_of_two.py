"""The min-of-two stopping rule: a round ends at the earlier of SADDLE's rule (the Controller's
H < tau, or the maximum draft length) and the confidence rule (after the first token whose
probability p_t < c).

The Controller computes the first, as for ``threshold`` (this rule is a ``Threshold``, so the
Controller gets tau); the second is read from the round's draft window before it starts, as
``confidence`` does, and ends the round there (``planned``). Since H_t <= p_t, a token with
p_t < c <= tau has already made H_t < tau: the rule differs from ``threshold`` only for c > tau.
"""
from __future__ import annotations

from sim.manager.formats import quantize_prob
from sim.systems.registry import Threshold, TokenRule, register
from traces.format import RequestTrace


@register
class MinOfTwo(Threshold):
    name = "min-of-two"
    param_name = "c"          # the confidence bound, in [0, 1]; tau: as ``Threshold`` reads it

    def planned(self, trace: RequestTrace, t: int, remaining: int) -> int | None:
        """The round's length if a token of its window has p < c, else None (the Controller
        alone decides)."""
        c = quantize_prob(self.param)
        cap = min(self.max_draft_len, remaining)
        for k, p in enumerate(TokenRule.raw_probs(trace, t, cap), start=1):
            if p < c:
                return k
        return None
