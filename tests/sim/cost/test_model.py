"""Operator FLOPs and bytes against hand counts (OPT-66B, Llama-3.1-70B), and model errors."""
import pytest

import common.config
from common.errors import ConfigError, SaddleError
from sim.model import load_model, load_pair

MODELS = ["opt-1.3b", "opt-6.7b", "opt-66b", "opt-175b", "llama-3.1-70b", "llama-3.2-1b"]


def by_name(ops):
    return {op.name: op for op in ops}


def test_all_six_models_load_with_design_shapes():
    shapes = {m: (s.hidden, s.layers, s.heads, s.kv_heads, s.head_dim, s.ffn, s.vocab)
              for m in MODELS for s in [load_model(m)]}
    assert shapes["opt-66b"] == (9216, 64, 72, 72, 128, 36864, 50272)
    assert shapes["opt-175b"] == (12288, 96, 96, 96, 128, 49152, 50272)
    assert shapes["llama-3.1-70b"] == (8192, 80, 64, 8, 128, 28672, 128256)
    assert shapes["llama-3.2-1b"] == (2048, 16, 32, 8, 64, 8192, 128256)
    for m in MODELS:  # hidden = heads x head_dim in all six
        s = load_model(m)
        assert s.heads * s.head_dim == s.hidden


def test_opt66b_fc_hand_counts_batch_of_four():
    fc = by_name(load_model("opt-66b").step_operators([(100, 1)] * 4).fc)
    # qkv: k = 9216, n = 3 x 9216 = 27648, 4 tokens: 2 x 4 x 9216 x 27648 FLOPs
    assert fc["qkv"].flops == 2_038_431_744
    assert fc["qkv"].bytes_read == (254_803_968 + 4 * 9216) * 2     # weights + inputs, FP16
    assert fc["qkv"].bytes_written == 4 * 27648 * 2
    assert fc["out_proj"].flops == 2 * 4 * 9216 * 9216 == 679_477_248
    assert fc["ffn_up"].flops == fc["ffn_down"].flops == 2 * 4 * 9216 * 36864
    assert "ffn_gate" not in fc                                        # OPT: two matrices
    assert fc["lm_head"].repeat == 1 and fc["qkv"].repeat == 64
    assert fc["lm_head"].weight_bytes == 9216 * 50272 * 2 == 926_613_504


def test_opt66b_weights_total_by_hand():
    # per layer 9216 x (27648 + 9216 + 36864 + 36864) = 1_019_215_872 parameters, x 64 layers,
    # + LM head 463_306_752 = 65_693_122_560 parameters, 2 bytes each
    assert load_model("opt-66b").weight_bytes == 131_386_245_120


def test_opt66b_attention_hand_counts():
    scores, softmax, context = load_model("opt-66b").step_operators([(1024, 1)]).attention
    assert scores.flops == 2 * 72 * 1024 * 128 == 18_874_368
    assert scores.bytes_read == (72 * 128 + 72 * 1024 * 128) * 2 == 18_892_800
    assert scores.bytes_written == 72 * 1024 * 2
    assert softmax.flops == 5 * 72 * 1024
    assert context.bytes_read == (72 * 1024 + 72 * 1024 * 128) * 2
    assert context.bytes_written == 72 * 128 * 2
    assert scores.streamed_bytes + softmax.streamed_bytes + context.streamed_bytes == \
        (2 * 72 * 1024 * 128 + 2 * 72 * 128) * 2
    # decoding attention reads each KV byte for about one FLOP
    assert 0.9 < scores.intensity < 1.1


def test_llama70b_gqa_hand_counts():
    ops = load_model("llama-3.1-70b").step_operators([(1024, 9)])
    fc = by_name(ops.fc)
    assert (fc["qkv"].k, fc["qkv"].n) == (8192, (64 + 2 * 8) * 128)   # 10240
    assert fc["qkv"].flops == 2 * 9 * 8192 * 10240 == 1_509_949_440
    assert {"ffn_gate", "ffn_up", "ffn_down"} <= set(fc)               # SwiGLU: three matrices
    assert fc["ffn_gate"].weight_bytes == 8192 * 28672 * 2
    scores, softmax, context = ops.attention
    assert scores.group == 8
    assert scores.flops == 2 * 64 * 9 * 1024 * 128 == 150_994_944
    # only 8 KV heads are read: 8 x 1024 x 128 x 2 B, plus 64 heads x 9 queries of Q
    assert scores.bytes_read == 8 * 1024 * 128 * 2 + 64 * 9 * 128 * 2 == 2_244_608
    assert context.bytes_read == 64 * 9 * 1024 * 2 + 8 * 1024 * 128 * 2
    other = by_name(ops.other)
    assert other["rope"].elements == 9 * (64 + 8) * 128
    assert other["activation"].inputs == 2                             # SiLU(gate) x up


def test_per_request_context_and_queries_are_kept():
    ops = load_model("opt-66b").step_operators([(100, 1), (2000, 5)])
    scores = [op for op in ops.attention if op.name == "scores"]
    assert [(op.request, op.context, op.queries) for op in scores] == [(0, 100, 1), (1, 2000, 5)]
    assert by_name(ops.fc)["qkv"].tokens == 6


def test_shard_splits_heads_ffn_vocab_and_keeps_one_kv_head():
    llama = load_model("llama-3.1-70b").shard(8)
    assert (llama.heads, llama.kv_heads, llama.group, llama.ffn) == (8, 1, 8, 3584)
    opt = load_model("opt-66b").shard(8)
    assert (opt.heads, opt.kv_heads, opt.ffn, opt.vocab) == (9, 9, 4608, 6284)
    with pytest.raises(SaddleError, match="do not split over 5 devices"):
        load_model("opt-66b").shard(5)


def test_step_totals_are_sums_with_repeats():
    ops = load_model("opt-1.3b").step_operators([(64, 1)] * 3)
    assert ops.flops == sum(op.flops * op.repeat for op in ops)
    assert all(op.flops > 0 and op.bytes_read > 0 and op.bytes_written > 0 for op in ops)


@pytest.mark.parametrize("bad, msg", [([], "at least one"), ([(0, 1)], "context_len"),
                                      ([(10, 0)], "query_tokens"), ([(4, 5)], "exceeds"),
                                      ([(10.0, 1)], "context_len"), ([7], "expected")])
def test_bad_requests_are_named(bad, msg):
    with pytest.raises(SaddleError, match=msg):
        load_model("opt-66b").step_operators(bad)


def test_pairs():
    pair = load_pair("opt-175b+opt-6.7b")
    assert (pair.tlm.name, pair.dlm.name, pair.max_sequence_length) == ("opt-175b", "opt-6.7b", 512)


def test_unknown_model_lists_known():
    with pytest.raises(ConfigError, match="known: .*opt-66b"):
        load_model("gpt-5")


def test_bad_model_file_names_file_and_key(tmp_path, monkeypatch):
    (tmp_path / "models" / "conventions").mkdir(parents=True)
    real = common.config.CONFIGS / "models"
    (tmp_path / "models" / "conventions" / "operators.yaml").write_text(
        (real / "conventions" / "operators.yaml").read_text())
    text = (real / "opt-1.3b.yaml").read_text().replace("name: opt-1.3b", "name: bad")
    (tmp_path / "models" / "bad.yaml").write_text(text.replace("heads: 32\n", "heads: -3\n", 1))
    monkeypatch.setattr(common.config, "CONFIGS", tmp_path)
    with pytest.raises(ConfigError, match=r"bad\.yaml: heads: expected a positive number"):
        load_model.__wrapped__("bad")
