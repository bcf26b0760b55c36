"""A timed iteration that is a training step (forward, loss, backward, optimizer step) and mixed precision
(torch.autocast, not a cast of the model): the step really trains, its loss fits the model, gradients are set
to None between steps, and autocast's dtype is the one seen inside the forward."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.timing import run_benchmark
from torchperf_tui.engine.measurements.train_step import StepRunner, StepSpec
from torchperf_tui.engine.workloads.loss import LOSS_CROSS_ENTROPY, LOSS_SUM
from torchperf_tui.engine.workloads.model_inputs import ModelInputs
from torchperf_tui.wording.history import history_line

TINY = "tests.tinymodels:tiny_cnn"
CPU = torch.device("cpu")


class DtypeProbe(nn.Module):
    """Records the dtype of its linear layer's output at every forward pass, and returns a feature map (not
    class scores), so a training step takes the sum of its outputs as the loss."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.seen: list[torch.dtype] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        self.seen.append(y.dtype)
        return y.unsqueeze(1)


def test_a_training_step_changes_the_weights_and_leaves_no_gradients_behind():
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    before = [p.detach().clone() for p in model.parameters()]
    runner = StepRunner(model, StepSpec(step="train"), CPU, seed=3)
    x = torch.randn(5, 8)
    runner(ModelInputs((x,)))
    assert model.training  # batch norm statistics and dropout as in training
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert all(p.grad is None for p in model.parameters())  # zero_grad(set_to_none=True)
    assert runner.loss_kind == LOSS_CROSS_ENTROPY  # (batch, classes) output


def test_the_loss_fits_the_model_and_labels_are_seeded():
    probe = DtypeProbe()
    runner = StepRunner(probe, StepSpec(step="train"), CPU)
    runner(ModelInputs((torch.randn(4, 8),)))
    assert runner.loss_kind == LOSS_SUM
    a = StepRunner(nn.Linear(8, 5), StepSpec(step="train"), CPU, seed=7)._labels_for(6, 5)
    b = StepRunner(nn.Linear(8, 5), StepSpec(step="train"), CPU, seed=7)._labels_for(6, 5)
    assert torch.equal(a, b) and a.shape == (6,) and int(a.max()) < 5


def test_an_inference_pass_does_not_train():
    model = nn.Linear(8, 4).eval()
    before = [p.detach().clone() for p in model.parameters()]
    runner = StepRunner(model, StepSpec(), CPU)
    with torch.inference_mode():
        runner(ModelInputs((torch.randn(2, 8),)))
    assert runner.optimizer is None and not model.training
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


@pytest.mark.parametrize("training", [False, True])
def test_autocast_bf16_is_the_dtype_seen_inside_the_forward_and_the_weights_stay_float32(training):
    probe = DtypeProbe()
    runner = StepRunner(probe, StepSpec(step="train" if training else "infer", amp="bf16"), CPU)
    if training:
        runner(ModelInputs((torch.randn(4, 8),)))
    else:
        with torch.inference_mode():
            runner(ModelInputs((torch.randn(4, 8),)))
    assert probe.seen == [torch.bfloat16]
    assert all(p.dtype == torch.float32 for p in probe.parameters())


def test_fp16_training_uses_a_gradient_scaler():
    runner = StepRunner(nn.Linear(8, 4), StepSpec(step="train", amp="fp16"), CPU)
    assert runner.scaler is not None
    assert StepRunner(nn.Linear(8, 4), StepSpec(step="train", amp="bf16"), CPU).scaler is None


def test_a_timed_training_run_says_what_it_did():
    result = run_benchmark(BenchConfig(model=TINY, input_shape=(2, 3, 16, 16), warmup=1, iters=4, device="cpu",
                                       step="train", optimizer="adamw", amp="bf16"))
    assert (result.step, result.optimizer, result.amp) == ("train", "adamw", "bf16")
    assert result.loss == LOSS_CROSS_ENTROPY and len(result.samples_ms) == 4
    inference = run_benchmark(BenchConfig(model=TINY, input_shape=(2, 3, 16, 16), warmup=0, iters=2, device="cpu"))
    assert (inference.step, inference.optimizer, inference.amp, inference.loss) == ("infer", None, None, None)


def test_mixed_precision_over_a_model_already_cast_is_refused_in_one_line():
    with pytest.raises(TorchperfError, match="use --dtype float32 with it"):
        run_benchmark(BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), dtype="bfloat16", amp="bf16", iters=1,
                                  warmup=0, device="cpu"))
    with pytest.raises(TorchperfError, match="choose infer or train"):
        StepSpec(step="fit")


def test_the_history_record_keeps_the_step_and_compares_only_like_for_like():
    from torchperf_tui.engine.records.history_compare import compare_records
    from torchperf_tui.engine.records.history_records import record_from_timing

    cfg = dict(model=TINY, input_shape=(2, 3, 16, 16), warmup=0, iters=3, device="cpu")
    train = record_from_timing(run_benchmark(BenchConfig(step="train", **cfg)), fingerprint={})
    infer = record_from_timing(run_benchmark(BenchConfig(**cfg)), fingerprint={})
    assert train.setup()["step"] == "train" and infer.setup()["step"] == "infer"
    assert "step train (sgd)" in history_line(train)
    assert "step" in compare_records(infer, train).setup_diff


def test_the_cli_times_a_training_step(capsys):
    from torchperf_tui.entry import main

    assert main(["bench", TINY, "--input", "2x3x16x16", "--step", "train", "--amp", "bf16", "--iters", "3",
                 "--warmup", "0", "--no-history"]) == 0
    out = capsys.readouterr().out
    assert "training: forward, loss (cross-entropy" in out and "torch.autocast bf16" in out


def test_an_ab_of_training_steps_starts_every_block_of_both_arms_from_the_same_weights():
    from tests.tinymodels import WeightProbe
    from torchperf_tui.engine.measurements.ab_arms import parse_arm_spec
    from torchperf_tui.engine.measurements.abtest import run_ab

    base = BenchConfig(model="tests.tinymodels:weight_probe", input_shape=(4, 3, 8, 8), device="cpu", step="train")
    result = run_ab(base, parse_arm_spec(""), parse_arm_spec("mkldnn=off"), blocks=6, per_block=2)
    assert result.step == "train" and result.optimizer == "sgd" and result.pairs == 6
    per_block = 1 + 1 + 2  # the settling iteration, one warm-up, the timed ones
    seen = WeightProbe.seen
    assert len(seen) == 12 * per_block
    starts = seen[::per_block]
    assert all(value == starts[0] for value in starts)  # every block, A's and B's, from the built weights
    assert any(value != starts[0] for value in seen[1:per_block])  # and within a block, it trains


def test_an_arm_spec_can_set_its_own_step_optimizer_and_mixed_precision():
    from torchperf_tui.engine.measurements.ab_arms import parse_arm_spec
    from torchperf_tui.core.errors import FlagError

    base = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu", amp="bf16")
    spec = parse_arm_spec("step=train, optimizer=adamw, amp=off")
    assert spec.step_spec(base) == StepSpec(step="train", optimizer="adamw", amp=None)
    assert parse_arm_spec("").step_spec(base) == StepSpec(step="infer", amp="bf16")  # the base's
    for text, words in (("step=eval", "unknown step 'eval'"), ("amp=fp8", "unknown mixed precision 'fp8'"),
                        ("optimizer=lamb", "unknown optimizer 'lamb'")):
        with pytest.raises(FlagError, match=words) as caught:
            parse_arm_spec(text)
        assert text in str(caught.value) and "\n" not in str(caught.value)


def test_an_ab_of_inference_against_a_training_step_keeps_the_inference_arm_on_the_built_weights():
    from tests.tinymodels import WeightProbe
    from torchperf_tui.engine.measurements.ab_arms import parse_arm_spec
    from torchperf_tui.engine.measurements.abtest import run_ab
    from torchperf_tui.engine.records.history_records import records_from_ab

    base = BenchConfig(model="tests.tinymodels:weight_probe", input_shape=(4, 3, 8, 8), device="cpu")
    result = run_ab(base, parse_arm_spec(""), parse_arm_spec("step=train,amp=bf16"), blocks=6, per_block=2,
                    seed=3)
    assert (result.a.step, result.a.amp, result.b.step, result.b.optimizer, result.b.amp) == \
        ("infer", None, "train", "sgd", "bf16")
    assert result.step == "mixed" and result.amp == "mixed"
    assert any("A infer, B train (sgd) · amp bf16" in note and "not a flag's effect" in note for note in result.notes)
    per_block = 4
    # B's mixed precision changes numerics: before the blocks, three untimed passes measure its drift (the float32
    # reference, then each arm's output), all on the built weights.
    drift_passes, seen = WeightProbe.seen[:3], WeightProbe.seen[3:]
    assert result.b.drift is not None and result.a.drift is None and result.drift_b is not None
    blocks = [seen[i:i + per_block] for i in range(0, len(seen), per_block)]
    order = result.order[:len(blocks)]
    built = blocks[0][0]
    assert drift_passes == [built] * 3
    for arm, block in zip(order, blocks):
        assert block[0] == built  # every block starts from the built weights
        if arm == "A":  # inference never trains, even right after a block of B's training steps
            assert all(value == built for value in block)
    records = {record.details["arm"]: record for record in records_from_ab(result, fingerprint={})}
    assert records["A"].details["step"] == "infer" and records["B"].details["step"] == "train"
    assert records["B"].details["amp"] == "bf16"


def test_the_cli_compares_training_steps_and_their_kernels_per_pass(capsys):
    from torchperf_tui.entry import main

    assert main(["compare", TINY, "--input", "2x3x16x16", "--a", "", "--b", "mkldnn=off", "--step", "train",
                 "--blocks", "6", "--per-block", "2", "--no-history"]) == 0
    assert "each iteration a training step (sgd, every block from the same weights)" in capsys.readouterr().out
    assert main(["compare", TINY, "--input", "1x3x16x16", "--a", "", "--b", "mkldnn=off", "--step", "train",
                 "--kernels"]) == 0
    out = capsys.readouterr().out
    assert "each iteration train (sgd)" in out and " pass " in out and " bwd " in out and " fwd " in out
    # The kernels of an inference pass against those of a training step compare nothing: one line, exit 2.
    assert main(["compare", TINY, "--input", "1x3x16x16", "--a", "", "--b", "step=train", "--kernels"]) == 2
    err = capsys.readouterr().err
    assert "give step, optimizer and amp to both arms alike" in err and len(err.strip().splitlines()) == 1


def test_a_forward_pass_can_repeat_bit_for_bit_while_the_training_step_does_not():
    from torchperf_tui.engine.measurements.determinism import check_determinism

    spec = "tests.tinymodels:drifting_backward"
    forward = check_determinism(spec, (2, 3, 8, 8), device="cpu")
    assert forward.bitwise_equal and forward.step == "infer"
    train = check_determinism(spec, (2, 3, 8, 8), device="cpu", step="train")
    assert not train.bitwise_equal and train.step == "train"
    # The layer before the drifting backward differs, the one after it does not; the summary names it.
    assert set(train.differing_parameters()) == {"conv.weight", "conv.bias"}
    assert "gradients differ in conv." in train.summary() and "training steps from the same state" in train.summary()


def test_a_training_determinism_check_reseeds_dropout_and_restores_the_state():
    from torchperf_tui.engine.measurements.determinism import check_determinism

    model = nn.Sequential(nn.Flatten(), nn.Dropout(0.5), nn.Linear(3 * 4 * 4, 5), nn.BatchNorm1d(5))
    report = check_determinism(model, (4, 3, 4, 4), device="cpu", step="train", optimizer="adamw")
    assert report.bitwise_equal  # the same dropout masks, the same starting weights and batch-norm statistics
    assert "(amp" not in report.summary()
    autocast = check_determinism(model, (4, 3, 4, 4), device="cpu", step="train", amp="bf16")
    assert "2 training steps from the same state (amp bf16)" in autocast.summary()


def test_the_cli_checks_training_determinism(capsys):
    from torchperf_tui.entry import main

    assert main(["determinism", "tests.tinymodels:drifting_backward", "--input", "2x3x8x8", "--step", "train"]) == 0
    assert "not deterministic" in capsys.readouterr().out


def test_the_flops_of_a_training_step_count_the_backward_apart_and_groups_right():
    from torchperf_tui.engine.workloads.complexity import analyse_complexity

    shape = (2, 3, 16, 16)
    infer = analyse_complexity("tests.tinymodels:depthwise_net", shape, layers=False)
    train = analyse_complexity("tests.tinymodels:depthwise_net", shape, layers=False, step="train")
    assert train.flops == infer.flops and infer.backward_flops is None  # the forward, counted the same
    conv, depthwise, fc = 2 * 2 * 16 * 16 * 16 * 3 * 9, 2 * 2 * 16 * 16 * 16 * 1 * 9, 2 * 2 * 16 * 10
    assert infer.flops == conv + depthwise + fc
    # Backward: the first conv needs only its weight's gradient (1x), the depthwise conv both (2x, with its
    # groups: PyTorch's formula counted its input gradient as dense, 16x too much), the classifier both.
    assert train.backward_flops == conv + 2 * depthwise + 2 * fc
    assert train.step_flops == train.flops + train.backward_flops


def test_the_cli_counts_a_training_step(capsys):
    from torchperf_tui.entry import main

    assert main(["flops", "tests.tinymodels:depthwise_net", "--input", "2x3x16x16", "--step", "train"]) == 0
    out = capsys.readouterr().out
    assert "training step" in out and "x the forward" in out


def test_each_layer_has_its_own_backward_flops_and_they_sum_to_the_backward():
    from torchperf_tui.engine.workloads.complexity import analyse_complexity

    train = analyse_complexity("tests.tinymodels:depthwise_net", (2, 3, 16, 16), step="train")
    by_name = {layer.name: layer for layer in train.layers}
    # The first conv computes only its weight's gradient (no input gradient for the data): 1x its forward;
    # the depthwise conv and the classifier both gradients: 2x.
    assert by_name["conv"].backward_flops == by_name["conv"].flops
    assert by_name["depthwise"].backward_flops == 2 * by_name["depthwise"].flops
    assert by_name["fc"].backward_flops == 2 * by_name["fc"].flops
    assert sum(layer.backward_flops for layer in train.layers) == train.backward_flops
    infer = analyse_complexity("tests.tinymodels:depthwise_net", (2, 3, 16, 16))
    assert all(layer.backward_flops is None for layer in infer.layers)


def test_a_blocks_two_branches_each_keep_their_own_backward_flops():
    """FlopCounterMode kept a ResNet downsample's backward open until the other branch's gradient arrived, and
    counted that whole branch in it (56x its forward, and a negative remainder): counted by autograd node, each
    conv's backward is its two gradients, 2x its forward (the first conv's, whose input needs none, 1x)."""
    from torchperf_tui.engine.workloads.complexity import analyse_complexity

    train = analyse_complexity("resnet18", (2, 3, 32, 32), step="train")
    convs = [layer for layer in train.layers if layer.type in ("Conv2d", "Linear")]
    assert len(convs) == 21 and any(layer.name == "layer2.0.downsample.0" for layer in convs)
    for layer in convs:
        assert layer.backward_flops == (1 if layer.name == "conv1" else 2) * layer.flops, layer.name
    assert sum(layer.backward_flops for layer in train.layers) == train.backward_flops
    assert not any(layer.name == "(unattributed)" for layer in train.layers)


def test_the_cli_tables_each_layers_backward_flops(capsys):
    from torchperf_tui.entry import main

    assert main(["flops", "tests.tinymodels:depthwise_net", "--input", "2x3x16x16", "--step", "train",
                 "--layers"]) == 0
    assert "bwd FLOPs" in capsys.readouterr().out
    assert main(["flops", "tests.tinymodels:depthwise_net", "--input", "2x3x16x16", "--layers"]) == 0
    assert "bwd FLOPs" not in capsys.readouterr().out


def test_the_throughput_search_can_time_training_steps():
    from torchperf_tui.engine.measurements.throughput import find_max_batch
    from torchperf_tui.engine.measurements.bench_config import BenchConfig

    cfg = BenchConfig(model="tests.tinymodels:tiny_cnn", input_shape=(1, 3, 16, 16), device="cpu", step="train",
                      optimizer="adamw")
    result = find_max_batch(cfg, max_batch=4, time_budget_s=None)
    assert result.step == "train (adamw)" and result.samples_per_s and result.best_batch >= 1
    infer = find_max_batch(BenchConfig(model="tests.tinymodels:tiny_cnn", input_shape=(1, 3, 16, 16),
                                       device="cpu"), max_batch=4, time_budget_s=None)
    assert infer.step == "infer"


def test_a_training_search_builds_its_step_runner_and_runs_it():
    # The tries run the step, not a forward pass: the model's parameters change between tries.
    from torchperf_tui.engine.measurements.batch_runner import ModelBatchRunner
    from torchperf_tui.engine.measurements.train_step import StepSpec

    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(12, 3))
    before = model[1].weight.detach().clone()
    runner = ModelBatchRunner(model, (3, 2, 2), device=torch.device("cpu"), dtype=torch.float32,
                              step=StepSpec(step="train"))
    with torch.enable_grad():
        runner(2, 0, 2)
    assert not torch.equal(before, model[1].weight.detach())
    inference = ModelBatchRunner(model, (3, 2, 2), device=torch.device("cpu"), dtype=torch.float32)
    after = model[1].weight.detach().clone()
    with torch.inference_mode():
        inference(2, 0, 2)
    assert torch.equal(after, model[1].weight.detach())


def test_profile_and_roofline_of_a_training_step_count_its_backward(capsys):
    from torchperf_tui.entry import main

    assert main(["profile", "tests.tinymodels:tiny_cnn", "--input", "2x3x16x16", "--iters", "1", "--step",
                 "train", "--json"]) == 0
    import json

    data = json.loads(capsys.readouterr().out)
    names = {op["name"] for op in data["ops"]}
    assert data["step"] == "train (sgd)"
    assert any("backward" in name for name in names), sorted(names)[:20]  # the backward's ops are profiled
    assert main(["roofline", "tests.tinymodels:depthwise_net", "--input", "2x3x16x16", "--iters", "3",
                 "--step", "train", "--json"]) == 0
    roofline = json.loads(capsys.readouterr().out)
    conv, depthwise, fc = 2 * 2 * 16 * 16 * 16 * 3 * 9, 2 * 2 * 16 * 16 * 16 * 1 * 9, 2 * 2 * 16 * 10
    assert roofline["flops"] == (conv + depthwise + fc) + (conv + 2 * depthwise + 2 * fc)  # forward + backward
    assert roofline["step"] == "train" and roofline["bytes_moved"] == 0
    assert "not estimated" in str(roofline["arithmetic_intensity"])


def test_a_cpu_training_run_has_no_allocator_peaks_and_says_why(capsys):
    from torchperf_tui.entry import main

    result = run_benchmark(BenchConfig(model="tests.tinymodels:tiny_cnn", input_shape=(2, 3, 8, 8), device="cpu",
                                       warmup=0, iters=2, step="train"))
    assert result.step_peak_bytes is None and result.forward_peak_bytes is None
    assert main(["bench", "tests.tinymodels:tiny_cnn", "--input", "2x3x8x8", "--iters", "2", "--warmup", "0",
                 "--step", "train", "--no-history"]) == 0
    assert "n/a on the CPU (no allocator statistics" in capsys.readouterr().out


def test_the_timing_pane_sets_a_training_steps_peak_beside_the_forward_alone():
    from types import SimpleNamespace

    from torchperf_tui.app.widgets.timing.run_lines import peak_text

    record = SimpleNamespace(result=SimpleNamespace(step_peak_bytes=3 * 1024**3, forward_peak_bytes=1024**3))
    assert peak_text(record) == "peak allocated: training step 3.0 GiB · forward pass alone 1.0 GiB"
    assert peak_text(SimpleNamespace(result=SimpleNamespace(step_peak_bytes=None))) == ""


@pytest.mark.gpu
def test_a_cuda_training_step_peaks_above_its_forward_pass_alone():
    result = run_benchmark(BenchConfig(model="resnet18", input_shape=(8, 3, 64, 64), device="cuda", warmup=1,
                                       iters=3, step="train", optimizer="adamw"))
    # Activations kept for the backward, gradients and AdamW's two moments come on top of the forward's.
    assert result.step_peak_bytes > result.forward_peak_bytes > 0
