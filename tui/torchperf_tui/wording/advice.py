"""The words of `why` (engine/analysis/advice_result.Advice): each finding ranked, with its evidence, its estimate, its
fix and what the fix's A/B measured; the CLI prints them and the report (wording/advice_report.py) sets them out."""

from __future__ import annotations

from torchperf_tui.core.formatting import format_ms
from torchperf_tui.engine.analysis.advice_result import CONFIRMED, INCONCLUSIVE, REFUTED, finding_name, findings_change
from torchperf_tui.wording import subject


def advice_title(result) -> str:
    return f"why: {subject(result)}"


def setup_line(result) -> str:
    """'the set-up as given: median 62.54 ms a pass, threads=2 (default)'; a training step says so: 'median 25.5 ms
    a training step (train (sgd)), threads=1'."""
    step = getattr(result, "step", "infer")
    per = "a pass" if step == "infer" else f"a training step ({step})"
    return f"the set-up as given: median {format_ms(result.pass_ms)} {per}, {result.flags_text}"


def per_text(result) -> str:
    """What the figures are per: 'a pass', or 'a training step'."""
    return "a pass" if getattr(result, "step", "infer") == "infer" else "a training step"


def estimate_text(finding, per: str = "a pass") -> str:
    """'about 61.6 ms a pass (98 % of it), estimated'."""
    return f"about {format_ms(finding.at_stake_ms)} {per} ({finding.share * 100:.0f} % of it), estimated"


def measured_text(finding, per: str = "a pass") -> str:
    """What the fix's A/B said: 'confirmed: 52.1 ms a pass faster (95 % CI 48.0 ms-55.0 ms), B/A 0.17, p=0.002;
    the estimate 1.18x the measured gain', 'refuted: no significant gain (B/A 1.01, CI 0.98-1.04, p=0.4)', or why it
    was not run."""
    if finding.verdict == CONFIRMED:
        low, high = finding.measured_interval_ms
        text = (f"confirmed: {format_ms(finding.measured_ms)} {per} faster (95 % CI {format_ms(low)}-"
                f"{format_ms(high)}), B/A {finding.ratio:.2f}, p={finding.p_value:.3g}")
        if finding.measured_ms > 0:
            text += f"; the estimate {finding.at_stake_ms / finding.measured_ms:.2f}x the measured gain"
        return text
    figures = f"B/A {finding.ratio:.2f}, CI {finding.ci_low:.2f}-{finding.ci_high:.2f}, p={finding.p_value:.3g}" \
        if finding.ratio is not None else ""
    if finding.verdict == REFUTED:
        word = "slower" if finding.ci_low > 1 else "no gain"
        return f"refuted: {word} ({figures})"
    if finding.verdict == INCONCLUSIVE:
        return f"inconclusive: the A/B could not tell ({figures}); more blocks would settle it (--blocks)"
    return f"not run: {finding.why_not_run or 'not asked'}"


def finding_lines(finding, rank: int, per: str = "a pass") -> list[str]:
    """A finding as the CLI says it: its sentence numbered, then its estimate, evidence, fix and measurement."""
    lines = [f"{rank}. {finding.what}", f"   at stake: {estimate_text(finding, per)}"]
    lines += [f"   evidence: {line}" for line in finding.evidence]
    if finding.options:
        lines.append(f"   fix: {finding.options}" + (" (changes numerics: its drift is measured with it)"
                                                       if finding.changes_numerics else ""))
    lines.append(f"   measured: {measured_text(finding, per)}")
    return lines


def none_found_text(result) -> str:
    """'no finding above 5 % of the pass (2 below it)'."""
    below = f" ({result.below} below it)" if result.below else ""
    return f"no finding above {result.threshold_pct:g} % of the pass{below}"


def advice_lines(result) -> list[str]:
    """The CLI's lines: the set-up, the findings ranked (or that there is none above the threshold), what was
    measured, and every mark on the numbers."""
    lines = [setup_line(result), ""]
    if result.findings:
        for rank, finding in enumerate(result.findings, 1):
            lines += finding_lines(finding, rank, per_text(result))
        if result.below:
            lines.append(f"({result.below} more below {result.threshold_pct:g} % of the pass)")
    else:
        lines.append(none_found_text(result))
    lines += ["", "gathered: " + "; ".join(result.measurements) + f" ({result.duration_s:.0f} s"
              + (f" of a {result.budget_s:g} s budget)" if result.budget_s else ")")]
    if result.cancelled:
        lines.append("cancelled before the end: the findings are of what was measured")
    lines += [f"note: {note}" for note in result.notes]
    lines += [f"disturbed: {mark}" for mark in result.disturbance_marks()]
    return lines


def change_line(previous, result) -> str:
    """Two `why` results, the earlier first: 'against the previous why (threads=1, median 7.53 ms a pass): went away:
    threads'; which findings appeared and which went away, by name."""
    def names(advice) -> list[str]:
        return [finding_name({"key": f.key, "layer": f.layer}) for f in advice.findings]

    same = subject(previous) == subject(result)
    what = "of this model and input" if same else f"of {subject(previous)}"
    return (f"against the previous why {what} ({previous.flags_text}, median {format_ms(previous.pass_ms)} "
            f"{per_text(previous)}): {findings_change(names(previous), names(result))}")
