"""Every command of the CLI, by name: the function that runs it, given its parsed arguments, and returns the exit code.
Each command runs its model's code, if any, in a measurement process (measure/cli_jobs.py): the model's code can
neither end the command, keep it alive nor print into its output; this process renders the result and writes the
history without importing torch."""

from __future__ import annotations

from torchperf_tui.cli import analysis, facts, timing
from torchperf_tui.cli.collectives import collectives_command
from torchperf_tui.cli.ddp import ddp_command
from torchperf_tui.cli.exporter import exporter_command
from torchperf_tui.cli.history import export_command, history_command
from torchperf_tui.cli.sweep import sweep_command
from torchperf_tui.cli.why import why_command

COMMANDS = {"ceilings": facts.cmd_ceilings, "info": facts.cmd_info, "models": facts.cmd_models,
            "flops": analysis.cmd_flops, "bench": timing.cmd_bench, "throughput": timing.cmd_throughput,
            "profile": analysis.cmd_profile, "roofline": analysis.cmd_roofline, "compare": timing.cmd_compare,
            "determinism": timing.cmd_determinism, "memsnap": analysis.cmd_memsnap, "history": history_command,
            "export": export_command, "sweep": sweep_command, "exporter": exporter_command,
            "why": why_command, "collectives": collectives_command, "ddp": ddp_command}
