"""Run by tests/test_new_flag.py against a copy of the package whose flag table has one entry more,
`matmul_fp16_reduction` (cuBLAS's reduced-precision reductions in fp16 matmuls, on by default; its option
--fp16-reduction, its SPEC keys fp16_reduction and fp16_reduced): finds that flag everywhere a flag goes, and prints
what it found as one JSON object. Nothing here names the flag but to look for it."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import sys

NAME, OPTION, KEY, ALIAS = "matmul_fp16_reduction", "--fp16-reduction", "fp16_reduction", "fp16_reduced"


def subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]  # noqa: SLF001


def front_ends(found: dict) -> None:
    """--help, the flags a command line asks for, a SPEC, the baseline's overrides."""
    from torchperf_tui.cli.args import build_parser
    from torchperf_tui.cli.baseline import overridden, typed_options
    from torchperf_tui.cli.common import flags_from
    from torchperf_tui.core.errors import FlagError
    from torchperf_tui.engine.measurements.ab_arms import parse_arm_spec
    from torchperf_tui.engine.measurements.bench_config import BenchConfig

    parser = build_parser()
    found["bench_help"] = subparser(parser, "bench").format_help()
    found["compare_help"] = subparser(parser, "compare").format_help()
    found["cli_default"] = getattr(flags_from(parser.parse_args(["bench", "m"])), NAME)
    found["cli_off"] = getattr(flags_from(parser.parse_args(["bench", "m", f"--no-{OPTION[2:]}"])), NAME)
    found["spec_off"] = [getattr(parse_arm_spec(f"{key}=off").flags, NAME) for key in (KEY, ALIAS)]
    try:
        parse_arm_spec(f"{KEY}=on,{ALIAS}=off")
    except FlagError as exc:
        found["spec_twice"] = str(exc)
    try:
        parse_arm_spec("no_such_key=on")
    except FlagError as exc:
        found["spec_keys_said"] = str(exc)
    try:
        parse_arm_spec(f"{KEY}=maybe")
    except FlagError as exc:
        found["spec_bad_value"] = str(exc)
    argv = ["compare", "--baseline", "b.json", f"--no-{OPTION[2:]}"]
    cfg, names = overridden(BenchConfig(model="m"), build_parser(baseline=True).parse_args(argv), typed_options(argv))
    found["baseline_override"] = [getattr(cfg.flags, NAME), names]


def guard_and_record(found: dict) -> None:
    """The guard applies and reads it; a run under it, and a model's code that flips it, end in a record whose
    flags carry it; MLflow, the CSV export and the fleet's set-up name say it; the gate names the difference."""
    import torch

    from tests.records import make_record
    from torchperf_tui.engine.measurements.abtest import inert_arm_flags
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.flags import Flags, applied_flags, inert_flags
    from torchperf_tui.engine.records.baseline import config_of_record
    from torchperf_tui.engine.measurements.timing import run_benchmark
    from torchperf_tui.engine.records.baseline_gate import gate
    from torchperf_tui.engine.records.fleet_records import setup_flags
    from torchperf_tui.engine.records.history_records import record_from_timing
    from torchperf_tui.engine.records.mlflow_runs import describe_record
    from torchperf_tui.wording.baseline import gate_lines
    from torchperf_tui.wording.history_export import export_records

    matmul = torch.backends.cuda.matmul
    before = matmul.allow_fp16_reduced_precision_reduction
    with applied_flags(Flags().replace(**{NAME: False})):
        found["applied"] = [matmul.allow_fp16_reduced_precision_reduction, getattr(Flags.current(), NAME)]
    found["restored"] = matmul.allow_fp16_reduced_precision_reduction == before
    found["inert_on_cpu"] = inert_flags(Flags().replace(**{NAME: False}), "cpu")
    found["inert_arm"] = inert_arm_flags(Flags(), Flags(), Flags().replace(**{NAME: False}), "cpu")
    found["described"] = [Flags().describe("cuda"), Flags().replace(**{NAME: False}).describe("cuda")]

    cfg = BenchConfig(model="flag_flipping_model:flips_fp16_reduction", input_shape=(1, 8), device="cpu", warmup=1,
                      iters=3, flags=Flags().replace(**{NAME: False}))
    result = run_benchmark(cfg)
    found["state_notes"] = list(result.state_notes)
    record = record_from_timing(result, fingerprint={})
    found["record_flags"] = record.flags.get(NAME, "absent")
    found["mlflow_param"] = describe_record(record, saved=False).params.get(f"flag.{NAME}")
    found["csv_header"] = export_records([record], "csv").splitlines()[0]
    found["baseline_flags"] = getattr(config_of_record(record).flags, NAME)

    baseline = make_record(flags=Flags().to_dict())
    now = make_record(flags=Flags().replace(**{NAME: False}).to_dict())
    found["fleet_setup"] = setup_flags(now)
    verdict = gate(baseline, now, typed=[KEY])
    found["gate_differences"] = [list(d) for d in verdict.differences]
    found["gate_lines"] = gate_lines(verdict)


async def sidebar(found: dict) -> None:
    """The app on a fake H100 (its probe in this process, the measurement process a fake): the flag's switch."""
    from textual.widgets import Switch

    from tests.app.helpers import flip, make_app, screen_text, wait_until
    from tests.fakes.fake_measurement import FakeMeasurement

    app = make_app(gpu=True, frozen=True, measurement=FakeMeasurement({}))
    async with app.run_test(size=(110, 40)) as pilot:
        await wait_until(pilot, lambda: bool(app.main.query(f"#flag-{NAME}")), what="the new flag's switch")
        switch = app.main.query_one(f"#flag-{NAME}", Switch)
        found["switch"] = [switch.value, switch.disabled, str(switch.tooltip)]
        found["sidebar_text"] = screen_text(app, f"#flag-row-{NAME} .flag-label")
        await flip(pilot, NAME)
        found["flipped"] = getattr(app.pane("flags").flags, NAME)


def main() -> None:
    import torchperf_tui

    found: dict = {"package": torchperf_tui.__file__}
    front_ends(found)
    guard_and_record(found)
    asyncio.run(sidebar(found))
    out = io.StringIO()
    json.dump(found, out, default=str)
    sys.stdout.write("FOUND " + out.getvalue() + "\n")


if __name__ == "__main__":
    main()
