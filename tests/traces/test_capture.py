"""`saddle trace capture` on a tiny randomly initialised Llama (seeded, float64): the captured
trace must predict real greedy speculative decoding round by round, resume exactly, and fail
clearly on bad input without touching what was already captured."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from sim.cli import main  # noqa: E402
from traces.capture import (  # noqa: E402
    CaptureError,
    CaptureSettings,
    capture,
    load_models,
    load_prompts,
    prompt_token_ids,
)
from traces.io import read_trace  # noqa: E402
from traces.specdec import speculative_decode  # noqa: E402

PROMPTS = [
    {"instruction": "Name three colours.", "context": "", "response": "Red, green, blue.",
     "category": "brainstorming"},
    {"instruction": "What is the capital of France?", "context": "", "response": "Paris.",
     "category": "open_qa"},
    {"instruction": "Summarise the text.", "context": "The cat sat on the mat all day long.",
     "response": "A cat sat on a mat.", "category": "summarization"},
    {"instruction": "Is a tomato a fruit?", "context": "", "response": "Yes.",
     "category": "classification"},
]
LAYERS, DRAFT_LAYERS = 4, 2
NEW_TOKENS, OFFPATH = 24, 3


def _tokenizer():
    """Byte-level tokenizer (256 byte symbols + 3 specials) with a ChatML template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<|im_start|>", "<|im_end|>"]
    vocab = {t: i for i, t in enumerate(specials + sorted(pre_tokenizers.ByteLevel.alphabet()))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(specials)
    template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<|im_end|>",
                                   bos_token="<|im_start|>", chat_template=template)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A seeded 4-layer Llama (hidden 64) with its tokenizer, and a prompt file.

    initializer_range 0.2 (not the usual 0.02) makes the later layers matter, so the 2-layer
    self-speculative draft both agrees and disagrees with the target, and EOS does occur."""
    from transformers import LlamaConfig, LlamaForCausalLM

    threads = torch.get_num_threads()
    torch.set_num_threads(1)   # tiny matrices: threads only add overhead on a shared machine
    root = tmp_path_factory.mktemp("capture")
    model_dir = root / "tiny-llama"
    tokenizer = _tokenizer()
    tokenizer.save_pretrained(model_dir)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=LAYERS, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=512, bos_token_id=1, eos_token_id=2,
                         pad_token_id=0, tie_word_embeddings=False, initializer_range=0.2)
    LlamaForCausalLM(config).save_pretrained(model_dir)
    prompts = root / "prompts.jsonl"
    prompts.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    yield root
    torch.set_num_threads(threads)


def _settings(root: Path, out: str, **changes) -> CaptureSettings:
    base = dict(target=str(root / "tiny-llama"), prompts=str(root / "prompts.jsonl"),
                out=str(root / out), draft_layers=DRAFT_LAYERS, max_new_tokens=NEW_TOKENS,
                offpath=OFFPATH, batch_size=3, dtype="float64", max_seq_len=256)
    base.update(changes)
    return CaptureSettings(**base)


@pytest.fixture(scope="module")
def models(workdir):
    return load_models(_settings(workdir, "unused"))


@pytest.fixture(scope="module")
def reference(workdir, models):
    """One uninterrupted capture; batch 3 over 4 prompts of unequal length (left padding)."""
    s = _settings(workdir, "reference.jsonl")
    capture(s, progress=False, models=models)
    return Path(s.out)


def test_trace_predicts_speculative_decoding_round_by_round(workdir, models, reference):
    header, requests = read_trace(reference)
    acc = np.concatenate([r.accepted for r in requests])
    # Not vacuous: the draft both agrees and disagrees, off-path rollouts exist, and some
    # request ends at EOS before the limit.
    assert 0.1 < acc.mean() < 0.9
    assert any(len(o) == OFFPATH for r in requests for o in r.offpath)
    assert any(r.output_len < NEW_TOKENS for r in requests)
    rounds_checked = 0
    for prompt, request in zip(load_prompts(workdir / "prompts.jsonl"), requests):
        ids = prompt_token_ids(models.tokenizer, prompt)
        assert request.prompt_len == len(ids)
        for d in (1, 3, 6):
            output, rounds = speculative_decode(models.target, models.draft, ids, d, NEW_TOKENS, models.eos)
            assert len(output) == request.output_len
            for rnd in rounds:
                assert rnd.accepted == request.leading_accepted(rnd.t, d), (request.id, d, rnd.t)
                window = request.draft_probs(rnd.t, d)
                assert window.n_accepted == rnd.accepted
                # The draft's probabilities along its own path, on-path and off-path, as far
                # as the trace records them (the output's end; OFFPATH past a mismatch).
                k = min(len(rnd.drafted), len(window.p), rnd.accepted + 1 + OFFPATH)
                np.testing.assert_allclose(rnd.draft_p[:k], window.p[:k], rtol=0, atol=1e-12)
                # And its entropy there, on and off path (offpath_entropy).
                np.testing.assert_allclose(rnd.draft_entropy[:k], request.draft_entropy(rnd.t, d)[:k],
                                           rtol=0, atol=1e-9)
                rounds_checked += 1
    assert rounds_checked > 50


def test_entropy_by_hand():
    from traces.capture import _entropy, _log_probs

    logits = torch.tensor([[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, float("-inf")], [5.0, -5.0, -5.0, -5.0]])
    e = _entropy(_log_probs(logits))
    p = 1 / (1 + 3 * np.exp(-10.0))
    q = (1 - p) / 3
    want = [np.log(4), np.log(3), -p * np.log(p) - 3 * q * np.log(q)]    # uniform over 4, over 3
    np.testing.assert_allclose(e.numpy(), want, rtol=0, atol=1e-12)


def test_speculative_output_is_the_targets_greedy_output(workdir, models):
    from traces.capture import greedy_generate

    prompt = load_prompts(workdir / "prompts.jsonl")[2]
    ids = prompt_token_ids(models.tokenizer, prompt)
    greedy = greedy_generate(models.target, [ids], NEW_TOKENS, models.eos, 0)[0]
    for d in (2, 5):
        assert speculative_decode(models.target, models.draft, ids, d, NEW_TOKENS, models.eos)[0] == greedy


def test_batching_does_not_change_the_records(workdir, models, reference):
    s = _settings(workdir, "unbatched.jsonl", batch_size=1)
    capture(s, progress=False, models=models)
    assert read_trace(s.out)[1] == read_trace(reference)[1]


def test_separate_draft_model_equals_self_speculative_draft(workdir, models, reference):
    draft_dir = workdir / "tiny-draft"
    models.draft.save_pretrained(draft_dir)
    models.tokenizer.save_pretrained(draft_dir)
    s = _settings(workdir, "separate.jsonl", draft_layers=None, draft=str(draft_dir))
    capture(s, progress=False)
    header, requests = read_trace(s.out)
    # Same tokens and flags; probabilities equal to the last bits (a separately loaded model
    # may pick another kernel path for the same arithmetic).
    for mine, ref in zip(requests, read_trace(reference)[1], strict=True):
        assert (mine.id, mine.prompt_len) == (ref.id, ref.prompt_len)
        np.testing.assert_array_equal(mine.accepted, ref.accepted)
        np.testing.assert_allclose(mine.p, ref.p, rtol=0, atol=1e-12)
        for a, b in zip(mine.offpath, ref.offpath, strict=True):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
    assert header.draft == "tiny-draft" and "files" in header.provenance["draft"]


def test_interrupted_capture_resumes_to_the_same_bytes(workdir, models, reference):
    s = _settings(workdir, "resumed.jsonl")

    def interrupt(written):
        if written == 2:   # in the middle of the first batch of 3
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        capture(s, progress=False, models=models, after_write=interrupt)
    assert [r.id for r in read_trace(s.out)[1]] == ["prompts-0001", "prompts-0002"]
    assert capture(s, progress=False, models=models, max_requests=1)["written"] == 1
    summary = capture(s, progress=False, models=models)
    assert (summary["already"], summary["written"], summary["remaining"]) == (3, 1, 0)
    assert Path(s.out).read_bytes() == reference.read_bytes()
    # A complete file: nothing to do, nothing changes, and no model is loaded.
    assert capture(s, progress=False)["written"] == 0
    assert Path(s.out).read_bytes() == reference.read_bytes()


def test_resume_after_a_cut_last_record(workdir, models, reference):
    lines = reference.read_bytes().splitlines(keepends=True)
    out = workdir / "cut.jsonl"
    out.write_bytes(b"".join(lines[:3]) + lines[3][:40])   # header, 2 requests, a cut third
    with pytest.warns(UserWarning, match="incomplete last record"):
        capture(_settings(workdir, "cut.jsonl"), progress=False, models=models)
    assert out.read_bytes() == reference.read_bytes()


def test_provenance_names_models_template_and_settings(workdir, reference):
    header, _ = read_trace(reference)
    prov = header.provenance
    assert header.pair == "tiny-llama+tiny-llama-first2"
    assert header.offpath_len == OFFPATH and header.max_seq_len == 256
    assert header.dataset == "prompts"
    assert prov["draft"]["layers"] == DRAFT_LAYERS and prov["draft"]["of_layers"] == LAYERS
    import hashlib
    weights = (workdir / "tiny-llama" / "model.safetensors").read_bytes()
    assert prov["target"]["files"]["model.safetensors"] == hashlib.sha256(weights).hexdigest()
    assert prov["chat_template"].startswith("{% for m in messages %}")
    assert prov["settings"]["max_new_tokens"] == NEW_TOKENS and prov["settings"]["dtype"] == "float64"
    assert prov["settings"]["eos_token_ids"] == [2]
    assert prov["prompts"]["count"] == len(PROMPTS)
    assert "--draft-layers 2" in prov["command"] and "--out" not in prov["command"]


def _cli(root: Path, *args: str) -> list[str]:
    return ["trace", "capture", "--target", str(root / "tiny-llama"), "--draft-layers", "2",
            "--max-new-tokens", "4", "--dtype", "float64", "--no-progress", *args]


@pytest.mark.parametrize("bad, message", [
    ("missing", "prompt file not found"),
    ('{"context": "", "category": "open_qa"}', ":2: instruction: found nothing (field missing), expected a non-empty string"),
    ('{"instruction": "Hi", "category": "poetry"}', ":2: category: found unknown category 'poetry', expected one of"),
    ("not json", ":2: invalid JSON"),
])
def test_bad_prompt_file_is_a_clear_error_and_keeps_the_trace(workdir, reference, capsys, bad, message):
    out = workdir / "keep.jsonl"
    out.write_bytes(reference.read_bytes())
    prompts = workdir / "bad.jsonl"
    if bad == "missing":
        prompts = workdir / "no-such-file.jsonl"
    else:
        prompts.write_text(json.dumps(PROMPTS[0]) + "\n" + bad + "\n")
    assert main(_cli(workdir, "--prompts", str(prompts), "--out", str(out))) == 2
    err = capsys.readouterr().err
    assert err.startswith("saddle: error: ") and message in err and str(prompts) in err
    assert out.read_bytes() == reference.read_bytes()


def test_missing_model_path_is_a_clear_error_and_keeps_the_trace(workdir, reference, capsys):
    out = workdir / "keep-model.jsonl"
    out.write_bytes(b"".join(reference.read_bytes().splitlines(keepends=True)[:3]))   # 2 requests
    before = out.read_bytes()
    args = ["trace", "capture", "--target", str(workdir / "no-such-model"), "--draft-layers", "2",
            "--prompts", str(workdir / "prompts.jsonl"), "--out", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"path {workdir / 'no-such-model'} does not exist" in err
    assert out.read_bytes() == before
    with pytest.raises(CaptureError, match="GGUF file .* does not exist"):
        capture(_settings(workdir, "keep-model.jsonl", target=str(workdir / "x.gguf")), progress=False)
    assert out.read_bytes() == before


def test_draft_layers_must_be_fewer_than_the_targets(workdir, capsys):
    args = _cli(workdir, "--prompts", str(workdir / "prompts.jsonl"), "--out", str(workdir / "k.jsonl"))
    args[args.index("--draft-layers") + 1] = str(LAYERS)
    assert main(args) == 2
    assert "--draft-layers 4: expected 1 <= K < 4" in capsys.readouterr().err
    assert not (workdir / "k.jsonl").exists()


def test_cli_captures_a_slice_per_run(workdir, reference, capsys):
    out = workdir / "cli.jsonl"
    args = _cli(workdir, "--prompts", str(workdir / "prompts.jsonl"), "--out", str(out), "--max-requests", "3")
    assert main(args) == 0 and main(args) == 0
    assert "1 requests captured, 3 were already there, 0 remaining" in capsys.readouterr().out
    assert [r.id for r in read_trace(out)[1]] == [f"prompts-000{i}" for i in range(1, 5)]
