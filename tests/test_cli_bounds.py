"""Options with no bound, or accepted when they should be refused (issue 32's hostile findings 2, 6 and 10): each is
one line on stderr and exit 2 where it enters, before a job is sent; the ones only the measurement process can tell
(what a model accepts, what the arms resolve to) are one line and exit 2 from there."""

from __future__ import annotations

import json

import psutil
import pytest

from tests.cli_run import run
from tests.test_cli import TINY
from tests.test_cli_refusals import no_job, refused  # noqa: F401 - no_job is a fixture
from torchperf_tui.core import options
from torchperf_tui.engine.measurements.ab_arms import AA_REMEDY, same_arms_refusal

HOSTILE_COUNTS = ["1e308", "nan", "inf", "-1", "", str(2**63), "9" * 40, "9" * 4000, "9" * 5000]


@pytest.mark.parametrize("argv, message", [
    (["bench", TINY, "--iters", str(options.ITERS_MAX + 1)], f"--iters: must be at most {options.ITERS_MAX:,}"),
    (["bench", TINY, "--iters", "20000000"], f"--iters: must be at most {options.ITERS_MAX:,}"),
    (["bench", TINY, "--warmup", "1000000"], f"warm-up: expected a count 0-{options.WARMUP_MAX:,} or 'auto'"),
    (["roofline", TINY, "--iters", str(2**63)], "--iters: must be at most"),
    (["sweep", TINY, "--iters", str(10**9)], "--iters: must be at most"),
    (["sweep", TINY, "--warmup", str(10**9)], "warm-up: expected a count"),
    (["profile", TINY, "--iters", "100000"], f"--iters: must be at most {options.RECORDED_MAX:,}"),
    (["memsnap", TINY, "--iters", "100000"], f"--iters: must be at most {options.RECORDED_MAX:,}"),
    (["roofline", TINY, "--layers", "--layer-iters", "100000"], "--layer-iters: must be at most"),
    (["determinism", TINY, "--runs", "100000"], "--runs: must be at most"),
    (["bench", TINY, "--modes", "sync", "--per-block", "100000"], "--per-block: must be at most"),
    (["bench", "hf:llama", "--generate", str(2**62)], f"--generate: must be at most {options.ITERS_MAX:,}"),
    (["compare", "hf:llama", "--a", "", "--b", "mkldnn=off", "--generate", str(options.ITERS_MAX + 1)],
     "--generate: must be at most"),
])
def test_iteration_counts_have_an_upper_bound_where_they_enter(capsys, no_job, argv, message):
    assert message in refused(capsys, *argv) and not no_job


@pytest.mark.parametrize("value", HOSTILE_COUNTS)
@pytest.mark.parametrize("option", ["--iters", "--warmup"])
def test_hostile_counts_are_one_line(capsys, no_job, option, value):
    line = refused(capsys, "bench", TINY, option, value)
    assert f"argument {option}" in line and "Error" not in line and not no_job
    assert len(line) < 200  # what was typed is said back cut, never 5,000 digits


@pytest.mark.parametrize("option", ["--threads", "--seq-len", "--batch", "--blocks", "--max-batch"])
@pytest.mark.parametrize("digits", [4000, 5000, -5000])
def test_a_number_of_thousands_of_digits_is_said_back_cut_in_one_line(capsys, no_job, option, digits):
    command = {"--blocks": ["compare", TINY, "--a", "", "--b", "mkldnn=off"], "--max-batch": ["throughput", TINY]}
    value = ("-" if digits < 0 else "") + "9" * abs(digits)
    line = refused(capsys, *command.get(option, ["bench", TINY]), option, value)
    assert len(line) < 300 and "Error" not in line and not no_job, line[:400]


@pytest.mark.parametrize("argv, message", [
    (["bench", TINY, "--seq-len", ""], "sequence length '' is not a whole number"),
    (["bench", TINY, "--seq-len", " "], "is not a whole number"),
    (["bench", TINY, "--shapes", ""], "empty shape schedule"),
    (["bench", TINY, "--shapes", "random:1-99999999999"], "random size range '1-99999999999': HI must be at most"),
    (["bench", TINY, "--shapes", "random:8-16:batch=1-99999999999"], "batch range '1-99999999999': HI must be"),
    (["throughput", TINY, "--max-batch", "9" * 20], f"--max-batch: must be at most {options.MAX_DIM:,}"),
    (["throughput", TINY, "--max-batch", str(options.MAX_DIM + 1), "--slo", "p50=5s"], "--max-batch: must be at most"),
    (["compare", TINY, "--a", "", "--b", "mkldnn=off", "--shapes", " "], "empty shape schedule"),
    (["bench", TINY, "--input", "1xx3x32x32"], "malformed input shape '1xx3x32x32'"),
    (["bench", TINY, "--input", "1x3x32x"], "malformed input shape"),
    (["bench", TINY, "--input", "1,,3,8"], "malformed input shape"),
    (["bench", TINY, "--sdpa", "flash+flash"], "sdpa: flash given twice"),
    (["compare", TINY, "--a", "sdpa=math+math", "--b", ""], "sdpa: math given twice"),
    (["compare", TINY, "--a", "cudnn_benchmark=on,,tf32=on", "--b", ""], "has an empty item"),
    (["compare", TINY, "--a", "mkldnn=off,", "--b", ""], "has an empty item"),
    (["compare", TINY, "--a", "threads=1", "--b", "", "--fail-if-slower", "5"],
     "--fail-if-slower goes with --baseline REF"),
    (["compare", TINY, "--a", "threads=1", "--b", "", "--no-confirm"], "--no-confirm goes with --baseline REF"),
    (["compare", TINY, "--a", "threads=1", "--b", "", "--fail-if-ambiguous"],
     "--fail-if-ambiguous goes with --baseline REF"),
    (["throughput", TINY, "--memory-cap", "100000"], "more than this machine's"),
    (["sweep", TINY, "--memory-cap", "1e308"], "more than this machine's"),
    (["throughput", TINY, "--memory-cap", "inf"], "expected a finite number"),
])
def test_what_was_accepted_and_should_not_be_is_refused_where_it_enters(capsys, no_job, argv, message):
    assert message in refused(capsys, *argv) and not no_job


def test_a_memory_cap_up_to_the_machines_ram_is_taken():
    ram_gib = psutil.virtual_memory().total / 1024**3
    assert options.memory_cap_gib(str(ram_gib * 0.5)) == pytest.approx(ram_gib * 0.5)
    with pytest.raises(options.OptionError, match=r"GiB of RAM; give at most"):
        options.memory_cap_gib(str(ram_gib * 2))


def test_a_compare_arm_the_model_rejects_is_one_line_and_exit_2_as_in_bench(capsys):
    """A training step at batch 1 through resnet18's batch norm on a 1x1 feature map: bench says the model rejected
    the input; compare timed one pass of each arm (to fit the blocks to the budget) outside that mapping, and said
    'internal error' with exit 1."""
    argv = ("resnet18", "--input", "1x3x32x32", "--no-history")
    bench = refused(capsys, "bench", *argv, "--step", "train", "--iters", "2", "--warmup", "0")
    line = refused(capsys, "compare", *argv, "--a", "step=train,optimizer=sgd", "--b", "", "--blocks", "6")
    assert "rejected input 1x3x32x32" in bench and "rejected input 1x3x32x32" in line
    assert "internal error" not in line


def test_arms_found_identical_by_what_they_resolve_to_are_refused(capsys):
    """threads=N against '' where N is the measurement process's own count is one set-up twice: refused as identical
    arms are (unless --aa), from the measurement process, which knows the count."""
    base = ("compare", TINY, "--input", "1x3x8x8", "--blocks", "6", "--per-block", "1", "--no-history")
    code, out, err = run(capsys, *base, "--a", "", "--b", "", "--aa", "--json")
    assert code == 0, err
    default = json.loads(out)["a"]["threads_asked"]  # the count an empty threads setting runs
    if default > options.cpu_count():
        pytest.skip("the measurement process's default thread count is above its CPUs: threads= cannot name it")
    line = refused(capsys, *base, "--a", f"threads={default}", "--b", "")
    assert line == "torchperf-tui: error: " + same_arms_refusal(
        AA_REMEDY, f"threads left empty runs this machine's default, {default}")
    code, out, err = run(capsys, *base, "--a", f"threads={default}", "--b", "", "--aa", "--json")
    assert code == 0 and json.loads(out)["notes"][0].startswith("A/A: both arms identical"), err


def test_a_torchvision_override_too_large_to_fit_is_counted_on_meta_and_refused_before_a_run(capsys):
    """num_classes=99999999999 asked the CPU for 204 TB: past a 32-bit dimension it is refused as it is parsed; below
    that (2000000000 classes, 4 TB of weights) flops counts it on the meta device, and a run refuses it in one line
    before building it."""
    line = refused(capsys, "flops", "resnet18", "--model-args", "num_classes=99999999999")
    assert line == "torchperf-tui: error: resnet18: num_classes=99999999999: it must be at most 2,147,483,647"
    code, out, err = run(capsys, "flops", "resnet18", "--model-args", "num_classes=2000000000", "--json")
    assert code == 0, err
    assert json.loads(out)["params_total"] == 512 * 2_000_000_000 + 2_000_000_000 + 11_176_512
    line = refused(capsys, "bench", "resnet18", "--model-args", "num_classes=2000000000", "--no-history")
    assert "resnet18: 1.03 T parameters are" in line and "free; give --model-args values smaller than num_classes=2000000000" in line


def test_a_list_override_is_parsed_and_one_the_builder_refuses_is_one_line(capsys):
    code, out, err = run(capsys, "flops", "resnet50", "--model-args", "replace_stride_with_dilation=[False,True,True]",
                         "--json")
    assert code == 0 and json.loads(out)["params_total"] == 25_557_032, err
    line = refused(capsys, "flops", "resnet18", "--model-args", "replace_stride_with_dilation=[True,False,False]")
    assert line == "torchperf-tui: error: cannot build resnet18: Dilation > 1 not supported in BasicBlock"
    line = refused(capsys, "flops", "resnet50", "--model-args", "replace_stride_with_dilation=[True,False")
    assert "not a Python literal" in line


def test_a_schedule_whose_largest_shape_no_device_holds_is_refused_before_the_run(capsys):
    """cycle:4:1-2000000000 was 'Storage size calculation overflowed', an internal error, from inside the meta check."""
    line = refused(capsys, "bench", TINY, "--shapes", "cycle:4:1-2000000000", "--no-history")
    assert "shape schedule cycle:4:1-2000000000: input shape 1x3x2000000000x2000000000" in line
    assert "is more than any device holds" in line
