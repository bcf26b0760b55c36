"""`info`, `models` and `ceilings`: what this box is and reaches, and which models there are; no model is measured.
`info` and `models` run here (they run no model code); `ceilings` measures in a measurement process as every job does."""

from __future__ import annotations

import sys

from torchperf_tui.core.errors import PROG
from torchperf_tui.cli import common
from torchperf_tui.engine.hardware.ceilings import kept_for
from torchperf_tui.engine.hardware.device import probe_device
from torchperf_tui.engine.workloads.model_catalogue import check_task, list_models


def cmd_info(args) -> int:
    from torchperf_tui.cli.render_facts import render_device_report  # rich: not loaded for --json or a refusal

    report = probe_device()
    kept = _kept_ceilings(report)
    return common.output(args, report, lambda r: render_device_report(r, kept), lambda r: {
        **r.to_dict(), "measured_ceilings": {device: c.to_dict() if c else None for device, c in kept.items()}})


def _kept_ceilings(report) -> dict:
    """The measured ceilings kept for the CPU and each CUDA device (None: none yet); nothing is measured here.
    A ceilings file that is corrupt is a warning, not a failed `info`; a path that is no file to read ($TORCHPERF_CEILINGS
    naming a FIFO, a device, a folder) is an error, one line, as for every command."""
    devices = ["cpu"] + ([f"cuda:{gpu.index}" for gpu in report.gpus] if report.cuda_available else [])
    said: set[str] = set()

    def warn(line: str) -> None:
        if line not in said:  # a file that is not a ceilings file is said once, not once per device
            print(f"{PROG}: warning: measured ceilings: {line}", file=sys.stderr)
            said.add(line)

    return {device: kept_for(device, on_corrupt=warn) for device in devices}


def cmd_models(args) -> int:
    from dataclasses import asdict

    from torchperf_tui.cli.render_facts import render_catalogue  # rich: not loaded for --json or a refusal

    entries = list_models(args.source)  # every source's by default: torchvision, timm, hf
    if args.task:
        task = check_task(args.task, entries)  # an unknown task is its one-line ModelError
        entries = [e for e in entries if e.task == task]
    return common.output(args, entries, render_catalogue, lambda found: [asdict(e) for e in found])


def cmd_ceilings(args) -> int:
    from torchperf_tui.cli.render_facts import render_ceilings  # rich: not loaded for --json or a refusal

    result, _ = common.run_job("ceilings", {"device": args.device, "refresh": args.refresh, "threads": args.threads},
                               "measuring the ceilings")
    return common.output(args, result, render_ceilings)
