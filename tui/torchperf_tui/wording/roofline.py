"""A run's place on the roofline (engine.analysis.roofline.RooflineResult) in words: the CLI's rows, with each n/a's
reason said once in a footnote, and the timing pane's one line with its tooltip; the marks of the run its latency
is from and of the passes timed per layer, as the run's."""

from __future__ import annotations

from torchperf_tui.core.formatting import format_bytes, format_count, format_flops, format_ms, number_text
from torchperf_tui.wording import Row, row, subject
from torchperf_tui.wording.conditions import disturbed_text, noise_rows
from torchperf_tui.engine.analysis.roofline import utilisation_text
from torchperf_tui.engine.hardware.gpm import gpm_text
from torchperf_tui.core.marks import disturbance_marks


class Footnotes:
    """Each n/a's reason said once, under what shows it: a cell reads 'n/a [2]'."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def __call__(self, value, fmt: str = "", unit: str = "") -> str:
        reason = getattr(value, "reason", None)
        if reason is None:
            return number_text(value, fmt, unit) if fmt else str(value)
        return f"n/a {self.mark(reason)}"

    def mark(self, text: str) -> str:
        """'[k]': `text` said once under the table (a reason, or why a figure is no fact)."""
        if text not in self.reasons:
            self.reasons.append(text)
        return f"[{self.reasons.index(text) + 1}]"

    def _said(self, number: int, reason: str) -> str:
        """A reason that quotes an earlier one ('no ridge point (no peak FLOP/s: ...)') points at it instead."""
        for earlier, text in enumerate(self.reasons[:number - 1], 1):
            if text in reason:
                reason = reason.replace(text, f"see [{earlier}]")
        return reason

    def lines(self) -> list[str]:
        """'[1] reason', one a footnote."""
        return [f"[{number}] {self._said(number, reason)}" for number, reason in enumerate(self.reasons, 1)]


def roofline_title(result) -> str:
    return subject(result)


def roofline_rows(result, na: Footnotes) -> list[Row]:
    """`roofline`: latency, FLOPs, achieved and peak rates, MFU, the measured ceiling, intensity, the side of the
    roofline, the bytes moved; every n/a with a footnote in `na`."""
    said: list[str] = []

    def pct(name: str) -> str:
        """A utilisation: its figure, the engine's sentence for one above 100 % (never shown as a fact; said once,
        where a later row would repeat it, it points at the MFU row), or why it is n/a."""
        value = getattr(result, name)
        if hasattr(value, "reason"):
            return na(value)
        text = utilisation_text(result, name)
        if text in result.above_ceiling.values():
            if text in said:
                return "above the same ceiling: see MFU"
            said.append(text)
        return text

    rows = [row("latency", f"{format_ms(result.latency_ms)} ({result.latency_source})"),
            row("FLOPs per iteration", format_flops(result.flops)),
            row("achieved", format_count(result.achieved_tflops * 1e12, "FLOP/s")),
            row("peak", f"{na(result.peak_tflops, '.4g', ' TFLOP/s')}, {na(result.peak_bandwidth_gbs, '.0f', ' GB/s')}"),
            row("MFU (of peak FLOP/s)", pct("mfu_pct")),
            row("measured ceiling", f"{na(result.measured_tflops, '.4g', ' TFLOP/s')} (this box's best: "
                                    f"{result.measured_origin}; copy "
                                    f"{na(result.measured_bandwidth_gbs, '.4g', ' GB/s')})"
                if not hasattr(result.measured_tflops, "reason") else na(result.measured_tflops)),
            row("of measured ceiling", pct("measured_mfu_pct")),
            row("arithmetic intensity", f"{na(result.arithmetic_intensity, '.1f', ' FLOP/byte')} "
                                        f"(ridge {na(result.ridge_flops_per_byte, '.1f')})"),
            row("side of the roofline", na(result.side)),
            *([row("GPU counters", f"{gpm_text(result.gpm)} (GPM, over the timed run)")]
              if getattr(result, "gpm", None) else []),
            row("attainable here", na(result.attainable_tflops, ".2f", " TFLOP/s")),
            row("of the roofline", pct("roofline_pct")),
            row("bytes moved", f"{format_bytes(result.bytes_moved)} ({result.bytes_method})" if result.bytes_moved
                else result.bytes_method),
            row("peaks from", result.peaks_source)]
    rows += [row("note", note) for note in result.notes]
    noise = getattr(getattr(result, "layer_times", None), "host_noise", None)
    if noise is not None:  # the host over the passes timed per layer (the run's own is its record's)
        rows.append(row("host per layer", noise.summary()))
    return rows + noise_rows(result)


def roofline_text(result, split: bool = False) -> str:
    """The pane's one line: achieved TFLOP/s, MFU (or why n/a), arithmetic intensity and the side of the roofline;
    `split` (a line too long for the pane): two, the rates on the first, the intensity and the side on the second."""
    mfu = utilisation_text(result, "mfu_pct")
    if mfu == "n/a":
        mfu = f"n/a ({short_reason(getattr(result.mfu_pct, 'reason', 'no peak'))})"
    side = f"{result.side} bound" if isinstance(result.side, str) else "side n/a"
    ridge = number_text(result.ridge_flops_per_byte, ".1f", na="n/a")
    achieved = format_count(result.achieved_tflops * 1e12, "FLOP/s")
    of = " of a training step" if getattr(result, "step", "infer") == "train" else ""
    measured = utilisation_text(result, "measured_mfu_pct") if hasattr(result, "measured_mfu_pct") else "n/a"
    if measured != "n/a" and result.peak_tflops != result.measured_tflops:
        # beside a datasheet peak (on the CPU it is the peak): the engine's figure, or its sentence above 100 %
        above = measured in getattr(result, "above_ceiling", {}).values()
        mfu += f" ({measured if above else f'{measured} of the measured ceiling'})"
    between = "\n" if split else " · "
    text = (f"roofline{of}: {achieved} achieved · MFU {mfu}{between}intensity "
            f"{number_text(result.arithmetic_intensity, '.1f', ' FLOP/byte', na='n/a')} (ridge {ridge}) · {side}")
    if any(hasattr(value, "reason") for value in (result.mfu_pct, result.ridge_flops_per_byte, result.side)):
        text += " · why n/a: Device tab"
    counters = gpm_text(getattr(result, "gpm", None) or {})
    if counters:  # beside the estimate's side: what the GPU's own counters saw over the same run
        text += f"{between}GPU counters: {counters}"
    marks = disturbed_text(disturbance_marks(result), compact=True)
    return text + (f" · {marks}" if marks else "")


def short_reason(reason: str, limit: int = 40) -> str:
    """The first clause of an NA reason, so the roofline stays one or two lines (the full text is in the Device
    tab and the line's tooltip)."""
    head = reason.split(", ")[0].split("; ")[0]
    return head if len(head) <= limit else head[: limit - 1] + "…"


def roofline_notes(result) -> str:
    """Why each n/a is n/a, and the engine's notes, for the roofline line's tooltip."""
    reasons = [f"{name}: {value.reason}" for name, value in
               (("MFU", result.mfu_pct), ("ridge", result.ridge_flops_per_byte), ("side", result.side))
               if hasattr(value, "reason")]
    marks = disturbed_text(disturbance_marks(result))
    return "\n".join(reasons + list(result.notes) + [f"bytes moved: {result.bytes_method}"] + ([marks] if marks else []))
