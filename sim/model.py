"""Transformer model specs and the operators of one step.

A step processes a set of requests; request i attends over its own ``context_len`` keys with its
own ``query_tokens`` queries (1 when drafting or decoding autoregressively, d+1 when verifying d
draft tokens). ``context_len`` counts every KV entry the step's queries attend to, including the
step's own new tokens; causal masking among those few new tokens is not modelled (each query
attends to all ``context_len`` keys), which overcounts attention work by at most q/L.

Operators carry exact integer FLOPs and bytes. A multiply-add is 2 FLOPs. Bytes count what an
operator run as its own kernel reads from and writes to memory; ``Attention.streamed_bytes`` is
what a fused (flash) attention kernel moves, without the score and probability intermediates.
"""
from __future__ import annotations

import numbers
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from common.config import config_path, get
from common.errors import ConfigError, SaddleError
from sim.config import BASE, Configs, loader

CONVENTIONS = ("models/conventions", "operators")
ACTIVATIONS = {"relu": "relu", "silu": "silu_mul"}
NORMS = ("layernorm", "rmsnorm")
POSITIONAL = ("learned", "rope")


class _Op:
    """FLOPs/bytes arithmetic shared by every operator kind."""

    repeat: int

    @property
    def bytes_total(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float:
        """FLOPs per byte of memory traffic."""
        return self.flops / self.bytes_total


@dataclass(frozen=True)
class FC(_Op):
    """A matrix product: ``tokens`` activations of width ``k`` times a ``k x n`` weight."""

    name: str
    repeat: int
    tokens: int
    k: int
    n: int
    bpe: int

    @property
    def flops(self) -> int:
        return 2 * self.tokens * self.k * self.n

    @property
    def weight_bytes(self) -> int:
        return self.k * self.n * self.bpe

    @property
    def bytes_read(self) -> int:
        return self.weight_bytes + self.tokens * self.k * self.bpe

    @property
    def bytes_written(self) -> int:
        return self.tokens * self.n * self.bpe


@dataclass(frozen=True)
class Attention(_Op):
    """One phase (scores, softmax or context) of one request's attention over all its heads.

    ``context`` and ``queries`` may also be equal-length integer numpy arrays (one entry per
    request, ``request = -1``): every count then is an array, which is how steps are priced
    without building one object per request (``ModelSpec.attention_batch``)."""

    name: str  # "scores" | "softmax" | "context"
    repeat: int
    request: int
    context: int
    queries: int
    heads: int
    kv_heads: int
    head_dim: int
    bpe: int
    softmax_flops: int

    @property
    def group(self) -> int:
        """Query heads served by one KV head (grouped-query attention)."""
        return self.heads // self.kv_heads

    def _elements(self) -> tuple[int, int, int]:
        """Elements of Q (and of O), of the scores (and probabilities), of K (and of V)."""
        return (self.heads * self.queries * self.head_dim, self.heads * self.queries * self.context,
                self.kv_heads * self.context * self.head_dim)

    @property
    def flops(self) -> int:
        scores = self.heads * self.queries * self.context
        return scores * (self.softmax_flops if self.name == "softmax" else 2 * self.head_dim)

    @property
    def bytes_read(self) -> int:
        q, scores, kv = self._elements()
        return {"scores": q + kv, "softmax": scores, "context": scores + kv}[self.name] * self.bpe

    @property
    def bytes_written(self) -> int:
        q, scores, _ = self._elements()
        return (q if self.name == "context" else scores) * self.bpe

    @property
    def streamed_bytes(self) -> int:
        """Memory traffic of this phase inside a fused attention kernel (K, V, Q in, O out)."""
        q, _, kv = self._elements()
        return 0 if self.name == "softmax" else (q + kv) * self.bpe


@dataclass(frozen=True)
class Elementwise(_Op):
    """Norms, activations, rotary embedding, residual adds: ``inputs`` tensors in, one out."""

    name: str
    repeat: int
    elements: int
    inputs: int
    flops_per_element: int
    bpe: int

    @property
    def flops(self) -> int:
        return self.flops_per_element * self.elements

    @property
    def bytes_read(self) -> int:
        return self.inputs * self.elements * self.bpe

    @property
    def bytes_written(self) -> int:
        return self.elements * self.bpe


@dataclass(frozen=True)
class StepOperators:
    """The operators of one step, grouped by kind. ``repeat`` says how often each runs."""

    fc: tuple[FC, ...]
    attention: tuple[Attention, ...]
    other: tuple[Elementwise, ...]

    def __iter__(self) -> Iterator[FC | Attention | Elementwise]:
        yield from self.fc
        yield from self.attention
        yield from self.other

    @property
    def flops(self) -> int:
        return sum(op.flops * op.repeat for op in self)


def check_requests(requests: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Requests as a tuple of ``(context_len, query_tokens)`` int pairs, validated."""
    reqs = tuple(requests)
    # Fast path; anything else is re-checked one by one for an error naming the request.
    if reqs and all(type(r) is tuple and len(r) == 2 and type(r[0]) is int and type(r[1]) is int
                    and 1 <= r[1] <= r[0] for r in reqs):
        return reqs
    out = []
    for i, req in enumerate(reqs):
        try:
            context, queries = req
        except (TypeError, ValueError):
            raise SaddleError(f"request {i}: expected (context_len, query_tokens), found {req!r}") from None
        for label, v in (("context_len", context), ("query_tokens", queries)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
                raise SaddleError(f"request {i}: {label} must be a positive integer, found {v!r}")
        if queries > context:
            raise SaddleError(f"request {i}: query_tokens {queries} exceeds context_len {context} "
                              "(context_len includes the step's own tokens)")
        out.append((int(context), int(queries)))
    if not out:
        raise SaddleError("a step needs at least one request")
    return tuple(out)


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer, or one device's tensor-parallel share of it (``shard``)."""

    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    ffn_matrices: int
    activation: str
    norm: str
    positional: str
    vocab: int
    bpe: int
    flops_per_element: tuple[tuple[str, int], ...]
    shards: int = 1

    def __hash__(self) -> int:
        # Cost caches key on specs: name and share count tell them apart, cheaper than every field.
        return hash((self.name, self.shards))

    @property
    def group(self) -> int:
        return self.heads // self.kv_heads

    def fc_shapes(self) -> tuple[tuple[str, int, int, int], ...]:
        """``(name, k, n, repeat)`` of every weight matrix of one step."""
        L, h, f = self.layers, self.hidden, self.ffn
        gate = [("ffn_gate", h, f, L)] if self.ffn_matrices == 3 else []
        return (("qkv", h, (self.heads + 2 * self.kv_heads) * self.head_dim, L),
                ("out_proj", self.heads * self.head_dim, h, L), *gate,
                ("ffn_up", h, f, L), ("ffn_down", f, h, L), ("lm_head", h, self.vocab, 1))

    @property
    def weight_bytes(self) -> int:
        return sum(k * n * r for _, k, n, r in self.fc_shapes()) * self.bpe

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * self.bpe

    # Method caches (B019) hold specs alive: harmless, a spec lives as long as its Configs anyway.
    @lru_cache(maxsize=256)  # noqa: B019
    def shard(self, devices: int) -> ModelSpec:
        """One device's share under tensor parallelism over ``devices`` (Megatron-style): heads,
        FFN columns and vocabulary split; KV heads split, or replicated when there are fewer KV
        heads than devices (Llama's 8 KV heads over 8 devices: one each)."""
        if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
            raise SaddleError(f"devices must be a positive integer, found {devices!r}")
        if devices == 1:
            return self
        if self.heads % devices or (self.kv_heads % devices and devices % self.kv_heads):
            raise SaddleError(f"{self.name}: {self.heads} heads / {self.kv_heads} KV heads do not "
                              f"split over {devices} devices")
        return replace(self, heads=self.heads // devices,
                       kv_heads=max(1, self.kv_heads // devices),
                       ffn=-(-self.ffn // devices), vocab=-(-self.vocab // devices),
                       shards=self.shards * devices)

    @lru_cache(maxsize=65536)  # noqa: B019
    def attention_ops(self, context: int, queries: int, request: int = 0
                      ) -> tuple[Attention, Attention, Attention]:
        """Scores, softmax and context of one request (every layer: ``repeat = layers``)."""
        return self.attention_batch(context, queries, request)

    def attention_batch(self, contexts, queries, request: int = -1
                        ) -> tuple[Attention, Attention, Attention]:
        """``attention_ops`` of many requests at once: contexts and queries equal-length
        integer arrays (array-valued counts, ``request = -1``)."""
        common = dict(repeat=self.layers, request=request, context=contexts, queries=queries,
                      heads=self.heads, kv_heads=self.kv_heads, head_dim=self.head_dim,
                      bpe=self.bpe, softmax_flops=dict(self.flops_per_element)["softmax"])
        scores, softmax, context = (Attention(name=p, **common)
                                    for p in ("scores", "softmax", "context"))
        return scores, softmax, context

    @lru_cache(maxsize=4096)  # noqa: B019
    def dense_ops(self, tokens: int) -> tuple[tuple[FC, ...], tuple[Elementwise, ...]]:
        """FC and elementwise operators of a step over ``tokens`` tokens in total."""
        fc = tuple(FC(name, r, tokens, k, n, self.bpe) for name, k, n, r in self.fc_shapes())
        t_h, L, act = tokens * self.hidden, self.layers, ACTIVATIONS[self.activation]
        # (name, repeat, elements, input tensors, FLOPs per element of)
        other = [("attn_norm", L, t_h, 1, self.norm), ("ffn_norm", L, t_h, 1, self.norm),
                 ("activation", L, tokens * self.ffn, 2 if act == "silu_mul" else 1, act),
                 ("attn_residual", L, t_h, 2, "residual"), ("ffn_residual", L, t_h, 2, "residual")]
        if self.positional == "rope":
            rotated = tokens * (self.heads + self.kv_heads) * self.head_dim
            other.append(("rope", L, rotated, 1, "rope"))
        other.append(("final_norm", 1, t_h, 1, self.norm))
        fpe = dict(self.flops_per_element)
        return fc, tuple(Elementwise(name, r, n, i, fpe[f], self.bpe) for name, r, n, i, f in other)

    def step_operators(self, requests: Sequence[tuple[int, int]]) -> StepOperators:
        """Every operator of one step over ``requests`` = ``[(context_len, query_tokens), ...]``.

        FC and elementwise operators see all query tokens of the step at once (the LM head
        produces logits for every query token, as verification needs them)."""
        reqs = check_requests(requests)
        fc, other = self.dense_ops(sum(q for _, q in reqs))
        attention = tuple(op for i, (L, q) in enumerate(reqs) for op in self.attention_ops(L, q, i))
        return StepOperators(fc, attention, other)


def element_bytes(configs: Configs = BASE) -> int:
    """Bytes per element of weights, activations and KV cache (FP16 = 2)."""
    return _conventions(configs=configs)[0]


@loader
def _conventions(*, configs: Configs = BASE) -> tuple[int, tuple[tuple[str, int], ...]]:
    path = config_path(*CONVENTIONS)
    data = configs.yaml(path)
    bpe = get(data, "bytes_per_element", int, source=path, positive=True)
    fpe = get(data, "flops_per_element", dict, source=path)
    needed = sorted({*ACTIVATIONS.values(), *NORMS, "residual", "softmax", "rope"})
    counts = tuple((k, get(fpe, k, int, source=path, prefix="flops_per_element", positive=True))
                   for k in needed)
    return bpe, counts


def choice(data: dict, key: str, allowed: Sequence[str], path, *, prefix: str = "",
           default: str | None = None) -> str:
    """``data[key]``, which must be one of ``allowed`` (``default`` if missing and given)."""
    value = get(data, key, str, source=path, prefix=prefix, default=default or ...)
    if value not in allowed:
        where = f"{prefix}.{key}" if prefix else key
        raise ConfigError(f"{path}: {where}: expected one of {', '.join(allowed)}, found {value!r}")
    return value


@loader
def load_model(name: str, *, configs: Configs = BASE) -> ModelSpec:
    """The model ``configs/models/<name>.yaml``."""
    path = config_path("models", name)
    data = configs.yaml(path)
    ints = {k: get(data, k, int, source=path, positive=True)
            for k in ("hidden", "layers", "heads", "kv_heads", "head_dim", "ffn", "ffn_matrices", "vocab")}
    if ints["ffn_matrices"] not in (2, 3):
        raise ConfigError(f"{path}: ffn_matrices: expected 2 (up, down) or 3 (gate, up, down), "
                          f"found {ints['ffn_matrices']}")
    if ints["heads"] % ints["kv_heads"]:
        raise ConfigError(f"{path}: heads ({ints['heads']}) must be a multiple of kv_heads ({ints['kv_heads']})")
    if get(data, "name", str, source=path) != name:
        raise ConfigError(f"{path}: name: expected {name!r} (the file name), found {data['name']!r}")
    bpe, counts = _conventions(configs=configs)
    return ModelSpec(name=name, activation=choice(data, "activation", tuple(ACTIVATIONS), path),
                     norm=choice(data, "norm", NORMS, path),
                     positional=choice(data, "positional", POSITIONAL, path),
                     bpe=bpe, flops_per_element=counts, **ints)


@dataclass(frozen=True)
class ModelPair:
    name: str
    tlm: ModelSpec
    dlm: ModelSpec
    max_sequence_length: int


@loader
def load_pair(name: str, *, configs: Configs = BASE) -> ModelPair:
    """A TLM + DLM pair ``configs/models/pairs/<name>.yaml``."""
    path = config_path("models/pairs", name)
    data = configs.yaml(path)
    return ModelPair(name, load_model(get(data, "tlm", str, source=path), configs=configs),
                     load_model(get(data, "dlm", str, source=path), configs=configs),
                     get(data, "max_sequence_length", int, source=path, positive=True))
