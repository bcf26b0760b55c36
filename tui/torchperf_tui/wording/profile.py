"""A profile (engine.analysis.profiling.ProfileResult) in words: the CLI's rows and table of `profile`, and the facts
the profile pane says too (an operator's share of the self time, where the trace is and what opens it)."""

from __future__ import annotations

from torchperf_tui.core.formatting import format_bytes, format_ms
from torchperf_tui.wording import Row, row, subject


def share_text(result, op, unit: str = "") -> str:
    """An operator's share of all self time (device time on a GPU), '12.3' (the pane's column says '%') or, with
    `unit` " %", '12.3 %'."""
    return f"{result.share_pct(op):.1f}{unit}"


def trace_text(path, compact: bool = False) -> str:
    """Where the Chrome trace is and what opens it; `compact`: the pane's shorter line."""
    if compact:
        return f"Chrome trace: {path} (open in ui.perfetto.dev)" if path else \
            "no trace written (no iteration was recorded)"
    return f"trace: {path} (open it in https://ui.perfetto.dev or chrome://tracing)"


def on_gpu(result) -> bool:
    return result.device.startswith("cuda")


def profile_title(result) -> str:
    return subject(result)


def profile_rows(result) -> list[Row]:
    """`profile`: what was profiled, the order, the self time in all, the engine's notes."""
    return ([row("profiled", f"{result.iters} iterations ({', '.join(result.activities)})"),
             row("sorted by", result.sort_by), row("self CPU total", format_ms(result.total_self_cpu_ms))]
            + ([row("self GPU total", format_ms(result.total_self_device_ms))] if on_gpu(result) else [])
            + [row("note", note) for note in result.notes])


def op_columns(result) -> list[str]:
    return ["op", "calls", "self CPU", "CPU total"] + (["self GPU", "GPU total"] if on_gpu(result) else []) + \
        ["share", "self mem", "input shapes"]


def op_cells(result, op) -> list[str]:
    """The CLI's row of an operator, in op_columns' order."""
    gpu = on_gpu(result)
    cells = [op.name, str(op.calls), format_ms(op.self_cpu_ms), format_ms(op.cpu_total_ms)]
    if gpu:
        cells += [format_ms(op.self_device_ms), format_ms(op.device_total_ms)]
    return cells + [share_text(result, op, " %"),
                    format_bytes(op.self_device_memory_bytes if gpu else op.self_cpu_memory_bytes), op.input_shapes]
