"""The CLI's printed output: tables without trailing blanks, and a progress line that is taken away before the result
(a sweep's lengths are said once, in its table)."""

from __future__ import annotations

import io

from rich.table import Table

from torchperf_tui.cli import render as cli_render
from torchperf_tui.cli.render import ProgressLine, console, print_kv


def test_tables_end_their_lines_without_blanks(capsys):
    print_kv("a heading", [("key", "value"), ("a longer key", "v"), ("k", "a much longer value than the others")])
    table = Table(box=None, header_style="bold")
    for column in ("length", "p50", "peak memory"):
        table.add_column(column, justify="right")
    table.add_row("64", "282 ms", "424.0 KiB")
    table.add_row("128", "283 ms", "1.2 MiB")
    console.print(table)
    out = capsys.readouterr().out
    assert "a longer key  v" in out and "128  283 ms" in out
    assert [line for line in out.splitlines() if line != line.rstrip()] == []


def test_trailing_blanks_go_before_the_style_codes_that_close_a_line(capsys):
    cli_render.TrimmedStdout().write("cell  \x1b[0m\nnext   \n  kept leading\nno newline  ")
    assert capsys.readouterr().out == "cell\x1b[0m\nnext\n  kept leading\nno newline  "


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_line_is_redrawn_in_place_and_taken_away(monkeypatch):
    err = FakeTerminal()
    monkeypatch.setattr("sys.stderr", err)
    line = ProgressLine(enabled=True)
    first, second = "length     64: 282 ms p50", "length    128: 1 ms"
    line.show(first)
    line.show(second)
    line.close()
    written = err.getvalue()
    assert "\n" not in written  # never a line of its own: nothing stays on the screen above the result
    covered = " " * (len(first) - len(second))  # the longer line before it is drawn over to its end
    assert written == f"\r{first}\r{second}{covered}\r{' ' * len(second)}\r"


def test_no_progress_line_off_a_terminal(monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    line = ProgressLine(enabled=False)
    line.show("length 64")
    line.close()
    assert err.getvalue() == ""
