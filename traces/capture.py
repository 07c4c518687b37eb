"""`saddle trace capture`: record a real decoding trace from a Hugging Face target/draft pair.

Per request: the target generates greedily once; the draft is then
teacher-forced over prompt + output, giving at each output position its greedy token, that
token's probability and whether it equals the target's; at each mismatch the draft is rolled
out up to M steps along its own tokens (the off-path probabilities).

Numerics. Acceptance is an argmax comparison, so any difference in floating-point rounding
between two computations of the same logits can flip a near-tie. Every recorded number comes
from computations on one request alone (unpadded target and draft teacher forcing, and the
draft's rollouts of all its mismatches batched on that pass's KV cache), so a request's
record never depends on which other prompts shared its batch. Only the target's token choice comes from the batched
generation (left padding with attention mask and explicit position ids, which equals the
unbatched computation mathematically but not bit for bit); the teacher-forced target pass
re-checks every generated token and the run reports how many it would have chosen otherwise.
With ``--batch-size 1`` there is no padding at all.

torch and transformers are imported inside the functions that need them: the simulator must
run without them (they are the ``capture`` extra of the package).
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from common.errors import SaddleError
from traces.format import CATEGORIES, RequestTrace, TraceHeader

DTYPES = ("float32", "float64")

# How a Dolly record becomes the user turn of the chat template.
USER_MESSAGE_RULE = "instruction, then a blank line and the context when the context is not empty"


class CaptureError(SaddleError):
    """Bad capture input (prompt file, model, settings); the message names what and where."""


# -- prompts ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Prompt:
    id: str
    category: str
    instruction: str
    context: str

    def user_message(self) -> str:
        return f"{self.instruction}\n\n{self.context}" if self.context else self.instruction


def load_prompts(path: str | Path) -> list[Prompt]:
    """Read a Dolly-shaped JSON Lines file (instruction, context, response, category).

    A request id is the record's ``id`` field when present, else ``<file stem>-<line>``, so a
    rerun over the same file maps every prompt to the same id (what resuming relies on).
    """
    path = Path(path)
    if not path.is_file():
        raise CaptureError(f"{path}: prompt file not found")
    prompts: list[Prompt] = []
    seen: dict[str, int] = {}
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{line_no}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CaptureError(f"{where}: invalid JSON ({exc.msg}), expected one JSON object per line") from None
            if not isinstance(record, dict):
                raise CaptureError(f"{where}: found {type(record).__name__}, expected a JSON object")
            instruction = record.get("instruction")
            if not isinstance(instruction, str) or not instruction.strip():
                found = "nothing (field missing)" if "instruction" not in record else repr(instruction)[:60]
                raise CaptureError(f"{where}: instruction: found {found}, expected a non-empty string")
            context = record.get("context", "")
            if not isinstance(context, str):
                raise CaptureError(f"{where}: context: found {context!r:.60}, expected a string")
            category = record.get("category")
            if category not in CATEGORIES:
                found = "nothing (field missing)" if "category" not in record else f"unknown category {category!r:.60}"
                raise CaptureError(f"{where}: category: found {found}, expected one of {list(CATEGORIES)}")
            rid = record.get("id", f"{path.stem}-{line_no:04d}")
            if not isinstance(rid, str) or not rid:
                raise CaptureError(f"{where}: id: found {rid!r:.60}, expected a non-empty string")
            if rid in seen:
                raise CaptureError(f"{where}: id: found {rid!r}, already used on line {seen[rid]}; ids must be unique")
            seen[rid] = line_no
            prompts.append(Prompt(rid, category, instruction, context))
    if not prompts:
        raise CaptureError(f"{path}: no prompts in the file")
    return prompts


# -- models ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ModelSource:
    """Where a model comes from: a local directory, a GGUF file, or a Hugging Face Hub id."""

    spec: str            # as the user wrote it
    kind: str            # "dir" | "gguf" | "hub"
    location: str        # directory, GGUF file path, or Hub id

    @property
    def name(self) -> str:
        base = Path(self.location).name if self.kind != "hub" else self.location.split("/")[-1]
        return re.sub(r"\.gguf$", "", base).lower()


def resolve_model(spec: str, gguf: bool = False) -> ModelSource:
    """Interpret MODEL: ``pkg:PACKAGE/FILE`` (a file shipped inside an installed Python package,
    found without importing it), a local directory, a ``.gguf`` file (or any file with
    ``gguf=True``), else a Hub id."""
    if spec.startswith("pkg:"):
        package, _, rel = spec[4:].partition("/")
        found = importlib.util.find_spec(package) if package else None
        if found is None or not found.submodule_search_locations:
            raise CaptureError(f"model {spec!r}: Python package {package!r} is not installed")
        path = Path(list(found.submodule_search_locations)[0]) / rel
        if not rel or not path.is_file():
            raise CaptureError(f"model {spec!r}: no file {rel!r} in package {package!r} ({path.parent})")
    else:
        path = Path(spec).expanduser()
    if gguf or path.suffix == ".gguf":
        if not path.is_file():
            raise CaptureError(f"model {spec!r}: GGUF file {path} does not exist")
        return ModelSource(spec, "gguf", str(path.resolve()))
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise CaptureError(f"model {spec!r}: directory {path} has no config.json (not a Hugging Face model directory)")
        return ModelSource(spec, "dir", str(path.resolve()))
    if spec.startswith(("/", ".", "~")) or path.exists() or not re.fullmatch(r"[\w.-]+(/[\w.-]+)?", spec):
        raise CaptureError(f"model {spec!r}: path {path} does not exist")
    return ModelSource(spec, "hub", spec)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def model_identity(source: ModelSource, model) -> dict:
    """Provenance of a model: file hashes for local files, the commit for Hub models."""
    ident = {"spec": source.spec, "kind": source.kind}
    if source.kind == "gguf":
        ident["file"] = Path(source.location).name
        ident["sha256"] = _sha256(Path(source.location))
    elif source.kind == "dir":
        ident["files"] = {p.name: _sha256(p) for p in sorted(Path(source.location).iterdir())
                          if p.is_file()}
    else:
        ident["revision"] = getattr(model.config, "_commit_hash", None) or "unknown"
    return ident


def _from_pretrained(loader, source: ModelSource, **kwargs):
    if source.kind == "gguf":
        path = Path(source.location)
        return loader.from_pretrained(str(path.parent), gguf_file=path.name, **kwargs)
    if source.kind == "dir":
        return loader.from_pretrained(source.location, **kwargs)
    try:
        return loader.from_pretrained(source.location, local_files_only=True, **kwargs)
    except OSError:
        pass
    try:
        return loader.from_pretrained(source.location, **kwargs)
    except OSError as exc:
        raise CaptureError(
            f"model {source.spec!r}: not a local path, not in the local Hugging Face cache, and "
            f"the Hub could not provide it (without network only local files work; pass a "
            f"directory or a .gguf file): {str(exc).splitlines()[0]}") from None


def load_model(source: ModelSource, dtype: str):
    """A causal LM in evaluation mode with the given float dtype (GGUF weights are dequantized)."""
    import torch

    if dtype not in DTYPES:
        raise CaptureError(f"dtype {dtype!r}: expected one of {list(DTYPES)}")
    model = _from_pretrained(_auto_model(), source, dtype=getattr(torch, dtype))
    return model.eval()


def load_tokenizer(source: ModelSource):
    from transformers import AutoTokenizer

    tokenizer = _from_pretrained(AutoTokenizer, source)
    if not tokenizer.chat_template:
        raise CaptureError(f"model {source.spec!r}: its tokenizer has no chat template")
    return tokenizer


def _layer_prefix(model) -> str:
    """State-dict prefix of the decoder layer list (``model.layers`` for Llama-like models,
    ``model.decoder.layers`` for OPT)."""
    for name, module in model.named_modules():
        if name.endswith("layers") and type(module).__name__ == "ModuleList":
            return name + "."
    raise CaptureError(f"{type(model).__name__}: cannot find its decoder layer list for --draft-layers")


def self_speculative_draft(target, layers: int):
    """The target's embedding, first ``layers`` decoder layers, final norm and LM head, as a
    model of the target's own class. Weights are shared with the target, not copied."""
    import copy

    import torch

    total = target.config.num_hidden_layers
    if not 1 <= layers < total:
        raise CaptureError(f"--draft-layers {layers}: expected 1 <= K < {total} (the target's layers)")
    prefix = _layer_prefix(target)
    pattern = re.compile(re.escape(prefix) + r"(\d+)\.")
    state = {k: v for k, v in target.state_dict(keep_vars=True).items()
             if not ((m := pattern.match(k)) and int(m.group(1)) >= layers)}
    config = copy.deepcopy(target.config)
    config.num_hidden_layers = layers
    for key in ("layer_types",):   # per-layer lists must shrink with the layer count
        if isinstance(getattr(config, key, None), list):
            setattr(config, key, getattr(config, key)[:layers])
    with torch.device("meta"):
        draft = type(target)(config)
    draft.load_state_dict(state, strict=True, assign=True)
    # Non-persistent buffers (rotary frequencies) are not in the state dict.
    for name, buf in target.named_buffers():
        if not pattern.match(name):
            owner, _, leaf = name.rpartition(".")
            mod = draft.get_submodule(owner) if owner else draft
            mod._buffers[leaf] = buf
    for name, module in target.named_modules():
        if hasattr(module, "original_inv_freq") and not pattern.match(name + "."):
            draft.get_submodule(name).original_inv_freq = module.original_inv_freq
    return draft.eval()


def prompt_token_ids(tokenizer, prompt: Prompt) -> list[int]:
    """The prompt as the target sees it: the tokenizer's chat template with one user turn."""
    encoded = tokenizer.apply_chat_template([{"role": "user", "content": prompt.user_message()}],
                                            add_generation_prompt=True, tokenize=True)
    if hasattr(encoded, "keys"):
        encoded = encoded["input_ids"]
    return [int(t) for t in encoded]


def eos_token_ids(model, tokenizer) -> list[int]:
    ids = set()
    configured = getattr(model.generation_config, "eos_token_id", None)
    if configured is not None:
        ids.update([configured] if isinstance(configured, int) else configured)
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    if not ids:
        raise CaptureError("the model defines no end-of-sequence token")
    return sorted(ids)


# -- decoding --------------------------------------------------------------------------------

@functools.cache
def _cache_argument(model_class) -> str:
    import inspect

    return "cache" if "cache" in inspect.signature(model_class.forward).parameters else "past_key_values"


def forward(model, input_ids, cache=None, **kwargs):
    """Logits of one forward pass, extending ``cache`` if given. transformers renamed the
    cache argument (``past_key_values`` -> ``cache``); the model's signature says which."""
    if cache is not None:
        kwargs[_cache_argument(type(model))] = cache
        kwargs["use_cache"] = True
    return model(input_ids=input_ids, **kwargs).logits


def crop_cache(cache, length: int) -> None:
    """Keep the first ``length`` positions of a DynamicCache (a negative count removes tokens
    in every transformers version that has ``crop``)."""
    remove = cache.get_seq_length() - length
    if remove > 0:
        cache.crop(-remove)

def greedy_generate(model, prompts: list[list[int]], max_new_tokens: int, eos: list[int],
                    pad_id: int) -> list[list[int]]:
    """Greedy outputs of a batch of prompts (each ends after its first EOS or at the limit).

    Prompts of unequal length are left-padded, with an attention mask and position ids that
    count only real tokens; a batch without padding runs without a mask (the same computation
    as an unbatched call)."""
    import torch
    from transformers import DynamicCache

    width = max(len(p) for p in prompts)
    padded = any(len(p) != width for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, p in enumerate(prompts):
        ids[row, width - len(p):] = torch.tensor(p)
        mask[row, width - len(p):] = 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    cache = DynamicCache()
    outputs: list[list[int]] = [[] for _ in prompts]
    done = [False] * len(prompts)
    eos_set = set(eos)
    with torch.no_grad():
        kwargs = {"attention_mask": mask, "position_ids": positions} if padded else {}
        logits = forward(model, ids, cache, **kwargs)[:, -1]
        for step in range(max_new_tokens):
            nxt = logits.argmax(-1)
            for row, token in enumerate(nxt.tolist()):
                if not done[row]:
                    outputs[row].append(token)
                    done[row] = token in eos_set
            if all(done) or step == max_new_tokens - 1:
                break
            if padded:
                mask = torch.cat([mask, torch.ones((len(prompts), 1), dtype=torch.long)], dim=1)
                positions = positions[:, -1:] + 1
                kwargs = {"attention_mask": mask, "position_ids": positions}
            logits = forward(model, nxt[:, None], cache, **kwargs)[:, -1]
    return outputs


def _log_probs(logits):
    import torch

    return torch.log_softmax(logits.double(), dim=-1)


def _entropy(logp):
    """Entropy (nats) of each row's distribution. The sign goes on before the clamp (a unary
    minus binds after the method calls: written ``-x.sum().clamp(min=0)`` it clamps the negative
    sum to 0, which is how the first capture recorded 0 everywhere); ``xlogy`` gives 0 for a
    token of probability 0, where ``p * log p`` would be 0 * -inf = NaN."""
    import torch

    p = logp.exp()
    return (-torch.special.xlogy(p, p).sum(-1)).clamp(min=0.0) + 0.0   # no -0.0


def _rollouts(draft, cache, P: int, n: int, positions: list[int], tokens: list[int],
              steps: int, eos: set[int]) -> tuple[list[list[float]], list[list[float]]]:
    """Off-path probabilities and entropies for every mismatch of one request, all rolled out
    together.

    ``cache`` holds the draft's teacher-forced pass over prompt + output (P + n positions). Row
    r of the batch continues the mismatch at output position i_r from the draft's own token
    there: it sees the cached positions before P + i_r (the prompt and the target's tokens
    0..i_r-1) through the attention mask, then its own rollout tokens, at positions
    P + i_r, P + i_r + 1, ... A row stops recording at the draft's EOS and at the output's
    last position."""
    import torch

    if not positions or steps == 0:
        return [[] for _ in positions], [[] for _ in positions]
    rows = len(positions)
    start = torch.tensor(positions) + P
    cache.batch_repeat_interleave(rows)
    mask = (torch.arange(P + n)[None, :] < start[:, None]).long()
    token = torch.tensor(tokens)
    wanted = [min(steps, n - 1 - i) for i in positions]
    values: list[list[float]] = [[] for _ in positions]
    entropies: list[list[float]] = [[] for _ in positions]
    stopped = [t in eos for t in tokens]   # a draft stops at its own end-of-sequence
    for j in range(max(wanted)):
        mask = torch.cat([mask, torch.ones((rows, 1), dtype=torch.long)], dim=1)
        logp = _log_probs(forward(draft, token[:, None], cache, attention_mask=mask,
                                  position_ids=(start + j)[:, None])[:, -1])
        token = logp.argmax(-1)
        prob = logp.gather(-1, token[:, None])[:, 0].exp().tolist()
        entropy = _entropy(logp).tolist()
        for r in range(rows):
            if not stopped[r] and j < wanted[r]:
                values[r].append(prob[r])
                entropies[r].append(entropy[r])
                stopped[r] = int(token[r]) in eos
    return values, entropies


def trace_request(target, draft, prompt: Prompt, prompt_ids: list[int], output: list[int],
                  offpath_len: int, eos: list[int]) -> tuple[RequestTrace, int]:
    """One request's record, and how many of the target's generated tokens its own
    teacher-forced pass would not have chosen (0 unless batched numerics flipped a near-tie).

    Extra per-position arrays: ``target_p`` (the target's probability of its token) and
    ``entropy`` (of the draft's distribution, nats); ``offpath_entropy``: the draft's entropy
    at each off-path token."""
    import torch
    from transformers import DynamicCache

    P, n = len(prompt_ids), len(output)
    ids = torch.tensor([prompt_ids + output])
    out = torch.tensor(output)
    eos_set = set(eos)
    with torch.no_grad():
        t_logp = _log_probs(forward(target, ids)[0, P - 1:P + n - 1])
        cache = DynamicCache()
        d_logp = _log_probs(forward(draft, ids, cache)[0, P - 1:P + n - 1])
        d_token = d_logp.argmax(-1)
        accepted = (d_token == out).numpy()
        mismatches = np.flatnonzero(~accepted)
        offpath, offpath_entropy = _rollouts(draft, cache, P, n, mismatches.tolist(), d_token[mismatches].tolist(),
                            offpath_len, eos_set)
    flips = int((t_logp.argmax(-1) != out).sum())
    d_p = d_logp.gather(-1, d_token[:, None])[:, 0].exp()
    trace = RequestTrace(
        id=prompt.id, category=prompt.category, prompt_len=P,
        p=d_p.numpy(), accepted=accepted.astype(bool),
        offpath=[np.asarray(values, dtype=np.float64) for values in offpath],
        extra={"target_p": t_logp.gather(-1, out[:, None])[:, 0].exp().numpy(),
               "entropy": _entropy(d_logp).numpy(),
               "offpath_entropy": [np.asarray(v, dtype=np.float64) for v in offpath_entropy]})
    return trace, flips


# -- the capture run -------------------------------------------------------------------------

@dataclass(frozen=True)
class CaptureSettings:
    """Everything that decides a trace's content (all of it goes into the provenance)."""

    target: str
    prompts: str
    out: str
    draft: str | None = None
    draft_layers: int | None = None
    gguf: bool = False
    max_new_tokens: int = 128
    offpath: int = 4
    batch_size: int = 8
    dtype: str = "float32"
    max_seq_len: int = 1024
    dataset: str | None = None
    threads: int = 1


@dataclass
class CaptureModels:
    target: object
    draft: object
    tokenizer: object
    eos: list[int]
    identity: dict          # provenance of target, draft and tokenizer


def check_settings(s: CaptureSettings) -> None:
    if (s.draft is None) == (s.draft_layers is None):
        raise CaptureError("give exactly one of --draft MODEL or --draft-layers K")
    for name, value, low in (("--max-new-tokens", s.max_new_tokens, 1), ("--offpath", s.offpath, 0),
                             ("--batch-size", s.batch_size, 1), ("--max-seq-len", s.max_seq_len, 2),
                             ("--threads", s.threads, 1)):
        if value < low:
            raise CaptureError(f"{name} {value}: expected an integer >= {low}")
    if s.dtype not in DTYPES:
        raise CaptureError(f"--dtype {s.dtype!r}: expected one of {list(DTYPES)}")


def dequantized_copy(source: ModelSource) -> ModelSource:
    """A GGUF model as a Hugging Face directory under build/ (made on first use).

    transformers dequantizes GGUF tensors in Python, which takes about a minute for
    SmolLM2-135M; the float32 directory it produces loads in a second. The copy is keyed by the
    GGUF file's hash, holds exactly the dequantized weights and the converted tokenizer, and
    the trace's provenance still names the GGUF file and its hash."""
    if source.kind != "gguf":
        return source
    import torch

    from common.paths import BUILD

    path = Path(source.location)
    folder = BUILD / "dequantized" / f"{path.stem}-{_sha256(path)[:16]}"
    if not (folder / "config.json").is_file():
        tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
        load_tokenizer(source).save_pretrained(tmp)
        model = _from_pretrained(_auto_model(), source, dtype=torch.float32)
        # The weights are plain float32 tensors now; only the GGUF marker blocks saving.
        model.hf_quantizer = None
        del model.config.quantization_config
        model.save_pretrained(tmp)
        os.replace(tmp, folder)
    return ModelSource(source.spec, "dir", str(folder))


def _auto_model():
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM


def load_models(s: CaptureSettings) -> CaptureModels:
    """Target, draft (separate model or the target's first K layers) and the target's tokenizer."""
    target_src = resolve_model(s.target, s.gguf)
    draft_src = resolve_model(s.draft, s.gguf) if s.draft is not None else None
    tokenizer = load_tokenizer(dequantized_copy(target_src))
    target = load_model(dequantized_copy(target_src), s.dtype)
    identity = {"target": model_identity(target_src, target)}
    if draft_src is None:
        draft = self_speculative_draft(target, s.draft_layers)
        identity["draft"] = {"self_speculative": True, "layers": s.draft_layers,
                             "of_layers": target.config.num_hidden_layers,
                             "rule": "the target's embedding, first K decoder layers, final norm and LM head"}
    else:
        draft = load_model(dequantized_copy(draft_src), s.dtype)
        if draft.config.vocab_size != target.config.vocab_size:
            raise CaptureError(f"draft {s.draft!r} has a vocabulary of {draft.config.vocab_size} "
                               f"tokens, the target {target.config.vocab_size}: they must share a tokenizer")
        identity["draft"] = model_identity(draft_src, draft)
    identity["chat_template"] = tokenizer.chat_template
    identity["chat_template_sha256"] = hashlib.sha256(tokenizer.chat_template.encode()).hexdigest()
    identity["user_message"] = USER_MESSAGE_RULE
    return CaptureModels(target, draft, tokenizer, eos_token_ids(target, tokenizer), identity)


def canonical_command(s: CaptureSettings) -> str:
    """The command line that reproduces the trace (paths as given), without ``--out``: where
    the file lives is not part of its content, so a moved trace can still be resumed."""
    parts = ["saddle", "trace", "capture", "--target", s.target]
    parts += ["--draft", s.draft] if s.draft is not None else ["--draft-layers", str(s.draft_layers)]
    if s.gguf:
        parts.append("--gguf")
    parts += ["--prompts", s.prompts, "--max-new-tokens", str(s.max_new_tokens),
              "--offpath", str(s.offpath), "--batch-size", str(s.batch_size), "--dtype", s.dtype,
              "--max-seq-len", str(s.max_seq_len), "--threads", str(s.threads)]
    if s.dataset:
        parts += ["--dataset", s.dataset]
    return shlex.join(parts)


def build_header(s: CaptureSettings, models: CaptureModels, prompt_file: Path, n_prompts: int) -> TraceHeader:
    import torch
    import transformers

    target_name = resolve_model(s.target, s.gguf).name
    draft_name = (f"{target_name}-first{s.draft_layers}" if s.draft is None
                  else resolve_model(s.draft, s.gguf).name)
    provenance = {
        "tool": "saddle trace capture",
        "command": canonical_command(s),
        **models.identity,
        "prompts": {"file": prompt_file.name, "sha256": _sha256(prompt_file), "count": n_prompts},
        "settings": {"max_new_tokens": s.max_new_tokens, "offpath": s.offpath,
                     "batch_size": s.batch_size, "dtype": s.dtype, "eos_token_ids": models.eos,
                     "threads": s.threads,
                     "decoding": "greedy target; draft teacher-forced over prompt + output, "
                                 "rolled out greedily along its own tokens after each mismatch"},
        "software": {"torch": torch.__version__, "transformers": transformers.__version__},
    }
    return TraceHeader(pair=f"{target_name}+{draft_name}", target=target_name, draft=draft_name,
                       dataset=s.dataset or prompt_file.stem, max_seq_len=s.max_seq_len,
                       offpath_len=s.offpath, provenance=provenance)


def capture(s: CaptureSettings, max_requests: int | None = None, progress: bool = True,
            models: CaptureModels | None = None, after_write=None) -> dict:
    """Capture (or resume capturing) the trace ``s.out``; returns a summary.

    Requests already in ``s.out`` are skipped and new ones appended (the header must match).
    ``max_requests`` stops after that many new requests (a capture can run in slices);
    ``after_write(count)`` is called after each written request (tests inject interruptions).
    Every request is written and flushed as soon as it is done, so an error or an interruption
    keeps all finished requests."""
    from tqdm import tqdm

    from traces.io import TraceWriter, ids_in

    check_settings(s)
    prompt_file = Path(s.prompts)
    prompts = load_prompts(prompt_file)
    out = Path(s.out)
    done = set(ids_in(out))
    todo = [p for p in prompts if p.id not in done]
    if max_requests is not None:
        todo = todo[:max_requests]
    summary = {"out": str(out), "already": len(done), "written": 0, "remaining": 0, "flips": 0}
    if not todo:
        summary["remaining"] = len(prompts) - len(done & {p.id for p in prompts})
        return summary
    import torch

    torch.set_num_threads(s.threads)
    models = models or load_models(s)
    header = build_header(s, models, prompt_file, len(prompts))
    token_ids = {}
    for p in todo:
        token_ids[p.id] = prompt_token_ids(models.tokenizer, p)
        total = len(token_ids[p.id]) + s.max_new_tokens
        if total > s.max_seq_len:
            raise CaptureError(f"{prompt_file}: prompt {p.id!r} has {len(token_ids[p.id])} tokens; with "
                               f"--max-new-tokens {s.max_new_tokens} that exceeds --max-seq-len {s.max_seq_len}")
    pad = models.tokenizer.pad_token_id if models.tokenizer.pad_token_id is not None else models.eos[0]
    out.parent.mkdir(parents=True, exist_ok=True)
    with TraceWriter(out, header, append=True) as writer, \
            tqdm(total=len(todo), desc="capture", unit="req", disable=not progress) as bar:
        for start in range(0, len(todo), s.batch_size):
            batch = todo[start:start + s.batch_size]
            outputs = greedy_generate(models.target, [token_ids[p.id] for p in batch],
                                      s.max_new_tokens, models.eos, pad)
            for p, output in zip(batch, outputs):
                trace, flips = trace_request(models.target, models.draft, p, token_ids[p.id],
                                             output, s.offpath, models.eos)
                writer.write(trace)
                summary["written"] += 1
                summary["flips"] += flips
                bar.update(1)
                if after_write is not None:
                    after_write(summary["written"])
    summary["remaining"] = len(prompts) - len(done) - summary["written"]
    return summary


# -- command line ----------------------------------------------------------------------------

def register(trace_subparsers) -> None:
    """Add ``capture`` to the ``saddle trace`` group."""
    parser = trace_subparsers.add_parser(
        "capture", help="capture a real decoding trace from a Hugging Face target/draft pair",
        description="Greedy target generation, teacher-forced draft and off-path rollouts, "
                    "written as a saddle-trace/1 file. Rerunning with the same settings resumes.")
    parser.add_argument("--target", required=True, metavar="MODEL",
                        help="local model directory, .gguf file, pkg:PACKAGE/FILE, or Hub id")
    draft = parser.add_mutually_exclusive_group(required=True)
    draft.add_argument("--draft", metavar="MODEL", help="separate draft model (same tokenizer)")
    draft.add_argument("--draft-layers", type=int, metavar="K",
                       help="self-speculative draft: the target's first K layers, final norm, LM head")
    parser.add_argument("--gguf", action="store_true", help="MODEL paths are GGUF files (implied by .gguf)")
    parser.add_argument("--prompts", required=True, metavar="FILE",
                        help="JSON Lines: instruction, context, response, category (Dolly fields)")
    parser.add_argument("--out", required=True, metavar="FILE", help="trace file (.jsonl or .jsonl.gz)")
    parser.add_argument("--max-new-tokens", type=int, default=128, metavar="N",
                        help="output tokens per request at most (default 128)")
    parser.add_argument("--offpath", type=int, default=4, metavar="M",
                        help="draft rollout steps after each mismatch")
    parser.add_argument("--batch-size", type=int, default=8, metavar="B",
                        help="prompts generated together by the target (left-padded)")
    parser.add_argument("--dtype", choices=DTYPES, default="float32",
                        help="weights' dtype (default float32)")
    parser.add_argument("--max-seq-len", type=int, default=1024, metavar="L",
                        help="trace header's max_seq_len; prompt + output must fit")
    parser.add_argument("--dataset", help="dataset name in the header (default: prompt file stem)")
    parser.add_argument("--threads", type=int, default=1, metavar="T",
                        help="torch CPU threads (default 1: on a shared machine more threads "
                             "mostly wait for each other)")
    parser.add_argument("--max-requests", type=int, metavar="R",
                        help="stop after R new requests (rerun to continue)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=_handle)


def settings_from_args(args) -> CaptureSettings:
    return CaptureSettings(target=args.target, prompts=args.prompts, out=args.out, draft=args.draft,
                           draft_layers=args.draft_layers, gguf=args.gguf,
                           max_new_tokens=args.max_new_tokens, offpath=args.offpath,
                           batch_size=args.batch_size, dtype=args.dtype,
                           max_seq_len=args.max_seq_len, dataset=args.dataset, threads=args.threads)


def _handle(args) -> int:
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
        raise CaptureError("capture needs torch and transformers: pip install -e '.[capture]'")
    summary = capture(settings_from_args(args), max_requests=args.max_requests,
                      progress=not args.no_progress)
    print(f"{summary['out']}: {summary['written']} requests captured, {summary['already']} were "
          f"already there, {summary['remaining']} remaining")
    if summary["flips"]:
        print(f"note: {summary['flips']} generated tokens differ from the target's own "
              f"teacher-forced argmax (batched numerics at near-ties; use --batch-size 1 to avoid)")
    return 0
