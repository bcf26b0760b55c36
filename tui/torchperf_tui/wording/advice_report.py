"""`why --report FILE.md|.html`: the set-up, the environment, the findings with their evidence and verdicts, and
the plots (the set-up's latency histogram, the time of its slowest layers) in one self-contained file a user can
attach to an issue. The HTML draws its plots as inline SVG (no script, nothing fetched); the Markdown as text bars.
The words are wording/advice.py's."""

from __future__ import annotations

import html
import math

from torchperf_tui.core.formatting import format_ms
from torchperf_tui.wording.advice import (advice_title, estimate_text, measured_text, none_found_text, per_text,
                                          setup_line)

ENVIRONMENT = ("device_name", "compute_capability", "driver", "torch", "transformers", "timm", "cpu_model",
               "hostname")
BINS = 24
BAR = 40  # the Markdown bars' width in characters


def environment_rows(environment: dict | None) -> list[tuple[str, str]]:
    """The environment's facts a reader of an issue asks for first, those the run recorded."""
    environment = environment or {}
    return [(key, str(environment[key])) for key in ENVIRONMENT if environment.get(key) not in (None, "")]


def histogram(samples: list[float], bins: int = BINS) -> list[tuple[float, float, int]]:
    """(low ms, high ms, count) per bin over the samples' range (one bin when they are all equal)."""
    finite = [s for s in samples if math.isfinite(s)]
    if not finite:
        return []
    low, high = min(finite), max(finite)
    if high <= low:
        return [(low, high, len(finite))]
    width = (high - low) / bins
    counts = [0] * bins
    for sample in finite:
        counts[min(bins - 1, int((sample - low) / width))] += 1
    return [(low + i * width, low + (i + 1) * width, count) for i, count in enumerate(counts)]


def report_markdown(result, environment: dict | None = None) -> str:
    lines = [f"# {advice_title(result)}", "", setup_line(result), ""]
    rows = environment_rows(environment)
    if rows:
        lines += ["## Environment", "", "| | |", "|---|---|", *[f"| {k} | {v} |" for k, v in rows], ""]
    lines += ["## Findings", ""]
    if not result.findings:
        lines += [none_found_text(result), ""]
    for rank, finding in enumerate(result.findings, 1):
        lines += [f"### {rank}. {finding.what}", "", f"- at stake: {estimate_text(finding, per_text(result))}",
                  *[f"- evidence: {line}" for line in finding.evidence]]
        if finding.options:
            lines.append(f"- fix: `{finding.options}`")
        lines += [f"- measured: {measured_text(finding, per_text(result))}", ""]
    samples = histogram(result.samples_ms)
    if samples:
        top = max(count for *_, count in samples)
        lines += ["## Latency of the set-up as given", "", "```"]
        lines += [f"{format_ms(low):>10} {'#' * round(BAR * count / top):<{BAR}} {count}" for low, _, count in samples]
        lines += ["```", ""]
    if result.layers:
        top_ms = max(ms for _, ms in result.layers) or 1.0
        lines += ["## The slowest layers (own time a pass)", "", "```"]
        width = max(len(name) for name, _ in result.layers)
        lines += [f"{name:<{width}} {'#' * max(1, round(BAR * ms / top_ms)):<{BAR}} {format_ms(ms)}"
                  for name, ms in result.layers]
        lines += ["```", ""]
    lines += ["## Measured", "", *[f"- {line}" for line in result.measurements], ""]
    lines += [f"- disturbed: {mark}" for mark in result.disturbance_marks()]
    return "\n".join(lines).rstrip() + "\n"


def _svg_bars(items: list[tuple[str, float, str]], width: int = 640, row: int = 18) -> str:
    """Horizontal bars: (label, value, value's text) each; the longest bar the widest."""
    top = max((value for _, value, _ in items), default=0.0) or 1.0
    label_w, text_w = 260, 90
    bar_w = width - label_w - text_w
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{row * len(items) + 4}" '
             'role="img" font-family="monospace" font-size="12">']
    for i, (label, value, text) in enumerate(items):
        y = i * row + 2
        w = max(1.0, bar_w * value / top)
        parts.append(f'<text x="{label_w - 6}" y="{y + 12}" text-anchor="end">{html.escape(label[-38:])}</text>'
                     f'<rect x="{label_w}" y="{y + 2}" width="{w:.1f}" height="{row - 5}" fill="#4c78a8"/>'
                     f'<text x="{label_w + w + 4:.1f}" y="{y + 12}">{html.escape(text)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _svg_histogram(bins: list[tuple[float, float, int]], width: int = 640, height: int = 160) -> str:
    top = max((count for *_, count in bins), default=0) or 1
    bar = (width - 20) / max(1, len(bins))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 20}" role="img" '
             'font-family="monospace" font-size="11">']
    for i, (_, _, count) in enumerate(bins):
        h = (height - 10) * count / top
        parts.append(f'<rect x="{10 + i * bar:.1f}" y="{height - h:.1f}" width="{max(1.0, bar - 1):.1f}" '
                     f'height="{h:.1f}" fill="#4c78a8"/>')
    if bins:
        parts.append(f'<text x="10" y="{height + 14}">{html.escape(format_ms(bins[0][0]))}</text>'
                     f'<text x="{width - 10}" y="{height + 14}" text-anchor="end">'
                     f'{html.escape(format_ms(bins[-1][1]))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def report_html(result, environment: dict | None = None) -> str:
    e = html.escape
    body = [f"<h1>{e(advice_title(result))}</h1>", f"<p>{e(setup_line(result))}</p>"]
    rows = environment_rows(environment)
    if rows:
        body.append("<h2>Environment</h2><table>" + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>"
                                                            for k, v in rows) + "</table>")
    body.append("<h2>Findings</h2>")
    if not result.findings:
        body.append(f"<p>{e(none_found_text(result))}</p>")
    for rank, finding in enumerate(result.findings, 1):
        items = [f"at stake: {estimate_text(finding, per_text(result))}",
                 *[f"evidence: {line}" for line in finding.evidence]]
        if finding.options:
            items.append(f"fix: {finding.options}")
        items.append(f"measured: {measured_text(finding, per_text(result))}")
        body.append(f"<h3>{rank}. {e(finding.what)}</h3><ul>" + "".join(f"<li>{e(i)}</li>" for i in items)
                    + "</ul>")
    bins = histogram(result.samples_ms)
    if bins:
        body += ["<h2>Latency of the set-up as given</h2>", _svg_histogram(bins)]
    if result.layers:
        body += ["<h2>The slowest layers (own time a pass)</h2>",
                 _svg_bars([(name, ms, format_ms(ms)) for name, ms in result.layers])]
    body.append("<h2>Measured</h2><ul>" + "".join(f"<li>{e(line)}</li>" for line in result.measurements)
                + "".join(f"<li>disturbed: {e(mark)}</li>" for mark in result.disturbance_marks()) + "</ul>")
    style = ("body{font-family:sans-serif;max-width:60em;margin:2em auto;color:#222}"
             "th{text-align:left;padding-right:1em}h3{margin-bottom:.2em}li{margin:.15em 0}")
    return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{e(advice_title(result))}</title>"
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n")


def report_text(result, path: str, environment: dict | None = None) -> str:
    """The report for `path`: HTML for .html or .htm, Markdown otherwise."""
    if path.lower().endswith((".html", ".htm")):
        return report_html(result, environment)
    return report_markdown(result, environment)
