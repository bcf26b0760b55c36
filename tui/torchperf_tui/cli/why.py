"""`torchperf-tui why MODEL [options]`: the set-up's findings ranked, each fix measured (engine/analysis/advisor.py in
the measurement process), in words (wording/advice.py), as --json, or with --report as one file to attach to an
issue (wording/advice_report.py). No torch here."""

from __future__ import annotations

from torchperf_tui.cli import common
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.core.output_files import check_output_path, write_text
from torchperf_tui.wording.advice import advice_lines, advice_title
from torchperf_tui.wording.advice_report import report_text

REPORT_SUFFIXES = (".md", ".markdown", ".html", ".htm")


def check_report_path(path: str | None) -> None:
    """--report: a Markdown or HTML file that may be written, checked before anything is measured."""
    if path is None:
        return
    if not path.lower().endswith(REPORT_SUFFIXES):
        raise TorchperfError(f"--report {path}: write FILE.md or FILE.html (the report's format is its suffix)")
    check_output_path(path)


def why_command(args) -> int:
    check_report_path(args.report)
    common.check_history_writable(args)
    cfg = common.bench_config(args, warmup=args.warmup, iters=args.iters)
    options = {"budget_s": args.budget or None, "verify": args.verify, "threshold_pct": args.threshold,
               "blocks": args.blocks}
    result, extra = common.run_job("why", {"cfg": cfg, "options": options}, f"finding why {args.model} takes its time",
                                   on_progress=common.print_note)
    if not args.no_history and not result.cancelled:  # its findings, to compare with a later one's
        common.append_history(args, result, extra.get("fingerprint"))
    if args.report is not None:
        path = write_text(args.report, report_text(result, args.report, extra.get("fingerprint")))
        common.print_note("note", f"report written to {path}")

    def render(advice) -> None:
        print(advice_title(advice))
        print("\n".join(advice_lines(advice)))

    return common.output(args, result, render)
