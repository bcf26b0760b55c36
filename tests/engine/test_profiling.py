import json
from types import SimpleNamespace

import pytest
import torch

from torchperf_tui.core.errors import ShapeError, TorchperfError
from torchperf_tui.engine.analysis.profiling import (ITERATION_LABEL, OpStat, profile_callable, profile_model,
                                            sort_ops, summarise_events)
from torchperf_tui.engine.measurements.bench_config import BenchConfig

TINY = "tests.tinymodels:tiny_cnn"


def _event(key, count=1, self_cpu=0.0, cpu_total=0.0, **extra):
    return SimpleNamespace(key=key, count=count, self_cpu_time_total=self_cpu, cpu_time_total=cpu_total,
                           input_shapes=extra.pop("input_shapes", None), self_cpu_memory_usage=0,
                           is_user_annotation=False, **extra)


def test_summarise_reads_new_and_old_device_time_names_and_drops_annotations():
    new = _event("aten::conv2d", 3, 300.0, 900.0, self_device_time_total=1500.0, device_time_total=2000.0,
                 self_device_memory_usage=4096, input_shapes=[[1, 3, 8, 8]])
    old = _event("aten::addmm", 2, 50.0, 60.0, self_cuda_time_total=700.0, cuda_time_total=800.0,
                 self_cuda_memory_usage=-512)
    note = _event(f"{ITERATION_LABEL} 0", 1, 5.0, 2000.0)
    ops = summarise_events([new, old, note])
    assert [op.name for op in ops] == ["aten::conv2d", "aten::addmm"]
    conv, addmm = ops
    assert conv.calls == 3 and conv.self_cpu_ms == pytest.approx(0.3) and conv.cpu_total_ms == pytest.approx(0.9)
    assert conv.self_device_ms == pytest.approx(1.5) and conv.self_device_memory_bytes == 4096
    assert conv.input_shapes == "[[1, 3, 8, 8]]"
    assert addmm.self_device_ms == pytest.approx(0.7) and addmm.device_total_ms == pytest.approx(0.8)
    assert addmm.self_device_memory_bytes == -512


def test_device_total_counts_kernel_rows_only():
    from torchperf_tui.engine.analysis.profiling import total_self_device_ms
    op = OpStat("aten::conv2d", 1, 0.1, 0.2, 1.0, 1.0, "", 0, 0, kind="op")
    kernel = OpStat("implicit_gemm", 1, 0.0, 0.0, 1.0, 1.0, "", 0, 0, kind="kernel")
    assert total_self_device_ms([op, kernel]) == 1.0
    assert total_self_device_ms([op]) == 1.0
    kernel_event = _event("implicit_gemm", self_device_time_total=10.0, device_type=SimpleNamespace(name="CUDA"))
    assert summarise_events([kernel_event])[0].kind == "kernel"


def test_sort_by_any_key():
    a = OpStat("a", 5, 1.0, 3.0, 9.0, 9.0, "", 100, 0)
    b = OpStat("b", 1, 2.0, 2.0, 1.0, 1.0, "", 300, 0)
    assert [o.name for o in sort_ops([a, b], "self_cpu")] == ["b", "a"]
    assert [o.name for o in sort_ops([a, b], "self_device")] == ["a", "b"]
    assert [o.name for o in sort_ops([a, b], "calls")] == ["a", "b"]
    assert [o.name for o in sort_ops([a, b], "self_cpu_memory")] == ["b", "a"]
    with pytest.raises(TorchperfError):
        sort_ops([a], "bogus")


def test_profile_model_on_cpu_gives_top_ops_and_a_perfetto_trace(tmp_path):
    path = tmp_path / "trace.json"
    cfg = BenchConfig(model=TINY, input_shape=(2, 3, 16, 16), device="cpu")
    result = profile_model(cfg, iters=3, warmup=1, trace_path=str(path))
    assert result.iters == 3 and result.activities == ["cpu"] and result.sort_by == "self_cpu"
    names = [op.name for op in result.ops]
    assert any("conv" in n for n in names) and any("addmm" in n or "linear" in n for n in names)
    assert not any(n.startswith(ITERATION_LABEL) for n in names)
    selfs = [op.self_cpu_ms for op in result.ops]
    assert selfs == sorted(selfs, reverse=True) and selfs[0] > 0
    conv = next(op for op in result.ops if op.name == "aten::conv2d")
    assert conv.calls == 3 and "[2, 3, 16, 16]" in conv.input_shapes  # record_shapes, grouped by shape
    assert result.total_self_cpu_ms == pytest.approx(sum(selfs))
    assert result.top(2) == result.ops[:2]
    assert result.trace_path == str(path)
    trace = json.loads(path.read_text())
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    assert any(e.get("name", "").startswith(ITERATION_LABEL) for e in events)  # iterations marked
    assert any(e.get("name") == "aten::conv2d" for e in events)
    assert result.to_dict(top=2)["ops"][0]["name"] == result.ops[0].name


def test_profile_without_trace_and_default_path(tmp_path, monkeypatch):
    ops, facts = profile_callable(lambda: torch.ones(64, 64) @ torch.ones(64, 64), iters=2, warmup=0,
                                  trace_path=False)
    assert facts["trace_path"] is None and any(op.name == "aten::mm" for op in ops)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    _, facts = profile_callable(lambda: torch.ones(4) + 1, iters=1, warmup=0, label="my.mod:factory")
    assert facts["trace_path"].startswith(str(tmp_path)) and facts["trace_path"].endswith(".json")
    assert json.loads(open(facts["trace_path"]).read())


def test_profile_cancels_between_iterations():
    calls = []
    ops, facts = profile_callable(lambda: calls.append(torch.ones(8).sum()), iters=10, warmup=1,
                                  trace_path=False, should_cancel=lambda: len(calls) >= 3)
    assert facts["cancelled"] and facts["iters"] == 2 and len(calls) == 3


def test_rejected_shape_is_a_shape_error():
    with pytest.raises(ShapeError):
        profile_model(BenchConfig(model=TINY, input_shape=(1, 5, 8, 8), device="cpu"), iters=1, warmup=0,
                      trace_path=False)


@pytest.mark.gpu
def test_gpu_profile_has_device_times_and_a_trace(tmp_path):
    cfg = BenchConfig(model=TINY, input_shape=(8, 3, 64, 64), device="cuda")
    result = profile_model(cfg, iters=3, warmup=2, trace_path=str(tmp_path / "t.json"))
    assert result.activities == ["cpu", "cuda"] and result.sort_by == "self_device"
    assert result.total_self_device_ms > 0
    assert result.ops[0].self_device_ms > 0
    kernels = [op for op in result.ops if op.kind == "kernel"]
    assert kernels and all(k.self_cpu_ms == 0 for k in kernels)
    # ops' self device time repeats their kernels' time: the total counts the kernels only
    assert result.total_self_device_ms == pytest.approx(sum(k.self_device_ms for k in kernels))
    assert any(op.kind == "op" and op.self_device_memory_bytes > 0 for op in result.ops)
    devs = [op.self_device_ms for op in result.ops]
    assert devs == sorted(devs, reverse=True)
    text = (tmp_path / "t.json").read_text()
    assert json.loads(text) and "kernel" in text.lower()
