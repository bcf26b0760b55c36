"""`why --report FILE.md|.html`: the set-up, the environment, the findings with their evidence and verdicts, and
the plots (the set-up's latency histogram with its median, the time of its slowest layers, each layer on the roofline
under the roofs kept for the device) in one self-contained file a user can attach to an issue. The HTML draws its
plots as SVG images inside the file (no script, nothing fetched); the Markdown as text bars and a table. The words are
wording/advice.py's."""

from __future__ import annotations

import base64
import html
import math

from torchperf_tui.core.formatting import compute_rate_text, format_ms
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
    if result.roofline:
        lines += ["## The layers on the roofline", "", roof_text(result.roofs), "",
                  "| layer | FLOPs a byte | reached | of the roof |", "|---|---|---|---|"]
        for name, intensity, rate in sorted(result.roofline, key=lambda p: -p[2])[:ROOFLINE_ROWS]:
            roof = roof_at(result.roofs, intensity)
            lines.append(f"| {name} | {intensity:.3g} | {compute_rate_text(rate)} | "
                         f"{f'{rate / roof * 100:.0f} %' if roof else 'n/a'} |")
        lines.append("")
    lines += ["## Measured", "", *[f"- {line}" for line in result.measurements],
              *[f"- note: {note}" for note in result.notes],
              *[f"- disturbed: {mark}" for mark in result.disturbance_marks()]]
    return "\n".join(lines).rstrip() + "\n"


ROOFLINE_ROWS = 20  # the Markdown's table: the layers reaching the most FLOP/s
LABELLED = 8  # the roofline's points named, those reaching the most FLOP/s first, where a name has room


def roof_at(roofs: tuple[float | None, float | None], intensity: float) -> float | None:
    """The roof over a layer of this many FLOPs a byte: the lower of the compute ceiling and the bandwidth times it
    (either alone where only one is kept; None where neither is)."""
    compute, bandwidth = roofs
    candidates = [v for v in (compute, bandwidth * intensity if bandwidth else None) if v]
    return min(candidates) if candidates else None


def roof_text(roofs: tuple[float | None, float | None]) -> str:
    """Which roofs the plot draws: 'roofs kept for the device: compute 0.16 TFLOP/s, copy 12.3 GB/s', or why none."""
    compute, bandwidth = roofs
    if not compute and not bandwidth:
        return "no ceilings kept for the device (torchperf-tui ceilings measures them): the layers without a roof"
    parts = ([f"compute {compute_rate_text(compute)}"] if compute else []) + (
        [f"copy {bandwidth / 1e9:.3g} GB/s"] if bandwidth else [])
    return "roofs kept for the device: " + ", ".join(parts)


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


def _svg_roofline(points: list[tuple[str, float, float]], roofs: tuple[float | None, float | None],
                  width: int = 640, height: int = 300) -> str:
    """Each layer a point at (FLOPs a byte, FLOP/s reached) on log-log axes, the roofs kept drawn over them; the five
    layers reaching the most named, every point's name in its title."""
    left, bottom, pad = 70, 30, 10
    xs = [i for _, i, _ in points]
    ys = [r for _, _, r in points]
    compute, bandwidth = roofs
    x_low, x_high = min(xs) / 2, max(xs) * 2
    if compute and bandwidth:  # the ridge in sight
        x_low, x_high = min(x_low, compute / bandwidth / 4), max(x_high, compute / bandwidth * 4)
    roof_values = [v for v in (compute, bandwidth * x_low if bandwidth else None,
                               bandwidth * x_high if bandwidth else None) if v]
    y_low, y_high = min(ys) / 2, max(ys + [min(roof_values)] if roof_values else ys) * 2
    if compute:
        y_high = max(y_high, compute * 1.5)

    def x(v: float) -> float:
        span = math.log10(x_high) - math.log10(x_low)
        return left + (width - left - pad) * (math.log10(v) - math.log10(x_low)) / span

    def y(v: float) -> float:
        return height - bottom - (height - bottom - pad) * (math.log10(v) - math.log10(y_low)) / (
            math.log10(y_high) - math.log10(y_low))

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             'font-family="monospace" font-size="11">',
             f'<line x1="{left}" y1="{height - bottom}" x2="{width - pad}" y2="{height - bottom}" stroke="#888"/>',
             f'<line x1="{left}" y1="{pad}" x2="{left}" y2="{height - bottom}" stroke="#888"/>',
             f'<text x="{width - pad}" y="{height - 8}" text-anchor="end">FLOPs a byte ({x_low:.2g} - {x_high:.2g})'
             '</text>',
             f'<text x="4" y="{pad + 10}">{html.escape(compute_rate_text(y_high))}</text>',
             f'<text x="4" y="{height - bottom}">{html.escape(compute_rate_text(y_low))}</text>']
    if roofs[0] or roofs[1]:
        steps = [x_low * (x_high / x_low) ** (i / 60) for i in range(61)]
        path = " ".join(f"{x(v):.1f},{y(min(max(roof_at(roofs, v), y_low), y_high)):.1f}" for v in steps)
        parts.append(f'<polyline points="{path}" fill="none" stroke="#e45756" stroke-width="2"/>')
    for name, intensity, rate in points:
        parts.append(f'<circle cx="{x(intensity):.1f}" cy="{y(rate):.1f}" r="4" fill="#4c78a8" fill-opacity="0.7">'
                     f'<title>{html.escape(name)}</title></circle>')
    placed: list[tuple[float, float, float]] = []  # (x, y, width) of the names drawn: none drawn over another
    for name, intensity, rate in sorted(points, key=lambda p: -p[2])[:LABELLED]:
        label = name[-24:]
        lx, ly, lw = x(intensity) + 6, y(rate) + 4, 6.6 * len(label)
        if lx + lw > width:  # near the right edge: the name on the point's left
            lx -= lw + 12
        if any(abs(ly - py) < 12 and lx < px + pw and px < lx + lw for px, py, pw in placed):
            continue
        placed.append((lx, ly, lw))
        parts.append(f'<text x="{lx:.1f}" y="{ly:.1f}">{html.escape(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _svg_histogram(bins: list[tuple[float, float, int]], median_ms: float | None = None, width: int = 640,
                   height: int = 160) -> str:
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
        low, high = bins[0][0], bins[-1][1]
        if median_ms is not None and high > low:
            mx = 10 + (width - 20) * (median_ms - low) / (high - low)
            anchor = "start" if mx < width / 2 else "end"  # the median's words on the side with room
            tx = mx + (4 if anchor == "start" else -4)
            parts.append(f'<line x1="{mx:.1f}" y1="0" x2="{mx:.1f}" y2="{height}" stroke="#e45756" '
                         f'stroke-width="2"/><text x="{tx:.1f}" y="10" text-anchor="{anchor}">median '
                         f'{html.escape(format_ms(median_ms))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _image(svg: str, alt: str) -> str:
    """An SVG as an image inside the page (a data URI): any browser draws it, as do renderers without inline SVG."""
    data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return f'<p><img alt="{html.escape(alt)}" src="data:image/svg+xml;base64,{data}"></p>'


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
        body += ["<h2>Latency of the set-up as given</h2>",
                 _image(_svg_histogram(bins, result.pass_ms), f"latency histogram, median {format_ms(result.pass_ms)}")]
    if result.layers:
        body += ["<h2>The slowest layers (own time a pass)</h2>",
                 _image(_svg_bars([(name, ms, format_ms(ms)) for name, ms in result.layers]), "the slowest layers")]
    if result.roofline:
        body += ["<h2>The layers on the roofline</h2>", f"<p>{e(roof_text(result.roofs))}</p>",
                 _image(_svg_roofline(result.roofline, result.roofs), "each layer's FLOP/s against its FLOPs a byte")]
    body.append("<h2>Measured</h2><ul>" + "".join(f"<li>{e(line)}</li>" for line in result.measurements)
                + "".join(f"<li>note: {e(note)}</li>" for note in result.notes)
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
