"""Exports that fleets ingest: github-action-benchmark's custom JSON (latencies smaller-is-better, rates
bigger-is-better), named like for like, and rows of the PyTorch OSS benchmark database's v3 schema; every kind of
record, cancelled runs left out, no non-finite number in the text, an empty history as an empty list."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from tests.one_line import one_line_error
from tests.records import ENV, make_record
from torchperf_tui.engine.measurements.flags import Flags
from torchperf_tui.core.stats import TimingStats
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.wording.history_export import export_records
from torchperf_tui.engine.records.fleet_records import setup_name
from torchperf_tui.engine.records.history_records import HistoryRecord

TTFT = {"n": 5, "mean_ms": 41.0, "std_ms": 1.0, "min_ms": 39.0, "max_ms": 44.0, "p50_ms": 40.0, "p90_ms": 43.0,
        "p99_ms": 44.0, "iqr_ms": 2.0, "fps": 25.0, "first_iter_ms": None}


def load(text: str):
    """The export parsed as strict JSON: NaN or Infinity in it fail here."""
    def refuse(name):
        raise AssertionError(f"{name} in the export")

    return json.loads(text, parse_constant=refuse)


def generate_record(**details) -> HistoryRecord:
    record = make_record(12.0, model="hf:llama")
    return dataclasses.replace(record, kind="generate", input_shape=(1, 8), samples_ms=[11.0, 12.0, 13.0],
                               details={"source": "hf", "model_args": "num_hidden_layers=2", "prompt_len": 8,
                                        "new_tokens": 4, "ttft_ms": [39.0, 40.0, 41.0, 42.0, 44.0],
                                        "ttft_stats": dict(TTFT), "tokens_per_s": 80.0, "step": "infer",
                                        "inputs": "input_ids 1x8 int64 (ids < 50,257), attention_mask 1x8 int64 "
                                                  "(all ones)", **details})


def ab_arms(b_flags: dict | None = None) -> list[HistoryRecord]:
    a, b = make_record(10.0), make_record(8.0, flags=b_flags or Flags(cudnn_benchmark=True).to_dict())
    return [dataclasses.replace(r, kind="ab", details={"arm": arm, "pair": "x", "verdict": {"p": 0.01},
                                                       "summary": "B is 20 % faster"})
            for r, arm in ((a, "A"), (b, "B"))]


# -- github-benchmark ----------------------------------------------------------------------------------------

def test_github_benchmark_latency_is_each_p50_in_ms_with_its_range_and_the_rest_in_extra():
    entries = load(export_records([make_record(10.0)], "github-benchmark"))
    assert len(entries) == 1
    entry = entries[0]
    assert set(entry) == {"name", "unit", "value", "range", "extra"}
    assert entry["unit"] == "ms" and entry["value"] == 10.0 and entry["range"] == "± 0.5"  # half the IQR of 1.0
    assert entry["name"] == "resnet18 1x3x224x224 float32 [defaults] on cuda NVIDIA H100 80GB HBM3 - p50"
    assert all(isinstance(entry[k], str) for k in ("name", "unit", "range", "extra"))
    assert "p90 12 ms" in entry["extra"] and "p99 20 ms" in entry["extra"] and "n=3" in entry["extra"]


def test_github_benchmark_throughput_is_samples_per_second_at_the_median_bigger_is_better():
    record = make_record(10.0)
    entries = load(export_records([record], "github-benchmark", "throughput"))
    assert [(e["unit"], e["name"].rsplit(" - ", 1)[1]) for e in entries] == [("samples/s", "samples/s at p50")]
    assert entries[0]["value"] == pytest.approx(record.stats.fps_at_median) == pytest.approx(100.0)


def test_the_same_set_up_has_one_name_across_runs_hosts_and_times_and_the_newest_run_is_kept():
    old = make_record(10.0)
    new = dataclasses.replace(make_record(12.0), created_at="2026-12-01T08:00:00+00:00",
                              fingerprint={**ENV, "hostname": "other-box", "torch": "2.15.0"},
                              flags_text="threads=2 (default)")
    assert setup_name(old) == setup_name(new)
    # read back from the history file, the name is the same
    assert setup_name(HistoryRecord.from_dict(json.loads(json.dumps(new.to_dict())))) == setup_name(new)
    entries = load(export_records([old, new], "github-benchmark"))
    assert len(entries) == 1 and entries[0]["value"] == 12.0 and new.id in entries[0]["extra"]


@pytest.mark.parametrize("change", [
    {"model": "resnet50"}, {"dtype": "float16"}, {"input_shape": (8, 3, 224, 224)}, {"channels_last": True},
    {"flags": Flags(cudnn_benchmark=True).to_dict()}, {"fingerprint": {**ENV, "device_name": "NVIDIA A100"}},
    {"device": "cpu"}, {"details": {"model_args": "depth=2"}}, {"details": {"step": "train", "optimizer": "adamw"}},
    {"details": {"amp": "bf16"}}, {"details": {"compile_mode": "max-autotune"}},
    {"details": {"shapes": "random:192-288"}}, {"kind": "ab"}, {"details": {"quant": "int8wo"}},
    {"details": {"attn": "eager"}},
], ids=lambda change: next(iter(change)) + (f"={next(iter(change['details']))}" if "details" in change else ""))
def test_any_other_set_up_gets_another_name(change):
    base = make_record(10.0)
    other = dataclasses.replace(base, **change)
    assert setup_name(other) != setup_name(base)
    assert len(load(export_records([base, other], "github-benchmark"))) == 2


def test_a_generation_with_a_static_kv_cache_is_another_set_up_and_the_default_cache_names_none():
    def generation(**details):
        return dataclasses.replace(make_record(), kind="generate", details={"new_tokens": 8, **details})

    assert setup_name(generation(cache="static")) != setup_name(generation(cache="dynamic"))
    assert "cache static, 8 new tokens [" in setup_name(generation(cache="static"))
    # a record from before the cache was kept names the same set-up as one with the default cache
    assert setup_name(generation()) == setup_name(generation(cache="dynamic"))
    assert "quant int8wo, attn sdpa [" in setup_name(dataclasses.replace(make_record(), details={
        "quant": "int8wo", "attn": "sdpa"}))


def test_on_the_cpu_the_thread_count_is_the_set_up_and_a_cuda_flag_is_not():
    def cpu(**flags):
        return dataclasses.replace(make_record(), device="cpu", flags=Flags(**flags).to_dict(),
                                   fingerprint={**ENV, "device_name": "Test CPU"})

    assert "[threads=2] on cpu Test CPU" in setup_name(cpu(num_threads=2))
    assert setup_name(cpu(num_threads=1)) != setup_name(cpu(num_threads=2))
    assert setup_name(cpu(num_threads=2, cudnn_benchmark=True)) == setup_name(cpu(num_threads=2))
    gpu = dataclasses.replace(make_record(), flags=Flags(num_threads=4, tf32_matmul=True).to_dict())
    assert "[TF32 matmul=on] on cuda" in setup_name(gpu)


def test_a_generation_exports_ttft_and_per_token_latency_and_tokens_per_second():
    record = generate_record()
    latency = load(export_records([record], "github-benchmark"))
    assert [(e["name"].rsplit(" - ", 1)[1], e["value"]) for e in latency] == [("TTFT p50", 40.0),
                                                                               ("per token p50", 12.0)]
    assert latency[0]["name"].startswith("generate hf:llama (num_hidden_layers=2) 1x8 float32 4 new tokens [")
    rates = load(export_records([record], "github-benchmark", "throughput"))
    assert [(e["unit"], e["value"]) for e in rates] == [("tokens/s", 80.0)]


def test_compare_arms_export_as_compare_each_under_its_own_flags():
    entries = load(export_records(ab_arms(), "github-benchmark"))
    assert [e["value"] for e in entries] == [10.0, 8.0]
    assert all(e["name"].startswith("compare resnet18 ") for e in entries)
    assert "[cudnn.benchmark=on]" in entries[1]["name"] and "[defaults]" in entries[0]["name"]


def test_cancelled_runs_are_left_out_of_both_fleet_formats():
    cancelled = dataclasses.replace(make_record(5.0, model="cancelled_net"), cancelled=True)
    for fmt in ("github-benchmark", "pytorch-v3"):
        text = export_records([cancelled, make_record(10.0)], fmt)
        assert "cancelled_net" not in text and load(text)


def test_non_finite_values_never_reach_the_json():
    nan, inf = math.nan, math.inf
    stats = TimingStats(n=3, mean_ms=nan, std_ms=nan, min_ms=1.0, max_ms=inf, p50_ms=10.0, p90_ms=inf, p99_ms=nan,
                        iqr_ms=nan, fps=nan)
    record = dataclasses.replace(make_record(), stats=stats, samples_ms=[9.0, nan, inf, 10.0],
                                 details={"duration": nan}, duration_s=inf)
    no_p50 = dataclasses.replace(make_record(model="no_p50"), stats=dataclasses.replace(stats, p50_ms=nan))
    generation = generate_record(tokens_per_s=inf, ttft_stats={**TTFT, "p90_ms": inf}, ttft_ms=[nan, 40.0, True])
    records = [record, no_p50, generation]
    for fmt, metric in (("github-benchmark", None), ("github-benchmark", "throughput"), ("pytorch-v3", None)):
        text = export_records(records, fmt, metric)
        assert "NaN" not in text and "Infinity" not in text
        load(text)
    latency = load(export_records(records, "github-benchmark"))
    assert [e["value"] for e in latency] == [10.0, 40.0, 12.0]  # the bench's p50, the generation's TTFT and per token
    assert "range" not in latency[0] and "no_p50" not in json.dumps(latency)
    assert load(export_records(records, "github-benchmark", "throughput")) == []
    rows = load(export_records(records, "pytorch-v3"))
    samples = [r for r in rows if r["metric"]["name"] == "latency_ms"]
    assert samples[0]["metric"]["benchmark_values"] == [9.0, 10.0]
    assert {r["metric"]["name"] for r in rows if r["model"]["name"] == "resnet18"} == {"latency_ms", "latency_p50_ms"}
    ttft = {r["metric"]["name"]: r["metric"]["benchmark_values"] for r in rows
            if r["metric"]["name"].startswith("ttft")}
    assert ttft == {"ttft_ms": [40.0], "ttft_p50_ms": [40.0], "ttft_p99_ms": [44.0], "ttft_mean_ms": [41.0]}
    no_ttft = generate_record(ttft_stats={**TTFT, "p50_ms": nan})  # no median: that latency is not exported at all
    assert "TTFT" not in export_records([no_ttft], "github-benchmark")
    assert "ttft" not in export_records([no_ttft], "pytorch-v3")


def test_an_empty_history_exports_an_empty_list():
    for fmt, metric in (("github-benchmark", None), ("github-benchmark", "throughput"), ("pytorch-v3", None)):
        assert export_records([], fmt, metric) == "[]\n"


def test_metric_is_github_benchmarks_choice_only_and_an_unknown_one_is_refused():
    assert "pytorch-v3 carries every metric" in one_line_error(TorchperfError, export_records, [make_record()],
                                                              "pytorch-v3", "latency")
    assert "csv has no choice" in one_line_error(TorchperfError, export_records, [make_record()], "csv", "latency")
    assert "choose one of latency, throughput" in one_line_error(TorchperfError, export_records, [make_record()],
                                                                 "github-benchmark", "memory")
    assert "github-benchmark, pytorch-v3" in one_line_error(TorchperfError, export_records, [make_record()], "xlsx")


# -- pytorch-v3 ----------------------------------------------------------------------------------------------

def _string_map(value) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def check_v3_row(row: dict) -> None:
    """The v3 schema's fields with their types (pytorch/test-infra clickhouse_db_schema/oss_ci_benchmark_v3)."""
    assert set(row) == {"benchmark", "model", "inputs", "runners", "dependencies", "metric", "timestamp"}
    benchmark, model, metric = row["benchmark"], row["model"], row["metric"]
    assert set(benchmark) == {"name", "mode", "dtype", "extra_info"} and benchmark["name"].startswith("torchperf-tui ")
    assert benchmark["mode"] in ("inference", "training") and isinstance(benchmark["dtype"], str)
    assert _string_map(benchmark["extra_info"]) and benchmark["extra_info"]["setup"]
    assert set(model) == {"name", "type", "backend", "origins", "extra_info"} and model["name"]
    assert all(isinstance(model[k], str) for k in ("name", "type", "backend"))
    assert isinstance(model["origins"], list) and all(isinstance(o, str) for o in model["origins"])
    assert _string_map(model["extra_info"])
    assert row["inputs"] and all(isinstance(name, str) and set(value) == {"dtype", "extra_info"}
                                 and isinstance(value["dtype"], str) and _string_map(value["extra_info"])
                                 for name, value in row["inputs"].items())
    runner, = row["runners"]
    assert {"name", "type", "extra_info"} <= set(runner) <= {"name", "type", "cpu_info", "gpu_info", "gpu_count",
                                                             "extra_info"}
    assert all(isinstance(runner[k], str) for k in set(runner) - {"gpu_count", "extra_info"})
    assert isinstance(runner.get("gpu_count", 0), int) and _string_map(runner["extra_info"])
    assert all(set(dep) == {"version"} and isinstance(dep["version"], str) for dep in row["dependencies"].values())
    assert set(metric) == {"name", "benchmark_values", "extra_info"} and isinstance(metric["name"], str)
    values = metric["benchmark_values"]
    assert values and all(isinstance(v, float) and math.isfinite(v) for v in values)
    assert _string_map(metric["extra_info"]) and metric["extra_info"]["better"] in ("smaller", "bigger")
    assert isinstance(row["timestamp"], int) and not isinstance(row["timestamp"], bool)


def test_pytorch_v3_rows_have_the_schemas_keys_and_types_for_every_kind_of_record():
    env = {**ENV, "transformers": "5.2.0", "timm": None, "gpu_count": 1, "cpu": "Test CPU"}
    records = [dataclasses.replace(make_record(10.0), fingerprint=env), *ab_arms(), generate_record()]
    rows = load(export_records(records, "pytorch-v3"))
    for row in rows:
        check_v3_row(row)
    by_record = {}
    for row in rows:
        by_record.setdefault(row["benchmark"]["extra_info"]["record_id"], []).append(row["metric"]["name"])
    assert by_record[records[0].id] == ["latency_ms", "latency_p50_ms", "latency_p90_ms", "latency_p99_ms",
                                        "latency_mean_ms", "samples_per_s"]
    assert by_record[records[3].id] == ["ttft_ms", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "ttft_mean_ms",
                                        "per_token_ms", "per_token_p50_ms", "per_token_p90_ms", "per_token_p99_ms",
                                        "per_token_mean_ms", "tokens_per_s"]
    assert [row["benchmark"]["name"] for row in rows[::6][:3]] == ["torchperf-tui bench", "torchperf-tui compare",
                                                                   "torchperf-tui compare"]
    first = rows[0]
    assert first["metric"]["benchmark_values"] == [9.0, 10.0, 20.0]  # the samples
    assert first["dependencies"] == {"torch": {"version": "2.14.1"}, "transformers": {"version": "5.2.0"},
                                     "cuda": {"version": "12.8"}, "cudnn": {"version": "9.13.0"},
                                     "driver": {"version": "550.54.15"}, "python": {"version": "3.11.9"}}
    assert first["runners"] == [{"name": "box", "type": "cuda:0", "cpu_info": "Test CPU",
                                 "gpu_info": "NVIDIA H100 80GB HBM3", "gpu_count": 1, "extra_info": {}}]
    assert first["model"]["type"] == "torchvision" and first["model"]["origins"] == ["torchvision"]
    assert first["inputs"] == {"input": {"dtype": "float32", "extra_info": {"shape": "1x3x224x224"}}}
    assert first["timestamp"] == 1795379400  # 2026-11-22T20:30:00Z


def test_pytorch_v3_says_a_token_models_inputs_by_name_and_a_training_steps_mode():
    row = load(export_records([generate_record()], "pytorch-v3"))[0]
    assert row["inputs"] == {"input_ids": {"dtype": "int64", "extra_info": {"shape": "1x8", "note": "ids < 50,257"}},
                             "attention_mask": {"dtype": "int64", "extra_info": {"shape": "1x8", "note": "all ones"}}}
    assert row["model"]["extra_info"] == {"overrides": "num_hidden_layers=2"} and row["model"]["type"] == "hf"
    train = dataclasses.replace(make_record(),
                                details={"step": "train", "optimizer": "adamw", "compile_mode": "default"})
    row = load(export_records([train], "pytorch-v3"))[0]
    assert row["benchmark"]["mode"] == "training" and row["model"]["backend"] == "torch.compile (default)"
    assert row["benchmark"]["extra_info"]["optimizer"] == "adamw"
