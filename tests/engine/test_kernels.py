import json
from collections import namedtuple
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from torchperf_tui.engine.measurements.ab_arms import parse_arm_spec
from torchperf_tui.core.errors import ShapeError, TorchperfError
from torchperf_tui.engine.analysis.kernels import (CPU_NOTE, LAYER_PREFIX, KernelComparison, LayerKernels,
                                                   backward_phase, conv_kernels, group_by_layer)
from torchperf_tui.engine.analysis.kernel_time import KernelTime
from torchperf_tui.wording.kernel_names import short_kernel_name, short_kernel_names
from torchperf_tui.engine.measurements.bench_config import BenchConfig

TINY = "tests.tinymodels:tiny_cnn"
BASE = parse_arm_spec("")
MKLDNN_OFF = parse_arm_spec("mkldnn=off")
needs_onednn = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="no oneDNN in this build")


class LateFirst(nn.Module):
    """Registers its convs in the opposite order to the one they run in, one of them nested."""

    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Sequential(nn.Conv2d(8, 4, 3, padding=1))
        self.stem = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.stem(x)))


def _hooks_left(model: nn.Module) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def _cfg(model, shape=(2, 3, 16, 16)) -> BenchConfig:
    return BenchConfig(model=model, input_shape=shape, device="cpu")


@needs_onednn
def test_mkldnn_off_changes_each_layers_cpu_implementation_in_forward_order():
    model = LateFirst()
    # batch 2 with 3x3 filters: ATen picks oneDNN for a float32 conv when it may, else the slow path
    result = conv_kernels(_cfg(model), BASE, MKLDNN_OFF, iters=2, warmup=1)
    assert [layer.layer for layer in result.layers] == ["stem", "head.0"]  # as run, not as registered
    assert result.kind == "cpu-op" and result.note == CPU_NOTE and "GPU view" in result.note
    assert result.iters == 2 and not result.cancelled and result.a_spec == "base" and result.b_spec == "mkldnn=off"
    for layer in result.layers:
        assert [k.name for k in layer.a] == ["aten::mkldnn_convolution"]
        assert [k.name for k in layer.b] == ["aten::_slow_conv2d_forward"]
        assert layer.changed and layer.a_us > 0 and layer.b_us > 0
        assert all(k.calls_per_iter == 1 for k in layer.a + layer.b)
    assert result.changed_layers == result.layers
    data = json.loads(json.dumps(result.to_dict()))
    assert data["input_shape"] == [2, 3, 16, 16] and data["layers"][1]["layer"] == "head.0"
    assert data["layers"][0]["changed"] is True and data["layers"][0]["a"][0]["us_per_iter"] > 0
    assert _hooks_left(model) == 0
    assert torch.backends.mkldnn.enabled  # the arm's flags were put back


def test_same_flags_run_the_same_implementation_for_a_registered_model():
    result = conv_kernels(_cfg(TINY), BASE, parse_arm_spec("threads=1"), iters=2, warmup=1)
    assert [layer.layer for layer in result.layers] == ["conv"]
    (layer,) = result.layers
    assert layer.a and not layer.changed and {k.name for k in layer.a} == {k.name for k in layer.b}
    assert result.changed_layers == []


def test_a_model_without_convolutions_or_attention_is_refused_in_one_line():
    model = nn.Sequential(nn.Flatten(), nn.Linear(48, 2))
    with pytest.raises(TorchperfError, match="Sequential has no convolution layers and no attention"):
        conv_kernels(_cfg(model, (1, 3, 4, 4)), BASE, MKLDNN_OFF, iters=1, warmup=0)
    with pytest.raises(TorchperfError, match="at least 1"):
        conv_kernels(_cfg(LateFirst()), BASE, BASE, iters=0)


def test_rejected_input_is_a_shape_error_and_the_hooks_are_gone():
    model = LateFirst()
    with pytest.raises(ShapeError, match="rejected input"):
        conv_kernels(_cfg(model, (1, 5, 8, 8)), BASE, MKLDNN_OFF, iters=1, warmup=0)
    assert _hooks_left(model) == 0


def test_cancel_between_iterations_keeps_what_was_profiled():
    checks = []

    def cancel() -> bool:
        checks.append(1)
        return len(checks) >= 3  # warm-up check, first profiled iteration, then stop

    model = LateFirst()
    result = conv_kernels(_cfg(model), BASE, MKLDNN_OFF, iters=5, warmup=1, should_cancel=cancel)
    assert result.cancelled and result.iters == 1
    assert [layer.layer for layer in result.layers] == ["stem", "head.0"]
    assert all(layer.a and not layer.b for layer in result.layers)  # arm B never ran
    assert _hooks_left(model) == 0


Kernel = namedtuple("Kernel", ["name", "device", "duration"])
CUDA = SimpleNamespace(name="CUDA")
CPU = SimpleNamespace(name="CPU")


def _op(name, start, children=(), kernels=(), device_type=CPU, cpu_time=0.0):
    return SimpleNamespace(name=name, time_range=SimpleNamespace(start=start), cpu_children=list(children),
                           kernels=list(kernels), device_type=device_type, cpu_time_total=cpu_time)


def test_cuda_kernels_are_summed_per_layer_and_per_iteration():
    def layer(name, start, conv_kernel, us):
        conv = _op("aten::cudnn_convolution", start + 1, kernels=[Kernel(conv_kernel, 0, us)])
        bias = _op("aten::add_", start + 2, kernels=[Kernel("vectorized_elementwise_kernel", 0, 2.0)])
        top = _op("aten::conv2d", start, [_op("aten::convolution", start, [conv, bias])])
        # the range's own GPU-side annotation comes back as a "kernel" of the range: not a kernel of the layer
        return _op(LAYER_PREFIX + name, start, [top], kernels=[Kernel(LAYER_PREFIX + name, 0, 99.0)])

    events = [layer("layer1.conv", 50, "winograd", 20.0), layer("conv1", 0, "implicit_gemm", 40.0),
              layer("layer1.conv", 150, "winograd", 24.0), layer("conv1", 100, "implicit_gemm", 44.0),
              _op(LAYER_PREFIX + "conv1", 1, device_type=CUDA)]  # GPU-side copy of a range: ignored
    grouped = group_by_layer(events, iters=2, on_cuda=True)
    assert list(grouped) == ["conv1", "layer1.conv"]
    assert grouped["conv1"] == [KernelTime("implicit_gemm", 42.0, 1.0),
                                KernelTime("vectorized_elementwise_kernel", 2.0, 1.0)]
    assert grouped["layer1.conv"][0] == KernelTime("winograd", 22.0, 1.0)


def test_a_training_step_puts_each_layers_backward_kernels_under_it_by_autograd_sequence_number():
    def layer(name, start, seq, kernel):
        conv = _op("aten::convolution", start, kernels=[Kernel(kernel, 0, 10.0)])
        conv.sequence_nr, conv.thread = seq, 7
        return _op(LAYER_PREFIX + name, start, [conv])

    def backward(seq, start, kernels, fwd_thread=7):
        node = _op("ConvolutionBackward0", start, [_op("aten::convolution_backward", start,
                                                        kernels=[Kernel(k, 0, us) for k, us in kernels])])
        event = _op(f"autograd::engine::evaluate_function: ConvolutionBackward0", start, [node])
        event.sequence_nr, event.fwd_thread = seq, fwd_thread
        return event

    events = [layer("conv1", 0, 6, "sm90_xmma_fprop_implicit_gemm"), layer("conv2", 5, 8, "winograd_fwd"),
              backward(8, 20, [("sm90_xmma_dgrad_implicit_gemm", 30.0), ("cutlass_tensorop_s1688wgrad_optimized", 50.0),
                               ("reduce_bias_kernel", 4.0)]),
              backward(6, 40, [("wgrad_alg0_engine", 70.0)]),
              backward(6, 60, [("dgrad_engine", 1.0)], fwd_thread=9)]  # another thread's node 6: not ours
    grouped = group_by_layer(events, iters=1, on_cuda=True)
    assert [(k.phase, k.name) for k in grouped["conv2"]] == [
        ("fwd", "winograd_fwd"), ("dgrad", "sm90_xmma_dgrad_implicit_gemm"),
        ("wgrad", "cutlass_tensorop_s1688wgrad_optimized"), ("bwd", "reduce_bias_kernel")]
    assert [(k.phase, k.name) for k in grouped["conv1"]] == [("fwd", "sm90_xmma_fprop_implicit_gemm"),
                                                             ("wgrad", "wgrad_alg0_engine")]
    layer = LayerKernels("conv2", a=grouped["conv2"], b=grouped["conv2"][:1])
    assert layer.changed and [phase for phase, _ in layer.phases()] == ["fwd", "dgrad", "wgrad", "bwd"]
    assert not layer.phases()[0][1].changed and layer.phases()[1][1].changed


@needs_onednn
def test_the_kernels_of_a_training_step_on_the_cpu_show_each_layers_forward_and_backward_op():
    base = BenchConfig(model="tests.tinymodels:depthwise_net", input_shape=(2, 3, 16, 16), device="cpu",
                       step="train")
    result = conv_kernels(base, BASE, MKLDNN_OFF, iters=1, warmup=1)
    assert result.training and result.step == "train (sgd)" and "shown as bwd" in result.note
    assert [layer.layer for layer in result.layers] == ["conv", "depthwise"]
    for layer in result.layers:
        assert [phase for phase, _ in layer.phases()] == ["fwd", "bwd"]
        assert {k.name for k in layer.a if k.phase == "bwd"} == {"aten::convolution_backward"}  # oneDNN, inline
    conv_b = {k.phase: k.name for k in result.layers[0].b}
    assert conv_b == {"fwd": "aten::_slow_conv2d_forward", "bwd": "aten::_slow_conv2d_backward"}
    assert result.to_dict()["layers"][0]["a"][1]["phase"] == "bwd"


def test_a_layer_changed_when_its_kernels_differ_not_their_times():
    gemm = ("void cudnn::cnn::implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, false, false, true>"
            "(int, int, int, float const*, int, float*, float const*, kernel_conv_params, unsigned long long)")
    winograd = "void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(cudnn::WinogradDataParams)"
    layer = LayerKernels("layer3.0.conv2", a=[KernelTime(gemm, 41.2, 1)], b=[KernelTime(winograd, 23.4, 1)])
    same = LayerKernels("conv1", a=[KernelTime(gemm, 10, 1)], b=[KernelTime(gemm, 11, 1)])
    result = KernelComparison("resnet18", "cuda:0", (1, 3, 224, 224), "base", "benchmark=on", [layer, same],
                              "cuda-kernel", "", iters=3)
    assert layer.changed and not same.changed and result.changed_layers == [layer]
    assert (layer.a_us, layer.b_us) == (41.2, 23.4)
    data = result.to_dict()["layers"]
    assert [d["changed"] for d in data] == [True, False] and data[0]["b_us"] == 23.4


@pytest.mark.parametrize("name, short", [
    ("void cudnn::cnn::implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, false, false, true>(int, int, "
     "int, float const*, int, float*, float const*, kernel_conv_params, unsigned long long, int, float, float, int, "
     "float const*, float const*, bool, int, int)", "implicit_convolve_sgemm"),
    ("sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_warpsize2x2x1_g1_"
     "tensor16x8x8_kernel", "sm80_xmma_fprop_implicit_gemm_tf32f32"),
    ("sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32_warpgroupsize1x1x1_execute_"
     "segment_k_off_kernel__5x_cudnn", "sm90_xmma_fprop_implicit_gemm_f32f32"),
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688fprop_optimized_tf32_64x64_16x10_nhwc_align4>(cutlass_80_"
     "tensorop_s1688fprop_optimized_tf32_64x64_16x10_nhwc_align4::Params)", "cutlass_80_tensorop_s1688fprop_…_tf32"),
    ("void xmma_cudnn::gemm::kernel<xmma_cudnn::implicit_gemm::fprop_indexed::Kernel_traits<xmma_cudnn::Ampere_hmma"
     "_tf32_traits<unsigned int, float>, 1>, true>(xmma_cudnn::implicit_gemm::fprop_indexed::Params)",
     "implicit_gemm_fprop_indexed"),
    ("void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(cudnn::winograd_nonfused::"
     "WinogradDataParams<float, float>)", "winogradForwardData4x4"),
    ("void at::native::(anonymous namespace)::conv_depthwise2d_forward_kernel<0, float, int>(at::GenericPacked"
     "TensorAccessor<float const, 4ul, at::DefaultPtrTraits, int>, int)", "conv_depthwise2d_forward"),
    ("aten::mkldnn_convolution", "mkldnn_convolution"),
])
def test_short_kernel_name_keeps_the_recognisable_part(name, short):
    assert short_kernel_name(name) == short


def test_two_kernels_that_shorten_alike_are_told_apart_by_the_first_token_the_other_lacks():
    # Seen on an H100: cudnn.benchmark picked the same family in another tile configuration, and the layer read
    # "changed" with the same text under A and B.
    a = "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x32_stage4_warpsize2x1x1_g1"
    b = "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nchw_tilesize64x128x32_stage5_warpsize2x1x1_g1"
    copy = "void cudnn::engines_precompiled::nchwToNhwcKernel<float, float, float, false, true, (cudnn::Kern)0>(x)"
    names = short_kernel_names([a, copy, b, copy], width=36)
    assert short_kernel_name(a, 36) == short_kernel_name(b, 36)
    assert names[a] != names[b]
    assert names[a].endswith("·128x128x32") and names[b].endswith("·64x128x32")
    assert all(len(text) <= 36 for text in names.values())
    assert names[copy] == short_kernel_name(copy, 36)  # a name alone keeps its plain short form


def test_a_mangled_kernel_name_is_named_by_its_own_identifier():
    # Seen on an H100 as a conv layer's wgrad: "_ZN17cutlass__5x_…_6ParamsE"
    inner = "cutlass_tensorop_s1688wgrad_precomputed_optimized_tf32_128x128_16x4_nhwc_align4"
    name = f"_ZN17cutlass__5x_cudnn6KernelI{len(inner)}{inner}EEvNT_6ParamsE"
    assert short_kernel_name(name) == "cutlass_tensorop_s1688wgrad_…_tf32"
    assert backward_phase(name) == "wgrad"


def test_short_kernel_name_fits_the_width():
    assert short_kernel_name("sm80_xmma_fprop_implicit_gemm_tf32f32", width=20) == "sm80_xmma_…_tf32f32"
    assert len(short_kernel_name("x" * 80, width=30)) == 30


@pytest.mark.gpu
def test_gpu_every_conv_layer_shows_its_kernels():
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1, groups=4))
    cfg = BenchConfig(model=model, input_shape=(8, 3, 64, 64), device="cuda")
    result = conv_kernels(cfg, BASE, parse_arm_spec("benchmark=on"), iters=3, warmup=3)
    assert result.kind == "cuda-kernel" and result.device.startswith("cuda")
    assert [layer.layer for layer in result.layers] == ["0", "2"]
    for layer in result.layers:
        assert layer.a and layer.b and layer.a_us > 0 and layer.b_us > 0
        assert not any(k.name.startswith(LAYER_PREFIX) for k in layer.a + layer.b)
    assert json.dumps(result.to_dict()) and _hooks_left(model) == 0


@pytest.mark.gpu
def test_gpu_a_training_steps_backward_kernels_are_found_per_layer():
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1),
                          nn.Flatten(), nn.Linear(16 * 32 * 32, 10))
    cfg = BenchConfig(model=model, input_shape=(8, 3, 32, 32), device="cuda", step="train")
    result = conv_kernels(cfg, BASE, parse_arm_spec("benchmark=on"), iters=2, warmup=2)
    assert result.training and [layer.layer for layer in result.layers] == ["0", "2"]
    for layer in result.layers:
        phases = [phase for phase, _ in layer.phases()]
        assert phases[0] == "fwd" and len(phases) > 1, phases  # the backward's kernels came with the layer
    # The second conv's input needs a gradient: some kernel of its backward computes it (named dgrad, or
    # left as bwd where cuDNN's name does not say).
    assert {k.phase for k in result.layers[1].a} - {"fwd"}
    assert _hooks_left(model) == 0
