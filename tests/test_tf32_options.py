"""The TF32 flags from the front ends to the history: --tf32 and SPEC key tf32 set what they set before (TF32 for CUDA's
matmuls and cuDNN, whose one allow_tf32 held its convolutions and RNNs), each backend has its own option and key, a
record carries each, a record written before TF32 RNN and TF32 oneDNN existed reads as its run had them, and the gate
names each as the command line does."""

from __future__ import annotations

import pytest

from tests.cli_run import run
from tests.records import make_record
from torchperf_tui.cli.args import build_parser
from torchperf_tui.cli.baseline import overridden, typed_options
from torchperf_tui.cli.common import flags_from
from torchperf_tui.core.errors import FlagError
from torchperf_tui.engine.measurements.ab_arms import parse_arm_spec
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.flags import Flags
from torchperf_tui.engine.records.baseline import config_of_record
from torchperf_tui.engine.records.baseline_gate import gate
from torchperf_tui.engine.records.history_records import HistoryRecord
from torchperf_tui.wording.baseline import gate_lines

TF32 = ("tf32_matmul", "tf32_cudnn", "tf32_rnn", "tf32_mkldnn")


def tf32_of(flags: Flags) -> dict[str, bool]:
    return {name: getattr(flags, name) for name in TF32}


def bench_flags(*options: str) -> Flags:
    return flags_from(build_parser().parse_args(["bench", "resnet18", *options]))


def test_bench_help_lists_an_option_per_backend(capsys):
    code, out, _ = run(capsys, "bench", "--help")
    assert code == 0
    text = " ".join(out.split())
    for option in ("--tf32", "--tf32-matmul", "--tf32-cudnn", "--tf32-rnn", "--tf32-mkldnn"):
        assert f"{option}, --no-{option[2:]}" in text
    assert "allow TF32 on CUDA for fp32 matmuls, cuDNN convolutions and cuDNN RNNs" in text
    assert "torch.backends.cudnn.rnn.fp32_precision" in text and "AMX-FP16" in text
    code, out, _ = run(capsys, "compare", "--help")
    assert "deterministic, tf32, threads, mkldnn, tf32_mkldnn, sdpa" in " ".join(out.split())


def test_tf32_sets_cudas_three_as_before_and_each_option_its_own():
    assert tf32_of(bench_flags()) == tf32_of(Flags()) == {"tf32_matmul": False, "tf32_cudnn": True, "tf32_rnn": True,
                                                          "tf32_mkldnn": False}
    assert tf32_of(bench_flags("--tf32")) == {"tf32_matmul": True, "tf32_cudnn": True, "tf32_rnn": True,
                                              "tf32_mkldnn": False}
    assert tf32_of(bench_flags("--no-tf32")) == dict.fromkeys(TF32, False)
    assert tf32_of(bench_flags("--no-tf32", "--tf32-rnn")) == {"tf32_matmul": False, "tf32_cudnn": False,
                                                               "tf32_rnn": True, "tf32_mkldnn": False}
    assert tf32_of(bench_flags("--tf32-rnn", "--no-tf32")) == tf32_of(bench_flags("--no-tf32", "--tf32-rnn"))
    assert tf32_of(bench_flags("--tf32-matmul")) == {**tf32_of(Flags()), "tf32_matmul": True}
    assert tf32_of(bench_flags("--no-tf32-cudnn")) == {**tf32_of(Flags()), "tf32_cudnn": False}
    assert tf32_of(bench_flags("--tf32-mkldnn")) == {**tf32_of(Flags()), "tf32_mkldnn": True}


def test_the_spec_key_tf32_sets_cudas_three_and_each_backend_has_its_key():
    assert tf32_of(parse_arm_spec("tf32=on").flags) == {"tf32_matmul": True, "tf32_cudnn": True, "tf32_rnn": True,
                                                        "tf32_mkldnn": False}
    assert tf32_of(parse_arm_spec("tf32=off").flags) == dict.fromkeys(TF32, False)
    assert parse_arm_spec("tf32_rnn=off").flags == Flags(tf32_rnn=False)
    assert parse_arm_spec("tf32_matmul=on,tf32_cudnn=off").flags == Flags(tf32_matmul=True, tf32_cudnn=False)
    assert parse_arm_spec("tf32_mkldnn=on").flags == Flags(tf32_mkldnn=True)
    with pytest.raises(FlagError, match="^tf32_rnn set by both tf32 and tf32_rnn in 'tf32=on,tf32_rnn=off': give each "
                                        "setting once per arm$"):
        parse_arm_spec("tf32=on,tf32_rnn=off")


def test_a_spec_that_sets_a_tf32_backend_twice_is_one_line_and_exit_2(capsys):
    code, out, err = run(capsys, "compare", "resnet18", "--a", "tf32=off,tf32_cudnn=on", "--b", "")
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        "torchperf-tui: error: tf32_cudnn set by both tf32 and tf32_cudnn in 'tf32=off,tf32_cudnn=on': give each "
        "setting once per arm"]


def test_a_record_carries_each_tf32_flag_and_the_gate_names_each_as_the_command_line_does():
    now_flags = Flags(tf32_rnn=False, tf32_mkldnn=True)
    baseline = HistoryRecord.from_dict(make_record(flags=Flags().to_dict()).to_dict())
    now = HistoryRecord.from_dict(make_record(flags=now_flags.to_dict()).to_dict())
    assert tf32_of(config_of_record(now).flags) == tf32_of(now_flags)
    verdict = gate(baseline, now, typed=["tf32_rnn"])
    assert [list(d) for d in verdict.differences] == [["tf32_rnn", True, False], ["tf32_mkldnn", False, True]]
    assert any("tf32_rnn on -> off (from the command line), tf32_mkldnn off -> on" in line
               for line in gate_lines(verdict)), gate_lines(verdict)


@pytest.mark.parametrize("argv, names", [
    (["--tf32-rnn"], ["tf32_rnn"]),
    (["--no-tf32"], ["tf32_matmul", "tf32_cudnn", "tf32_rnn"]),
    (["--tf32-mkldnn"], ["tf32_mkldnn"]),
])
def test_the_baseline_s_overrides_name_the_tf32_flags_as_the_gate_does(argv, names):
    argv = ["compare", "--baseline", "b.json", *argv]
    cfg, typed = overridden(BenchConfig(model="m", flags=Flags(tf32_rnn=False)),
                            build_parser(baseline=True).parse_args(argv), typed_options(argv))
    assert typed == names
    assert {name: getattr(cfg.flags, name) for name in names} == dict.fromkeys(names, "--no" not in argv[3])


def test_a_record_from_before_tf32_rnn_reads_as_its_run_had_it():
    """Its tf32_cudnn was the one allow_tf32 of cuDNN, its RNNs' too; oneDNN's TF32 it never set (off)."""
    for cudnn in (False, True):
        data = make_record().to_dict()
        data["flags"] = {name: value for name, value in Flags(tf32_cudnn=cudnn).to_dict().items()
                         if name not in ("tf32_rnn", "tf32_mkldnn")}
        old = HistoryRecord.from_dict(data)
        assert (old.flags["tf32_cudnn"], old.flags["tf32_rnn"], old.flags["tf32_mkldnn"]) == (cudnn, cudnn, False)
        assert tf32_of(config_of_record(old).flags) == {"tf32_matmul": False, "tf32_cudnn": cudnn, "tf32_rnn": cudnn,
                                                        "tf32_mkldnn": False}
        same = make_record(flags=Flags(tf32_cudnn=cudnn, tf32_rnn=cudnn).to_dict())
        assert gate(old, same).differences == []
    assert HistoryRecord.from_dict({**make_record().to_dict(), "flags": {}}).flags == {}  # no flags: none made up
