"""Greedy speculative decoding with a real target/draft pair: the reference a captured trace is
checked against.

Each round the draft proposes up to ``d`` tokens greedily (stopping early at its own
end-of-sequence token and never past the output limit), the target scores the committed
context plus all proposals in one forward pass, and the round keeps the longest prefix of
proposals equal to the target's argmax plus the target's own next token. Both models keep a
KV cache that is cropped back to the committed tokens after every round, as a serving system
would. Under greedy decoding the output equals plain greedy decoding by the target, and the
number of accepted tokens per round is exactly what a trace's ``leading_accepted`` predicts.
"""
from __future__ import annotations

from dataclasses import dataclass

from traces.capture import _entropy, crop_cache, forward


@dataclass(frozen=True)
class Round:
    """One draft-verify round that started with ``t`` output tokens committed."""

    t: int
    drafted: list[int]          # the draft's proposals
    draft_p: list[float]        # the draft's probability of each proposal (float64)
    draft_entropy: list[float]  # the draft's entropy (nats) at each proposal
    accepted: int               # leading proposals equal to the target's tokens


def speculative_decode(target, draft, prompt_ids: list[int], d: int, max_new_tokens: int,
                       eos: list[int]) -> tuple[list[int], list[Round]]:
    """Output tokens and the rounds of greedy speculative decoding with draft length ``d``."""
    import torch
    from transformers import DynamicCache

    if d < 1 or max_new_tokens < 1:
        raise ValueError(f"draft length {d} and max_new_tokens {max_new_tokens} must be >= 1")
    eos_set = set(eos)
    P = len(prompt_ids)
    output: list[int] = []
    rounds: list[Round] = []
    t_cache, d_cache = DynamicCache(), DynamicCache()
    with torch.no_grad():
        while len(output) < max_new_tokens and not (output and output[-1] in eos_set):
            t = len(output)
            committed = prompt_ids + output
            # Draft: feed what its cache lacks, then propose greedily one token at a time.
            pending = committed[d_cache.get_seq_length():]
            drafted, draft_p, draft_entropy = [], [], []
            for _ in range(min(d, max_new_tokens - t)):
                logp = torch.log_softmax(forward(draft, torch.tensor([pending]), d_cache)[0, -1].double(), -1)
                token = int(logp.argmax())
                drafted.append(token)
                draft_p.append(float(logp[token].exp()))
                draft_entropy.append(float(_entropy(logp)))
                if token in eos_set:
                    break
                pending = [token]
            # Verify: one target pass over the uncached context and every proposal.
            fresh = committed[t_cache.get_seq_length():]
            logits = forward(target, torch.tensor([fresh + drafted]), t_cache)[0]
            choice = logits[len(fresh) - 1:].argmax(-1).tolist()   # target's token at t, t+1, ...
            accepted = 0
            while accepted < len(drafted) and drafted[accepted] == choice[accepted]:
                accepted += 1
            new = drafted[:accepted]
            # The target's own token after the accepted ones (correction or bonus), unless the
            # output is complete.
            if t + accepted < max_new_tokens and not (new and new[-1] in eos_set):
                new.append(choice[accepted])
            rounds.append(Round(t, drafted, draft_p, draft_entropy, accepted))
            output.extend(new)
            crop_cache(t_cache, P + t + accepted)
            crop_cache(d_cache, P + t + accepted)
    return output, rounds
