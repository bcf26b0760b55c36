"""The quantization prediction (engine/analysis/quant_prediction.py) on GEMM shapes with a known answer, the model's
ratio with what no Linear owns held fixed, and what it says where a ceiling is missing."""

from __future__ import annotations

import pytest

from torchperf_tui.engine.analysis.quant_prediction import gemm_time_ms, predict, ratio_of_quantized
from torchperf_tui.engine.workloads.complexity_result import LayerStat

COMPUTE = {"float32": 1e12, "int8": 4e12}  # ops/s
COPY = 1e11  # bytes/s


def linear(name: str, m: int, k: int, n: int) -> LayerStat:
    return LayerStat(name=name, type="Linear", input_shape=(m, k), output_shape=(m, n), params=k * n + n,
                     flops=2 * m * k * n, output_bytes=4 * m * n)


def test_a_decode_gemm_is_memory_bound_and_int8_weights_read_a_quarter_of_the_bytes():
    m, k, n = 1, 4096, 4096
    now, bound = gemm_time_ms(m, k, n, COMPUTE["float32"], COPY, 4, 4)
    assert bound == "memory" and now == pytest.approx((k * n * 4 + (m * k + m * n) * 4) / COPY * 1e3)
    prediction = predict([linear("proj", m, k, n)], "int8wo", "float32", COMPUTE, COPY)
    (layer,) = prediction.layers
    assert (layer.m, layer.k, layer.n, layer.now_bound, layer.quantized_bound) == (1, 4096, 4096, "memory", "memory")
    assert layer.quantized_ms == pytest.approx((k * n * 1 + (m * k + m * n) * 4) / COPY * 1e3)
    assert layer.now_ms / layer.quantized_ms == pytest.approx(4.0, rel=0.01)


def test_a_large_gemm_is_compute_bound_weight_only_gains_nothing_and_int8_activations_gain_the_ceilings_ratio():
    m, k, n = 8192, 4096, 4096
    layers = [linear("big", m, k, n)]
    wo = predict(layers, "int8wo", "float32", COMPUTE, COPY).layers[0]
    assert wo.now_bound == wo.quantized_bound == "compute"
    assert wo.now_ms == pytest.approx(2 * m * k * n / 1e12 * 1e3) and wo.quantized_ms == pytest.approx(wo.now_ms)
    dq = predict(layers, "int8dq", "float32", COMPUTE, COPY).layers[0]
    assert dq.quantized_ms == pytest.approx(2 * m * k * n / 4e12 * 1e3)  # the int8 ceiling is 4x the float32 one


def test_the_models_ratio_holds_what_no_linear_owns_fixed():
    m, k, n = 1, 4096, 4096
    prediction = predict([linear("a", m, k, n), linear("b", m, k, n)], "int8wo", "float32", COMPUTE, COPY)
    now, quantized = prediction.now_ms, prediction.quantized_ms
    total = now + 5.0  # 5 ms of the pass in what is not a Linear
    assert prediction.ratio(total) == pytest.approx((5.0 + quantized) / total)
    # from a measured quantized pass instead (bench --quant): the same model, solved the other way
    assert ratio_of_quantized(prediction, 5.0 + quantized) == pytest.approx((5.0 + quantized) / total)


def test_only_the_layers_the_scheme_converts_are_predicted():
    layers = [linear("big", 16, 256, 256), linear("small", 16, 32, 4), linear("ragged", 16, 100, 64),
              LayerStat(name="conv", type="Conv2d", input_shape=(1, 3, 8, 8), output_shape=(1, 8, 8, 8), params=224,
                        flops=1, output_bytes=1)]
    assert [layer.name for layer in predict(layers, "int8wo", "float32", COMPUTE, COPY).layers] == ["big", "ragged"]
    grouped = predict(layers, "int4wo", "bfloat16", {"bfloat16": 1e12}, COPY)  # groups of 128: 100 is not whole
    assert [layer.name for layer in grouped.layers] == ["big"]
    converted = predict(layers, "int8wo", "float32", COMPUTE, COPY, converted={"ragged"})  # the run's own list
    assert [layer.name for layer in converted.layers] == ["ragged"]


def test_a_missing_ceiling_is_said_not_guessed():
    layers = [linear("big", 16, 256, 256)]
    fp8 = predict(layers, "fp8", "bfloat16", {"bfloat16": 1e12}, COPY)
    assert not fp8.layers and "no measured ceiling for float8" in fp8.missing and fp8.ratio(10.0) is None
    no_int8 = predict(layers, "int8dq", "float32", {"float32": 1e12}, COPY)
    assert "int8" in no_int8.missing and "ceilings --refresh" in no_int8.missing
    no_copy = predict(layers, "int8wo", "float32", COMPUTE, None)
    assert "the copy bandwidth" in no_copy.missing


def test_an_ab_of_a_scheme_against_none_has_its_prediction_beside_the_measured_ratio(monkeypatch):
    from torchperf_tui.engine.hardware.ceilings import Ceiling, CeilingsResult
    from torchperf_tui.engine.measurements.ab_arms import parse_arm_spec
    from torchperf_tui.engine.measurements.abtest import run_ab
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.measure import runners
    from torchperf_tui.wording.numerics import ab_numerics_rows

    kept = CeilingsResult(device="cpu", key="cpu", measured_at=0.0, ceilings=[
        Ceiling("compute", "float32", 1e11, "2048x2048x2048", 0.1, 3), Ceiling("copy", "float32", 1e10, "256 MiB", 0.1, 3)])
    monkeypatch.setattr(runners, "kept_for", lambda device, on_corrupt=None: kept)  # this box's own are not read
    base = BenchConfig(model="tests.tinymodels:quant_mlp", input_shape=(8, 32))
    result = run_ab(base, parse_arm_spec(""), parse_arm_spec("quant=int8wo"), blocks=6, per_block=2)
    runners.ab_prediction(result)
    assert [layer.name for layer in result.prediction.layers] == ["body.0", "body.2"]  # what the run converted
    assert result.predicted_ratio == pytest.approx(result.prediction.ratio(result.a.median_ms))
    line = dict((label, value) for label, value, _ in ab_numerics_rows(result))["prediction"]
    assert line.startswith(f"B/A {result.predicted_ratio:.2f} predicted · {result.verdict.ratio:.2f} measured · "
                           "int8wo on 2 Linear")
    monkeypatch.setattr(runners, "kept_for", lambda device, on_corrupt=None: None)
    runners.ab_prediction(result)
    assert result.predicted_ratio is None and "no measured ceilings kept for cpu" in result.prediction.missing
