"""An interleaved A/B comparison (engine.measurements.abtest.ABResult) in words: the CLI's heading and table of the
arms, and the facts the compare pane says on its verdict lines too (each arm's median interval, the GPU over each
arm's blocks). What the model's code changed in torch's global state is wording.timing's state_rows, as for a run."""

from __future__ import annotations

from torchperf_tui.core.formatting import format_ms, format_percentile
from torchperf_tui.wording import subject


def arm_pairs(result) -> list[tuple[str, object]]:
    """(name, arm) of A then B."""
    return [("A", result.a), ("B", result.b)]


def ci_text(arm) -> str | None:
    """An arm's 95 % interval of its median ('6.05 ms - 6.14 ms'), None before there are enough blocks."""
    return None if arm.ci_low_ms is None else f"{format_ms(arm.ci_low_ms)} - {format_ms(arm.ci_high_ms)}"


def ab_title(result) -> str:
    """The CLI's heading: what was compared, each iteration's step, and in how many blocks."""
    step = getattr(result, "step", "infer")
    amp = getattr(result, "amp", None)
    what = (f", each iteration a training step ({result.optimizer}, every block from the same weights)"
            if step == "train" else ", every block from the same weights" if step == "mixed" else "") + \
        (f", torch.autocast {amp}" if amp and amp != "mixed" else "")
    return (f"{subject(result, dtype=False)}{what}: "
            f"A and B interleaved in {len(result.order)} randomised blocks")


def arm_cells(result) -> list[tuple[str, ...]]:
    """The CLI's table: per arm (arm, spec, flags and what else sets it apart, median, 95 % CI, p90, p99, blocks)."""
    # numpy: the panes load the wording before the app's first frame
    from torchperf_tui.engine.measurements.abtest import arm_step_text

    mixed = "mixed" in (getattr(result, "step", "infer"), getattr(result, "amp", None))  # each arm says its own
    cells = []
    for name, arm in arm_pairs(result):
        other = result.b if arm is result.a else result.a
        setup = (arm.flags.describe(device=result.device, threads_used=getattr(arm, "threads_used", None),
                                    default_threads=getattr(arm, "threads_asked", None), beside=other.flags) +
                 (f", {arm.dtype}" if arm.dtype != "float32" else "") +
                 (", channels_last" if arm.channels_last else "") +
                 (f", shapes {arm.shapes} ({arm.first_seen} new)" if arm.shapes != "fixed" else "") +
                 (f", {arm_step_text(arm)}" if mixed else ""))
        cells.append((name, arm.spec, setup, format_ms(arm.median_ms), ci_text(arm) or "-",
                      format_percentile(arm.p90_ms, 0.9, len(arm.samples_ms)),
                      format_percentile(arm.p99_ms, 0.99, len(arm.samples_ms)), str(len(arm.blocks))))
    return cells


def arm_conditions(result, brief: bool = False) -> list[tuple[str, str]]:
    """(arm, the GPU over its blocks) for each arm with GPU readings; `brief`: the pane's short form."""
    return [(name, arm.conditions.short(arm.step, brief=brief)) for name, arm in arm_pairs(result)
            if getattr(arm, "conditions", None) is not None]

