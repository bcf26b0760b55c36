"""The attention kernel each SDPA call site ran under arm A and arm B (from the profiler's ops), another attention
implementation (attn=eager) named with its own ops, a fallback found with its reason, an impossible set refused before the run, and flash against math called significant on a tiny
llama at sequence 1024 (CPU: flash and math exist there)."""

from __future__ import annotations

import pytest
import torch

from torchperf_tui.engine.measurements.attention_calls import check_attention_sets, probe, record_calls
from torchperf_tui.engine.analysis.kernels import conv_kernels
from torchperf_tui.engine.measurements.ab_arms import parse_arm_spec
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.core.errors import FlagError

TINY = (("num_hidden_layers", "2"), ("hidden_size", "64"), ("intermediate_size", "128"),
        ("num_attention_heads", "4"), ("num_key_value_heads", "4"), ("vocab_size", "256"))
DROPOUT = TINY + (("attention_dropout", "0.1"),)  # dropout is on in a training step: CPU flash has no dropout


def _llama(seq: int = 32, model_args=TINY, **kw) -> BenchConfig:
    return BenchConfig(model="hf:llama", model_args=model_args, seq_len=seq, device="cpu", **kw)


def test_the_kernel_each_arm_ran_is_named_per_attention_site():
    result = conv_kernels(_llama(), parse_arm_spec("sdpa=math"), parse_arm_spec("sdpa=flash"), iters=1, warmup=1)
    assert result.layers == []  # no convolutions: a transformer is not refused
    assert [(s.site, s.phase) for s in result.attention] == [("model.layers.0.self_attn", "fwd"),
                                                             ("model.layers.1.self_attn", "fwd")]
    for site in result.attention:
        assert (site.a.allowed, site.a.ran, site.b.allowed, site.b.ran) == ("math", "math", "flash", "flash")
        assert site.changed and site.a.us_per_iter > 0 and site.b.us_per_iter > 0
        assert site.b.kernels[0].name == "aten::_scaled_dot_product_flash_attention_for_cpu"
        assert site.a.kernels[0].name == "aten::_scaled_dot_product_attention_math"
    assert result.to_dict()["attention"][0]["changed"] is True


def test_an_eager_attention_is_named_with_its_own_ops_beside_sdpa_at_the_same_sites():
    from torchperf_tui.wording.kernels import attention_cells

    result = conv_kernels(_llama(step="train"), parse_arm_spec("attn=eager"), parse_arm_spec("attn=sdpa"), iters=1,
                          warmup=1)
    assert [(s.site, s.phase) for s in result.attention] == [(f"model.layers.{i}.self_attn", p)
                                                             for i in (0, 1) for p in ("fwd", "bwd")]
    for site in result.attention:
        assert site.a.ran == "eager" and site.b.ran == "flash" and site.changed
        assert site.a.us_per_iter > 0 and site.b.us_per_iter > 0
    forward = result.attention[0].a.kernels
    names = {k.name for k in forward}
    # its attention, the two matmuls with the softmax between them, and none of the projections around it
    assert {"aten::matmul", "aten::softmax"} <= names and "aten::linear" not in names
    assert [k.calls_per_iter for k in forward if k.name == "aten::matmul"] == [2.0]
    assert attention_cells(result)[0][2] == "eager (matmul + softmax), no SDPA call"


def test_attention_modules_are_the_innermost_of_transformers_attention_classes():
    from torchperf_tui.engine.analysis.attention_kernels import attention_modules

    class BertSelfAttention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.query = torch.nn.Linear(2, 2)

    class BertAttention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.self = BertSelfAttention()
            self.output = torch.nn.Linear(2, 2)

    class LlamaAttention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj = torch.nn.Linear(2, 2)

    model = torch.nn.ModuleDict({"bert": torch.nn.ModuleList([BertAttention(), BertAttention()]),
                                 "llama": torch.nn.ModuleDict({"self_attn": LlamaAttention()})})
    assert attention_modules(model) == ["bert.0.self", "bert.1.self", "llama.self_attn"]


def test_a_fallback_is_found_with_its_reason_in_each_pass_of_a_training_step():
    from torchperf_tui.wording.kernels import fallback_lines

    result = conv_kernels(_llama(model_args=DROPOUT, step="train"), parse_arm_spec("sdpa=math"),
                          parse_arm_spec("sdpa=flash+math"), iters=1, warmup=1)
    by_pass = {(s.site, s.phase): s for s in result.attention}
    assert set(by_pass) == {(f"model.layers.{i}.self_attn", p) for i in (0, 1) for p in ("fwd", "bwd")}
    for site in result.attention:
        assert site.b.ran == "math" and site.b.passed_over == {"flash": "dropout"}
        assert site.a.passed_over == {}  # math alone was allowed: nothing passed over
    assert fallback_lines(result) == [
        "B: flash allowed, math ran at model.layers.0.self_attn and 1 more site: dropout",
        "B: flash allowed, math ran (backward) at model.layers.0.self_attn and 1 more site: dropout"]


def test_a_call_flash_cannot_take_is_probed_for_its_reason():
    class Attention(torch.nn.Module):
        def forward(self, x):
            q = x.transpose(-1, -2).contiguous().transpose(-1, -2)  # a last dimension of stride != 1
            return torch.nn.functional.scaled_dot_product_attention(q, x, x)

    model = torch.nn.Sequential(Attention())
    x = torch.randn(1, 2, 8, 4)
    calls = record_calls(model, lambda: model(x))
    assert [c.site for c in calls] == ["0"] and calls[0].q.stride[-1] != 1
    assert probe(calls[0], "flash", torch.device("cpu")) == "a strided (non-contiguous) input"
    assert probe(calls[0], "math", torch.device("cpu")) is None


def test_an_impossible_set_is_refused_in_one_line_before_the_run():
    with pytest.raises(FlagError, match="documented constraints") as doc:
        check_attention_sets(_llama(), [parse_arm_spec("sdpa=efficient").flags])
    assert "\n" not in str(doc.value)
    with pytest.raises(FlagError) as probed:  # by running the model's own call (recorded on meta) under the set
        check_attention_sets(_llama(model_args=DROPOUT, step="train"), [parse_arm_spec("sdpa=flash").flags])
    line = str(probed.value)
    assert "\n" not in line and "model.layers.0.self_attn" in line and "flash: dropout" in line
    assert "checked by running that call" in line
    check_attention_sets(_llama(model_args=DROPOUT), [parse_arm_spec("sdpa=flash").flags])  # inference: no dropout


def test_every_job_refuses_in_its_preamble_before_the_model_is_built():
    """The check is in BenchConfig.prepare, the one preamble every measurement starts from: timing, the time per
    layer, the sweep and generation alike (the last three were outside a list of job kinds checked before)."""
    from torchperf_tui.engine.analysis.layer_times import layer_times
    from torchperf_tui.engine.measurements.abtest import run_ab
    from torchperf_tui.engine.measurements.generation import run_generation
    from torchperf_tui.engine.measurements.sweep import run_sweep
    from torchperf_tui.engine.measurements.timing import run_benchmark

    cudnn = _llama(flags=parse_arm_spec("sdpa=cudnn").flags)
    for start in (lambda: run_benchmark(cudnn), lambda: layer_times(cudnn), lambda: run_sweep(cudnn, 32, 64),
                  lambda: run_generation(cudnn, 4)):
        with pytest.raises(FlagError, match="sdpa=cudnn"):
            start()
    with pytest.raises(FlagError, match="sdpa=cudnn"):  # an arm's set, in a comparison's preamble
        run_ab(_llama(), parse_arm_spec(""), parse_arm_spec("sdpa=cudnn"), blocks=6, per_block=1)


def test_a_set_the_check_missed_is_still_one_line_from_the_forward():
    from torchperf_tui.engine.workloads.workload import model_code_error

    error = model_code_error("hf:llama", RuntimeError("No available kernel.  Aborting execution.\nmore"),
                             action="running", where="input 1x32 (float32)")
    assert isinstance(error, FlagError) and "allow math" in str(error) and "\n" not in str(error)


def test_flash_against_math_on_a_tiny_llama_at_1024_is_called_significant():
    """The one slow test: the A/B the issue names, at a small size (math builds the 1024 x 1024 scores)."""
    from torchperf_tui.engine.measurements.abtest import run_ab

    # 12 pairs of blocks of 7: a block's median stands against the bursts of a loaded box (with blocks of 2 and of 3,
    # under three test workers and two CPU burners on 2 cores, several pairs turned round and the CI reached 1).
    # One intra-op thread in both arms: with two on a box whose cores are taken, each op waits for its slower thread
    # and the arms' times converge (three such A/Bs beside two burners: B/A 0.31-0.55, one CI reaching 1.10; with one
    # thread 0.17-0.18, CIs within 0.16-0.20, as on a quiet box at 0.19)
    result = run_ab(_llama(seq=1024, warmup=1), parse_arm_spec("sdpa=math,threads=1"),
                    parse_arm_spec("sdpa=flash,threads=1"), blocks=12, per_block=7, seed=1)
    assert result.verdict is not None and result.verdict.significant, result.verdict
    assert result.verdict.ratio < 1  # B (flash) faster
    assert (result.a.flags.sdpa, result.b.flags.sdpa) == ("math", "flash")


def _cuda_llama(**kw) -> BenchConfig:
    return BenchConfig(model="hf:llama", model_args=TINY, seq_len=256, device="cuda", **kw)


@pytest.mark.gpu
def test_gpu_flash_and_efficient_are_told_apart_and_a_float32_fallback_says_its_dtype():
    result = conv_kernels(_cuda_llama(dtype="bfloat16"), parse_arm_spec("sdpa=flash"),
                          parse_arm_spec("sdpa=efficient"), iters=2, warmup=2)
    assert result.kind == "cuda-kernel"
    assert {(s.a.ran, s.b.ran) for s in result.attention} == {("flash", "efficient")}
    assert all(s.a.kernels and s.b.kernels and s.a.us_per_iter > 0 for s in result.attention)
    fp32 = conv_kernels(_cuda_llama(), parse_arm_spec("sdpa=math"), parse_arm_spec("sdpa=flash+math"),
                        iters=1, warmup=1)
    assert all(s.b.ran == "math" and s.b.passed_over == {"flash": "dtype float32"} for s in fp32.attention)


@pytest.mark.gpu
def test_gpu_flash_alone_on_a_float32_model_is_refused_by_the_documented_constraint():
    with pytest.raises(FlagError, match="float16 or bfloat16"):
        check_attention_sets(_cuda_llama(), [parse_arm_spec("sdpa=flash").flags])
