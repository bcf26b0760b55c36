"""Quantization (engine/workloads/quantization.py) and drift (engine/measurements/drift.py): the schemes' refusals,
which layers are converted, the drift's figures against hand computations, and both through a run and an A/B."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from torch import nn

from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements import drift as drift_module
from torchperf_tui.engine.measurements.drift import FLOAT32, changes_numerics, drift_between, full_precision
from torchperf_tui.engine.measurements.flags import Flags
from torchperf_tui.engine.workloads import quantization
from torchperf_tui.engine.workloads.quantization import SCHEMES, plan_layers, quant_problem

MLP = "tests.tinymodels:quant_mlp"
CPU = torch.device("cpu")


# -- drift: the figures against a hand computation ---------------------------------------------------------------

def test_sqnr_and_max_error_of_a_known_perturbation():
    reference = torch.full((4, 10), 2.0)  # signal: 40 elements of 2² = 160
    output = reference.clone()
    output[0, 0] += 0.5  # noise: 0.25 + 0.04 = 0.29
    output[3, 9] -= 0.2
    drift = drift_between(reference, output, FLOAT32)
    assert drift.sqnr_db == pytest.approx(10 * math.log10(160 / 0.29))
    assert drift.max_abs_error == pytest.approx(0.5)
    assert drift.finite and drift.against == FLOAT32


def test_argmax_changes_are_counted_per_row_of_scores():
    reference = torch.tensor([[0.0, 1.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 3.0], [1.0, 0.0, 0.0]])
    output = reference.clone()
    output[1, 2] = 5.0  # row 1's arg-max moves from 0 to 2
    output[2, 2] = 2.5  # row 2's stays
    drift = drift_between(reference, output, FLOAT32)
    assert drift.positions == 4 and drift.argmax_changed == pytest.approx(0.25)
    flat = drift_between(torch.ones(5), torch.ones(5) * 1.1, FLOAT32)  # one vector of outputs: not scores
    assert flat.argmax_changed is None and flat.positions is None


def test_identical_outputs_have_no_noise_and_a_nan_is_said_not_measured():
    same = drift_between(torch.ones(2, 3), torch.ones(2, 3), FLOAT32)
    assert same.sqnr_db is None and same.max_abs_error == 0.0 and same.argmax_changed == 0.0
    broken = torch.ones(2, 3)
    broken[1, 1] = float("nan")
    drift = drift_between(torch.ones(2, 3), broken, FLOAT32)
    assert not drift.finite and drift.sqnr_db is None
    assert drift_between(torch.ones(2, 3), torch.ones(3, 2), FLOAT32) is None  # shapes that differ: nothing said


def test_what_changes_numerics(monkeypatch):
    base = BenchConfig(model="m")
    assert not changes_numerics(base, "cpu")
    for changed in (dict(quant="int8wo"), dict(dtype="bfloat16"), dict(amp="bf16"),
                    dict(flags=Flags(matmul_precision="high"))):
        assert changes_numerics(BenchConfig(model="m", **changed), "cpu"), changed
    full = BenchConfig(model="m", flags=full_precision())
    tf32 = BenchConfig(model="m", flags=full_precision().replace(tf32_matmul=True))
    assert not changes_numerics(tf32, "cpu")  # TF32 acts on CUDA only
    # On a GPU where TF32 acts (faked here: this box has none), a TF32 flag on changes numerics, and so does
    # PyTorch's default set, whose cuDNN convolutions may use TF32.
    monkeypatch.setattr(drift_module, "flag_applicability", lambda name, device: (device == "cuda", None))
    assert changes_numerics(tf32, "cuda") and changes_numerics(base, "cuda") and not changes_numerics(full, "cuda")
    reference = full_precision()
    assert reference.matmul_precision == "highest"
    assert not any(value for name, value in reference.to_dict().items() if name.startswith("tf32"))


# -- the schemes: where each runs, refused before anything is built ----------------------------------------------

def test_what_the_cpu_cannot_run_is_one_line_saying_why():
    fp8 = quant_problem("fp8", CPU, "float32")
    assert "compute capability 8.9" in fp8 and "the CPU runs int8wo, int8dq or fp8wo" in fp8
    assert "CUDA" in quant_problem("int4wo", CPU, "bfloat16")
    for name in ("int8wo", "int8dq", "fp8wo"):
        assert quant_problem(name, CPU, "float32") is None and SCHEMES[name].cpu
    with pytest.raises(TorchperfError, match="quant fp8 needs a CUDA GPU"):  # a run's, before anything is built
        BenchConfig(model=MLP, device="cpu", quant="fp8").prepare()
    assert quant_problem(None, CPU, "float32") is None


def test_on_cuda_the_capability_and_int4s_dtype_are_checked(monkeypatch):
    cuda = torch.device("cuda", 0)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))  # an A100
    assert "needs compute capability 8.9 or newer; this GPU has 8.0" in quant_problem("fp8", cuda, "bfloat16")
    assert "--dtype bfloat16" in quant_problem("int4wo", cuda, "float32")
    assert quant_problem("int4wo", cuda, "bfloat16") is None
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))  # an H100
    assert quant_problem("fp8", cuda, "bfloat16") is None


def test_without_torchao_a_scheme_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(quantization, "torchao_version", lambda: None)
    assert "pip install 'torchperf-tui[quant]'" in quant_problem("int8wo", CPU, "float32")


def test_which_layers_are_converted_and_why_the_others_are_left():
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Flatten(), nn.Linear(128, 64), nn.Linear(64, 8), nn.Linear(100, 32))
    report = plan_layers(model, "int8wo")
    assert report.converted == ("2", "4")
    assert dict(report.left) == {"0": "not a Linear (Conv2d)", "3": "too small: 64 in, 8 out"}
    grouped = plan_layers(model, "int4wo")  # int4 quantizes groups of 128 input features: 100 is not whole groups
    assert grouped.converted == ("2",) and "not whole groups of 128" in dict(grouped.left)["4"]


# -- through a run and an A/B ------------------------------------------------------------------------------------

def test_a_quantized_run_says_what_it_converted_and_how_far_its_outputs_moved():
    from torchperf_tui.engine.measurements.timing import run_benchmark

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        result = run_benchmark(BenchConfig(model=MLP, input_shape=(8, 32), iters=3, warmup=1, quant="int8wo"))
    assert result.quantized.converted == ("body.0", "body.2")
    assert result.quantized.left == (("head", "too small: 32 in, 4 out"),)
    drift = result.drift
    assert drift.finite and drift.against == FLOAT32 and drift.positions == 8
    assert 20 < drift.sqnr_db < 80  # int8 weights: measurable noise, far from the signal
    data = result.to_dict()
    assert data["quant"] == "int8wo" and data["drift"]["sqnr_db"] == drift.sqnr_db
    assert data["quantized"]["converted"] == ["body.0", "body.2"]
    plain = run_benchmark(BenchConfig(model=MLP, input_shape=(8, 32), iters=3, warmup=1))
    assert plain.drift is None and plain.quantized is None  # float32 at full precision: nothing to measure


def test_the_same_seed_builds_the_same_weights_so_a_drift_is_reproducible():
    from torchperf_tui.engine.measurements.timing import run_benchmark

    runs = [run_benchmark(BenchConfig(model=MLP, input_shape=(8, 32), iters=2, warmup=0, dtype="bfloat16"))
            for _ in range(2)]
    assert runs[0].drift == runs[1].drift and runs[0].drift.sqnr_db is not None


def test_an_ab_says_bs_drift_against_a_beside_its_verdict():
    from torchperf_tui.engine.measurements.ab_arms import parse_arm_spec
    from torchperf_tui.engine.measurements.abtest import run_ab
    from torchperf_tui.engine.records.history_records import records_from_ab
    from torchperf_tui.wording.numerics import ab_numerics_rows

    base = BenchConfig(model=MLP, input_shape=(8, 32))
    result = run_ab(base, parse_arm_spec(""), parse_arm_spec("quant=int8wo"), blocks=6, per_block=2)
    assert result.a.quant is None and result.b.quant == "int8wo"
    assert result.a.drift is None and result.b.drift is not None
    # A is the float32 model itself: B against A is B's drift from float32, the same figures
    assert result.drift_b.sqnr_db == pytest.approx(result.b.drift.sqnr_db)
    rows = {label: value for label, value, _ in ab_numerics_rows(result)}
    assert rows["arm B quantization"].startswith("int8wo: 2 Linear converted (body.0, body.2)")
    assert "SQNR" in rows["B against A"] and "A is the float32 model at full precision" in rows["B against A"]
    records = {r.details["arm"]: r for r in records_from_ab(result, fingerprint={})}
    assert records["B"].details["quant"] == "int8wo" and "drift_b" in records["B"].details
    assert "quant" not in records["A"].details
    assert records["B"].setup()["quant"] == "int8wo" and records["A"].setup()["quant"] is None


def test_two_arms_that_differ_only_in_quantization_are_not_the_same_run():
    from torchperf_tui.engine.measurements.ab_arms import parse_arm_spec, same_arms

    base = BenchConfig(model=MLP)
    assert not same_arms(base, parse_arm_spec(""), parse_arm_spec("quant=int8wo"))
    quantized = BenchConfig(model=MLP, quant="int8wo")
    assert same_arms(quantized, parse_arm_spec(""), parse_arm_spec("quant=int8wo"))
    assert parse_arm_spec("quant=off").run_of(quantized).quant is None


def test_torchs_notice_about_torchaos_enums_is_dropped_and_nothing_else():
    import logging

    from torchperf_tui.engine.hardware.torch_notices import PYTREE_LOGGER, quiet_torch_notices

    quiet_torch_notices()
    quiet_torch_notices()  # once is enough: a second call adds no second filter
    logger = logging.getLogger(PYTREE_LOGGER)
    assert sum(type(f).__name__ == "DropEnumNotice" for f in logger.filters) == 1
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    logger.addHandler(handler)  # torch's loggers do not propagate to the root's
    try:
        logger.warning("%s is an Enum subclass and is now natively supported by torch.compile as an opaque value type.",
                       "<enum 'KernelPreference'>")
        logger.warning("a notice a user should see")
    finally:
        logger.removeHandler(handler)
    assert seen == ["a notice a user should see"]


def test_an_arms_attention_implementation_makes_it_another_run_and_builds_the_model_with_it():
    from torchperf_tui.engine.measurements.ab_arms import parse_arm_spec, same_arms
    from torchperf_tui.engine.workloads.models import build_model

    llama = BenchConfig(model="hf:llama")
    assert parse_arm_spec("attn=flex").attn == "flex_attention"  # an alias
    assert not same_arms(llama, parse_arm_spec("attn=eager"), parse_arm_spec("attn=sdpa"))
    assert parse_arm_spec("attn=default").run_of(BenchConfig(model="hf:llama", attn="eager")).attn is None
    model = build_model("hf:llama", model_args=(("num_hidden_layers", "1"), ("hidden_size", "64"),
                                                ("intermediate_size", "128"), ("num_attention_heads", "4"),
                                                ("num_key_value_heads", "4"), ("vocab_size", "256")), attn="eager")
    assert model.config._attn_implementation == "eager"


def test_a_quantized_runs_mlflow_run_has_its_scheme_and_its_drift():
    from torchperf_tui.engine.measurements.timing import run_benchmark
    from torchperf_tui.engine.records.history_records import record_from_timing
    from torchperf_tui.engine.records.mlflow_runs import describe_record

    result = run_benchmark(BenchConfig(model=MLP, input_shape=(8, 32), iters=3, warmup=0, quant="int8wo"))
    content = describe_record(record_from_timing(result, fingerprint={}), saved=False)
    metrics = {key: value for key, value, _ in content.metrics}
    assert content.params["quant"] == "int8wo" and "attn" not in content.params
    assert metrics["drift.sqnr_db"] == pytest.approx(result.drift.sqnr_db)
    assert metrics["drift.max_abs_error"] == pytest.approx(result.drift.max_abs_error)
