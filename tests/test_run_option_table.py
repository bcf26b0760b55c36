"""A run option is one entry in the run option table (core/run_option_table.py): the CLI's option takes its values,
its default and its help from there, an A/B arm's SPEC takes exactly the entries that say so, and a value none of the
entry's is refused in the same words on the command line, in a SPEC and in the engine. (The sidebar's side:
tests/app/test_run_option_bounds.py.)"""

from __future__ import annotations

import dataclasses

import pytest

from torchperf_tui.cli.args import build_parser
from torchperf_tui.core.errors import FlagError, TorchperfError
from torchperf_tui.core.run_option_table import APP, ARM_KEYS, RUN_OPTIONS, run_option
from torchperf_tui.engine.measurements.ab_arms import ArmSpec, parse_arm_spec
from tests.cli_run import run
from tests.new_flag_script import subparser

MEASURING = ("bench", "compare", "throughput", "profile", "roofline", "sweep")


def _words(text: str) -> str:
    """`text` without its white space: argparse wraps help at spaces and after hyphens ('max-' / 'autotune')."""
    return "".join(text.split())


@pytest.mark.parametrize("command", MEASURING)
def test_each_commands_run_options_say_the_tables_help(command):
    help_text = _words(subparser(build_parser(), command).format_help())
    for entry in RUN_OPTIONS:
        if entry.option and entry.option in help_text and entry.name not in ("iters", "warmup"):
            assert _words(entry.help) in help_text, (command, entry.name)


def test_bench_has_every_run_option_the_command_line_has_with_its_default():
    parser = build_parser()
    args = parser.parse_args(["bench", "m"])
    for entry in RUN_OPTIONS:
        if entry.style == APP:
            assert entry.name not in vars(args)
        elif entry.name not in ("iters", "warmup"):  # a command's own defaults
            assert getattr(args, entry.name) == (entry.default if entry.default is not None else
                                                 (False if entry.name == "channels_last" else None)), entry.name
    compiled = parser.parse_args(["bench", "m", "--compile"])
    assert compiled.compile == run_option("compile").const


def test_an_arms_spec_takes_exactly_the_table_s_arm_options():
    settable = {field.name for field in dataclasses.fields(ArmSpec)} - {"flags", "text"}
    assert set(ARM_KEYS) == settable
    values = {"dtype": "bfloat16", "channels_last": "on", "shapes": "cycle:2", "step": "train", "optimizer": "adamw",
              "amp": "bf16", "quant": "int8wo", "attn": "eager", "cache": "static", "compile": "default"}
    arm = parse_arm_spec(",".join(f"{key}={values[key]}" for key in ARM_KEYS))
    assert all(getattr(arm, key) is not None for key in ARM_KEYS)
    with pytest.raises(FlagError, match="known keys are .*" + ", ".join(ARM_KEYS)):
        parse_arm_spec("iters=5")  # a run's, not an arm's


@pytest.mark.parametrize("name, bad", [("step", "fly"), ("optimizer", "lion"), ("compile", "fastest"),
                                            ("quant", "int3"), ("attn", "paged")])
def test_a_value_none_of_the_entrys_is_refused_in_the_same_words_everywhere(capsys, name, bad):
    entry = run_option(name)
    with pytest.raises(TorchperfError) as refused:
        entry.choose(bad)
    words = str(refused.value)
    assert words.startswith(f"unknown {entry.noun or entry.label} {bad!r}: choose ") and entry.choices[-1] in words
    code, _, err = run(capsys, "bench", "m", entry.option, bad)
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1
    if entry.arm_key:
        with pytest.raises(FlagError, match=words):
            parse_arm_spec(f"{name}={bad}")


def test_a_value_is_named_in_any_case_or_by_its_alias_and_read_as_the_one_it_names():
    parser = build_parser()
    args = parser.parse_args(["bench", "m", "--dtype", "BF16", "--step", "Train"])
    assert (args.dtype, args.step) == ("bfloat16", "train")
    assert parse_arm_spec("dtype=half").dtype == "float16"


def test_the_value_that_stands_for_none_is_no_value_wherever_a_run_is_built():
    """'eager' (the compile select's first value), 'off' (amp's) and nothing are a run without that option, in the
    CLI's config, the app's selection and a record read back alike; any other value is the run's."""
    from torchperf_tui.measure.selection import Selection

    compile_option, amp = run_option("compile"), run_option("amp")
    assert [compile_option.run_value(text) for text in (None, "", "eager", "default")] == [None, None, None, "default"]
    assert [amp.run_value(text) for text in ("off", "bf16")] == [None, "bf16"]
    assert run_option("dtype").run_value("float32") == "float32"  # a value with a default is never none
    assert Selection(model="resnet18", compile="eager").config().compile is None
    assert Selection(model="resnet18", compile="max-autotune").config().compile == "max-autotune"
