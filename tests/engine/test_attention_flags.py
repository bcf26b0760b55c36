"""The SDPA backends and float32 matmul precision as flags: parsed (CLI, SPEC), applied and put back, described,
kept in the history record; a set the documented constraints rule out refused in one line."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from tests.records import ENV
from torchperf_tui.core import attention_settings
from torchperf_tui.engine.measurements import attention_flags as attn
from torchperf_tui.engine.measurements.ab_arms import parse_arm_spec, same_arms
from torchperf_tui.engine.measurements.flags import Flags, applied_flags, asked_state, inert_flags
from torchperf_tui.core.errors import FlagError
from torchperf_tui.wording.history import history_line


def test_a_set_is_written_one_way_whatever_the_order_or_the_alias():
    assert attention_settings.parse_sdpa("math+flash") == "flash+math"
    assert attention_settings.parse_sdpa("Mem-Efficient+MATH") == "efficient+math"
    assert (attention_settings.parse_sdpa("flash+efficient+cudnn+math") == attention_settings.SDPA_ALL
            == attention_settings.parse_sdpa("any"))
    for bad in ("fast", "", "flash+"):
        with pytest.raises(FlagError, match="sdpa"):
            attention_settings.parse_sdpa(bad)
    with pytest.raises(FlagError, match="highest, high, medium"):
        attention_settings.parse_matmul_precision("low")


def test_the_set_and_the_precision_are_applied_and_put_back():
    before = Flags.current()
    assert (before.sdpa, before.matmul_precision) == ("all", "highest")
    wanted = Flags().replace(sdpa="math", matmul_precision="medium")
    with applied_flags(wanted):
        assert not torch.backends.cuda.flash_sdp_enabled() and torch.backends.cuda.math_sdp_enabled()
        assert not torch.backends.cuda.mem_efficient_sdp_enabled()
        assert torch.get_float32_matmul_precision() == "medium"
        inside = Flags.current()
    assert (inside.sdpa, inside.matmul_precision, inside.tf32_matmul) == ("math", "medium", True)
    assert inside == asked_state(wanted).flags  # a precision below highest has TF32 on: no false state note
    assert Flags.current() == before
    assert torch.backends.cuda.flash_sdp_enabled() and torch.get_float32_matmul_precision() == "highest"


def test_tf32_alone_keeps_highest_and_leaves_the_precision_readable():
    with applied_flags(Flags(tf32_matmul=True)):
        now = Flags.current()
    assert (now.tf32_matmul, now.matmul_precision) == (True, "highest")
    assert Flags.current().tf32_matmul is False


def test_describe_names_the_set_and_the_precision():
    flags = Flags().replace(sdpa="flash+math", matmul_precision="high")
    assert flags.describe("cpu", threads_used=2) == "sdpa=flash+math, matmul=high, threads=2 (default)"
    assert Flags().replace(sdpa="math").describe("cpu", against=Flags().replace(sdpa="flash")) == "sdpa=math"


def test_the_documented_constraints_refuse_a_set_with_no_backend_on_the_device():
    assert "only on CUDA" in attn.sdpa_refusal("efficient", "cpu")
    assert "exist only on CUDA" in attn.sdpa_refusal("efficient+cudnn", "cpu")
    assert attn.sdpa_refusal("flash+efficient", "cpu") is None  # flash exists on the CPU
    assert "float16 or bfloat16" in attn.sdpa_refusal("flash", "cuda", "float32")
    assert attn.sdpa_refusal("flash", "cuda", "bfloat16") is None
    assert attn.sdpa_refusal("flash", "cuda", "float32", amp="bf16") is None
    assert attn.sdpa_refusal("efficient", "cuda", "float32") is None
    assert inert_flags(Flags().replace(sdpa="flash+efficient"), "cpu") == [
        "sdpa=flash+efficient: efficient attention does not exist on the CPU; allowing it there changes nothing"]


def test_the_compare_spec_takes_sdpa_and_matmul_precision():
    arm = parse_arm_spec("sdpa=math+flash,matmul_precision=high")
    assert (arm.flags.sdpa, arm.flags.matmul_precision) == ("flash+math", "high")
    with pytest.raises(FlagError, match="unknown backend 'fast'"):
        parse_arm_spec("sdpa=fast")
    with pytest.raises(FlagError, match="given twice"):
        parse_arm_spec("sdpa=math,sdpa=flash")
    from torchperf_tui.engine.measurements.bench_config import BenchConfig

    base = BenchConfig(model="m")  # float32, NCHW, fixed shapes, inference: what an arm resolves against
    assert same_arms(base, parse_arm_spec("sdpa=flash+math"), parse_arm_spec("sdpa=math+flash"))
    assert not same_arms(base, parse_arm_spec("sdpa=math"), parse_arm_spec("sdpa=flash"))


def test_the_cli_takes_sdpa_and_matmul_precision_on_every_command_with_flags(capsys):
    from torchperf_tui.cli.common import flags_from as _flags_from
    from torchperf_tui.cli.args import build_parser

    parser = build_parser()
    for command in ("bench", "compare", "profile", "throughput", "roofline", "determinism", "memsnap"):
        extra = ["--a", "", "--b", ""] if command == "compare" else []
        args = parser.parse_args([command, "resnet18", *extra, "--sdpa", "math+flash", "--matmul-precision", "high"])
        flags = _flags_from(args)
        assert (flags.sdpa, flags.matmul_precision) == ("flash+math", "high"), command
    assert _flags_from(parser.parse_args(["bench", "resnet18"])) == Flags()
    with pytest.raises(SystemExit) as exit_:
        parser.parse_args(["bench", "resnet18", "--sdpa", "fast"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unknown backend 'fast'" in err


def test_the_history_record_keeps_the_set_and_the_precision():
    from torchperf_tui.core.stats import compute_stats
    from torchperf_tui.engine.measurements.timing import TimingResult
    from torchperf_tui.engine.records.history_records import HistoryRecord, record_from_timing

    flags = Flags().replace(sdpa="flash", matmul_precision="high")
    samples = [4.0, 5.0, 6.0]
    result = TimingResult(model="hf:llama", device="cpu", input_shape=(1, 64), dtype="float32", channels_last=False,
                          flags=flags, first_iter_ms=40.0, warmup_ms=[5.0], samples_ms=samples,
                          stats=compute_stats(samples, batch=1, first_iter_ms=40.0), cancelled=False,
                          started_at=1_800_000_000.0, duration_s=2.0, timer="perf_counter")
    record = record_from_timing(result, fingerprint=ENV)
    again = HistoryRecord.from_dict(record.to_dict())
    assert (again.flags["sdpa"], again.flags["matmul_precision"]) == ("flash", "high")
    assert "sdpa=flash, matmul=high" in again.flags_text and "sdpa=flash" in history_line(again)


def _site(name, phase, a, b, passed_a=None, passed_b=None):
    run = lambda allowed, ran, passed: SimpleNamespace(allowed=allowed, ran=ran, us_per_iter=100.0,
                                                       passed_over=passed or {})
    return SimpleNamespace(site=name, phase=phase, a=run(*a, passed_a), b=run(*b, passed_b),
                           changed=a[1] != b[1])


def test_a_fallback_is_said_with_its_reason_its_sites_gathered():
    from torchperf_tui.wording.kernels import attention_cells, attention_changed_text, fallback_lines

    sites = [_site(f"model.layers.{i}.self_attn", "fwd", ("math", "math"), ("flash+math", "math"),
                   passed_b={"flash": "a bool mask"}) for i in range(3)]
    result = SimpleNamespace(attention=sites, training=False)
    assert fallback_lines(result) == [
        "B: flash allowed, math ran at model.layers.0.self_attn and 2 more sites: a bool mask"]
    assert attention_changed_text(result) == "0 of 3 attention sites changed kernel"
    assert attention_cells(result)[0] == ("model.layers.0.self_attn", "math (bmm + softmax), allowed math",
                                          "math (bmm + softmax), allowed flash+math", "100", "100", "")
