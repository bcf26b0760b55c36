"""The baseline gate (engine/records/baseline_gate.GateResult) in words, once for `compare --baseline` and the
Timing pane alike: the verdict with its ratio and interval, the gate's outcome, what was measured differently
(the command line's own changes marked), and what differs in the environment.

No torch and no Textual here."""

from __future__ import annotations

from typing import Any

from torchperf_tui.core.formatting import format_ms, printable
from torchperf_tui.engine.records.baseline_gate import ENV_READINGS, OTHER_BUSY_CORES_DELTA


def verdict_line(result) -> str:
    """'slower: p50 12.1 ms now, 6.52 ms in baseline 3fa2c1d8 (base.json): ratio 1.86 (95 % CI 1.80-1.92,
    Mann-Whitney p=1.2e-20; 64 and 64 samples)'."""
    word = {"slower": "slower", "faster": "faster", "same": "the same within noise"}[result.verdict]
    where = f" ({result.baseline_source})" if result.baseline_source else ""
    return (f"{word}: p50 {format_ms(result.now_p50_ms)} now, {format_ms(result.baseline_p50_ms)} in baseline "
            f"{printable(result.baseline_id[:8])}{where}: ratio {result.ratio:.3f} (95 % CI {result.ci_low:.3f}-"
            f"{result.ci_high:.3f}, Mann-Whitney p={result.p_value:.2g}; {result.n_now} and {result.n_baseline} "
            "samples)")


def gate_line(result, exit_code: bool = True) -> str:
    """Whether the gate passes, and why: 'gate: FAILS: 86.0 % slower, past the allowed 10 % (exit 1)', 'gate:
    AMBIGUOUS: 9.5 % slower, 95 % CI +4.1 % to +15.2 % across the allowed 10 %: ...'; the exit code only where there
    is one (`exit_code`: the CLI's, not the app's)."""
    pct, allowed = result.change_pct, f"{result.fail_if_slower_pct:g} %"
    reading = _ambiguity(result) if result.ambiguous else f"{pct:.1f} % slower, past the allowed {allowed}"

    def code(n: int) -> str:
        return f" (exit {n})" if exit_code else ""

    if result.failed:
        head = "gate: FAILS: AMBIGUOUS (--fail-if-ambiguous)" if result.ambiguous else "gate: FAILS"
        return f"{head}: {reading}" + code(1)
    if result.not_judged:
        return (f"gate: disturbed: not judged: {reading}, in a run marked disturbed (see the note): part of it may be "
                "the disturbance; measure again on a quiet machine" + code(0))
    if result.ambiguous:
        return f"gate: AMBIGUOUS: {reading}; more iterations narrow the interval" + code(0)
    if result.verdict == "slower":
        return f"gate: passes: {pct:.1f} % slower, within the allowed {allowed}"
    if result.verdict == "faster":
        return f"gate: passes: {-pct:.1f} % faster"
    return f"gate: passes: no significant difference ({pct:+.1f} %)"


def _ambiguity(result) -> str:
    """'9.5 % slower, 95 % CI +4.1 % to +15.2 % across the allowed 10 %: this run cannot tell whether it is past
    it', or the same of a difference that is not significant."""
    pct, allowed = result.change_pct, f"{result.fail_if_slower_pct:g} %"
    low, high = (result.ci_low - 1.0) * 100.0, (result.ci_high - 1.0) * 100.0
    said = f"{pct:.1f} % slower" if result.significant else f"no significant difference ({pct:+.1f} %)"
    where = (f"across the allowed {allowed}" if low <= result.fail_if_slower_pct
             else f"past the allowed {allowed}, but not significant (Mann-Whitney p={result.p_value:.2g})")
    return f"{said}, 95 % CI {low:+.1f} % to {high:+.1f} % {where}: this run cannot tell whether it is past it"


def differences_line(result) -> str:
    """'differences: threads 2 -> 1 (from the command line)', or 'differences: none (the baseline's
    configuration)'."""
    if not result.differences:
        return "differences: none (the baseline's configuration)"
    typed = set(result.typed)
    return "differences: " + ", ".join(
        f"{name} {_value(a)} -> {_value(b)}" + (" (from the command line)" if name in typed else "")
        for name, a, b in result.differences)


def environment_line(result) -> str:
    """'environment: host load 0.2 on 2 cores -> load 2.9 on 2 cores; torch 2.11.0 -> 2.14.1', or that nothing
    differs in what the records keep, the readings that move between any two runs within their tolerances (a
    gate under load called two load averages 'the same')."""
    if not result.environment:
        readings = ", ".join(f"{label.split(' (')[0]} within {share * 100:g} %" for _, label, share in ENV_READINGS)
        return (f"environment: no difference (device, driver, CUDA, cuDNN, torch, host, GPU power limit and "
                f"throttling the same; {readings}, other processes' CPU within {OTHER_BUSY_CORES_DELTA:g} cores)")
    return "environment: " + changes_text(result.environment)


def changes_text(changes) -> str:
    """(name, before, after) triples in words: 'torch 2.11.0 -> 2.14.1; host load 0.2 on 2 cores -> ...': the
    gate's environment and the change points' coinciding differences alike."""
    return "; ".join(f"{name} {_value(a)} -> {_value(b)}" for name, a, b in changes)


def gate_lines(result, exit_code: bool = True) -> list[str]:
    """Every line of a gate's result, in order: verdict, gate, differences, environment, then any notes."""
    return [verdict_line(result), gate_line(result, exit_code), differences_line(result), environment_line(result),
            *[f"note: {note}" for note in result.notes]]


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None or value == "":
        return "default"
    if isinstance(value, float):
        return f"{value:g}"
    return printable(value, 80)  # from a file: no escape sequences
