"""Complexity of transformers models on the meta device: scaled_dot_product_attention counted once (forward and a
training step's backward), a decoder's FLOPs equal to its closed-form count, per-layer rows by module name, and what
the count of causal attention means."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.flop_counter import FlopCounterMode

from torchperf_tui.engine.workloads.complexity import analyse_complexity
from torchperf_tui.engine.workloads.flop_formulas import SDPA_FORMULAS
from torchperf_tui.engine.workloads.input_spec import InputSpec, TensorSpec
from torchperf_tui.wording.complexity import attention_text, complexity_rows

transformers = pytest.importorskip("transformers")

HIDDEN, INTERMEDIATE, HEADS, VOCAB = 64, 128, 4, 256
HEAD_DIM = HIDDEN // HEADS


class Attention(nn.Module):
    """Bare SDPA over (B, heads, S, head_dim) queries, keys and values made from the input."""

    def __init__(self, causal: bool, masked: bool = False) -> None:
        super().__init__()
        self.causal, self.masked = causal, masked

    def forward(self, x):
        mask = torch.ones(x.shape[-2], x.shape[-2], dtype=torch.bool, device=x.device).tril() if self.masked else None
        return F.scaled_dot_product_attention(x * 1.0, x * 1.0, x * 1.0, attn_mask=mask, is_causal=self.causal)


def attention_flops(batch: int, heads: int, seq: int, head_dim: int) -> int:
    """QK^T and AV, every score of the S x S: 2 matmuls of 2*B*heads*S*S*head_dim FLOPs each."""
    return 2 * 2 * batch * heads * seq * seq * head_dim


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_is_counted_once_forward_and_backward(causal):
    shape = (2, 3, 24, 8)
    forward = attention_flops(2, 3, 24, 8)
    result = analyse_complexity(Attention(causal), shape)
    assert result.flops == forward  # causal or not: the math kernel computes every score
    assert result.attention.calls == 1 and result.attention.flops == forward
    assert result.attention.causal_calls == int(causal) and result.attention.masked_calls == 0

    # A training step's backward: the gradients of both matmuls' two operands, twice the forward, no more.
    layer = nn.Sequential(nn.Linear(8, 8), Attention(causal))
    trained = analyse_complexity(layer, shape, step="train")
    linear = 2 * 2 * 3 * 24 * 8 * 8
    assert trained.flops == linear + forward
    assert trained.backward_flops == linear + 2 * forward  # the linear's weight gradient (its input needs none)
    assert {row.name: row.backward_flops for row in trained.layers}["1"] == 2 * forward


def test_sdpa_runs_its_math_kernel_on_meta():
    # What the count rests on: on meta SDPA decomposes into bmm (counted), it never reaches a fused kernel.
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        seen: list = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.seen.append(func._overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    q = torch.empty(1, 2, 8, 4, device="meta")
    with Ops():
        F.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert Ops.seen.count("bmm") == 2 and not [op for op in Ops.seen if "attention" in op]


def test_a_masked_sdpa_counts_the_full_scores_and_says_it_had_a_mask():
    result = analyse_complexity(Attention(causal=False, masked=True), (1, 2, 16, 8))
    assert result.flops == attention_flops(1, 2, 16, 8)
    assert result.attention.masked_calls == 1 and result.attention.causal_calls == 0
    assert attention_text(result).endswith("(with a mask: counted as if nothing is masked)")


def test_fused_sdpa_ops_torch_has_no_formula_for_are_counted():
    # The CPU flash kernel is what a real CPU SDPA runs; FlopCounterMode alone counts it as 0. Were it (or the
    # `overrideable` kernel) ever to run under the analysis, its formula here must count the same as the math one.
    op = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    assert op in SDPA_FORMULAS or op in torch.utils.flop_counter.flop_registry
    q = torch.randn(2, 3, 16, 8, requires_grad=True)
    with FlopCounterMode(display=False, custom_mapping=SDPA_FORMULAS) as counter:
        out = F.scaled_dot_product_attention(q, q, q, is_causal=True)
        forward = counter.get_total_flops()
        out.sum().backward()
    assert forward == attention_flops(2, 3, 16, 8)
    # the fused backward computes the scores again: 2.5x the forward, as torch's flash/efficient formula
    assert counter.get_total_flops() - forward == 5 * attention_flops(2, 3, 16, 8) // 2


def tiny_llama(kv_heads: int = HEADS):
    config = transformers.AutoConfig.for_model(
        "llama", num_hidden_layers=2, hidden_size=HIDDEN, intermediate_size=INTERMEDIATE,
        num_attention_heads=HEADS, num_key_value_heads=kv_heads, vocab_size=VOCAB, max_position_embeddings=256)
    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(config)


def tokens(batch: int, seq: int, *extra: TensorSpec) -> InputSpec:
    return InputSpec((batch, seq), main=TensorSpec("input_ids", "tokens", high=VOCAB), extra=extra)


def llama_closed_form(batch: int, seq: int, layers: int = 2, kv_heads: int = HEADS) -> dict[str, int]:
    """Each linear layer 2*B*S*in*out (no biases in llama), lm_head included; each layer's attention the full S x S
    over every query head (grouped keys and values are repeated to them)."""
    kv = kv_heads * HEAD_DIM
    linear = lambda n_in, n_out: 2 * batch * seq * n_in * n_out
    return {"q_proj": linear(HIDDEN, HIDDEN), "k_proj": linear(HIDDEN, kv), "v_proj": linear(HIDDEN, kv),
            "o_proj": linear(HIDDEN, HIDDEN), "gate_proj": linear(HIDDEN, INTERMEDIATE),
            "up_proj": linear(HIDDEN, INTERMEDIATE), "down_proj": linear(INTERMEDIATE, HIDDEN),
            "self_attn": attention_flops(batch, HEADS, seq, HEAD_DIM), "lm_head": linear(HIDDEN, VOCAB)}


@pytest.mark.parametrize("kv_heads", [HEADS, 2])
def test_a_tiny_llamas_flops_equal_its_closed_form(kv_heads):
    batch, seq = 3, 40
    model = tiny_llama(kv_heads)
    result = analyse_complexity(model, (batch, seq), inputs=tokens(batch, seq))
    parts = llama_closed_form(batch, seq, kv_heads=kv_heads)
    per_layer = sum(flops for name, flops in parts.items() if name != "lm_head")
    assert result.flops == 2 * per_layer + parts["lm_head"]
    assert result.macs == result.flops // 2
    assert result.params_total == sum(p.numel() for p in model.parameters())

    rows = {row.name: row for row in result.layers}
    assert sum(row.flops for row in result.layers) == result.flops and "(unattributed)" not in rows
    for i in range(2):
        # SDPA's FLOPs land in the attention module's own row, the projections in theirs
        attention = rows[f"model.layers.{i}.self_attn"]
        assert (attention.type, attention.flops) == ("LlamaAttention", parts["self_attn"])
        assert attention.input_shape == (batch, seq, HIDDEN)  # given by keyword (hidden_states=)
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            assert rows[f"model.layers.{i}.self_attn.{proj}"].flops == parts[proj]
        for proj in ("gate_proj", "up_proj", "down_proj"):
            assert rows[f"model.layers.{i}.mlp.{proj}"].flops == parts[proj]
    assert rows["model.embed_tokens"].flops == 0 and rows["model.embed_tokens"].output_shape == (batch, seq, HIDDEN)
    assert rows["lm_head"].flops == parts["lm_head"] and rows["lm_head"].output_shape == (batch, seq, VOCAB)

    assert result.attention.calls == 2 and result.attention.causal_calls == 2
    assert result.attention.flops == 2 * parts["self_attn"]
    assert attention_text(result) == ("SDPA 2.46 MFLOPs in 2 calls: forward counted as the full S×S "
                                      "(causal: flash computes about half)")
    assert ("attention", attention_text(result), "") in complexity_rows(result)


def test_a_tiny_llamas_training_step_counts_attentions_backward_once():
    batch, seq = 2, 24
    result = analyse_complexity(tiny_llama(), (batch, seq), inputs=tokens(batch, seq), step="train")
    parts = llama_closed_form(batch, seq)
    # every weight's gradient and every activation's gradient: 2x each linear; attention's 4 bmm: 2x its forward;
    # the first projections' input gradient is the embedding's (not a matmul) and is counted like the others
    assert result.backward_flops == 2 * result.flops
    rows = {row.name: row for row in result.layers}
    assert rows["model.layers.0.self_attn"].backward_flops == 2 * parts["self_attn"]
    assert rows["lm_head"].backward_flops == 2 * parts["lm_head"]
    assert sum(row.backward_flops for row in result.layers) == result.backward_flops
    assert "forward and backward counted as the full S×S" in attention_text(result)


def test_an_all_ones_attention_mask_counts_as_no_mask():
    # On meta transformers cannot read the mask's values (it looks whether anything is padded): a mask of ones is
    # left out, which is what transformers does with it on a real device (SDPA with is_causal, no mask).
    batch, seq = 2, 16
    plain = analyse_complexity(tiny_llama(), (batch, seq), inputs=tokens(batch, seq))
    masked = analyse_complexity(tiny_llama(), (batch, seq),
                                inputs=tokens(batch, seq, TensorSpec("attention_mask", "mask")))
    assert masked.flops == plain.flops and masked.attention == plain.attention


def test_gpt2_conv1d_layers_are_counted_per_layer():
    config = transformers.AutoConfig.for_model("gpt2", n_layer=2, n_embd=HIDDEN, n_head=HEADS, vocab_size=VOCAB,
                                               n_positions=256, bos_token_id=0, eos_token_id=0)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    batch, seq = 2, 20
    result = analyse_complexity(model, (batch, seq), inputs=tokens(batch, seq))
    linear = lambda n_in, n_out: 2 * batch * seq * n_in * n_out  # Conv1D is an addmm
    block = (linear(HIDDEN, 3 * HIDDEN) + linear(HIDDEN, HIDDEN) + linear(HIDDEN, 4 * HIDDEN)
             + linear(4 * HIDDEN, HIDDEN) + attention_flops(batch, HEADS, seq, HEAD_DIM))
    assert result.flops == 2 * block + linear(HIDDEN, VOCAB)
    rows = {row.name: row for row in result.layers}
    assert rows["transformer.h.0.attn"].flops == attention_flops(batch, HEADS, seq, HEAD_DIM)
    assert (rows["transformer.h.1.attn.c_attn"].type, rows["transformer.h.1.attn.c_attn"].flops) == \
        ("Conv1D", linear(HIDDEN, 3 * HIDDEN))
    assert rows["transformer.h.0.mlp.c_fc"].output_shape == (batch, seq, 4 * HIDDEN)
    assert result.attention.causal_calls == 2


def test_bert_is_counted_with_its_masks_and_says_its_attention_is_full():
    config = transformers.AutoConfig.for_model("bert", num_hidden_layers=2, hidden_size=HIDDEN,
                                               intermediate_size=INTERMEDIATE, num_attention_heads=HEADS,
                                               vocab_size=VOCAB, max_position_embeddings=256)
    with torch.device("meta"):
        model = transformers.AutoModel.from_config(config)
    batch, seq = 2, 16
    spec = tokens(batch, seq, TensorSpec("attention_mask", "mask"), TensorSpec("token_type_ids", "zeros"))
    result = analyse_complexity(model, (batch, seq), inputs=spec)
    rows = {row.name: row for row in result.layers}
    assert rows["encoder.layer.0.attention.self"].flops == attention_flops(batch, HEADS, seq, HEAD_DIM)
    assert rows["encoder.layer.1.intermediate.dense"].flops == 2 * batch * seq * HIDDEN * INTERMEDIATE
    assert rows["pooler.dense"].flops == 2 * batch * HIDDEN * HIDDEN
    assert sum(row.flops for row in result.layers) == result.flops
    assert result.attention.causal_calls == 0
    assert attention_text(result) == "SDPA 262.1 kFLOPs in 2 calls: forward counted as the full S×S"


def test_a_model_without_sdpa_says_nothing_of_attention():
    result = analyse_complexity(nn.Linear(8, 8), (2, 8))
    assert result.attention is None and attention_text(result) is None
    assert all(label != "attention" for label, _, _ in complexity_rows(result))
