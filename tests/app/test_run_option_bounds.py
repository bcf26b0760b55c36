"""The run options' iterations and warm-up have the CLI's bounds (options.iters and options.warmup, one check for
both): a count past them is refused in one line and the field shows the value in use again."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from tests.app.helpers import notifications, wait_until
from torchperf_tui.core import options


@pytest.mark.parametrize("field_id, typed, message", [
    ("#option-iters", str(options.ITERS_MAX + 1), f"iters: must be at most {options.ITERS_MAX:,}"),
    ("#option-iters", "20000000", f"iters: must be at most {options.ITERS_MAX:,}"),
    ("#option-warmup", "1000000", f"warm-up: expected a count 0-{options.WARMUP_MAX:,} or 'auto'"),
])
async def test_a_count_past_the_clis_bound_is_refused_in_the_app_too(tiny_app, field_id, typed, message):
    async with tiny_app(size=(100, 30), warmup=3, iters=20) as pilot:
        app = pilot.app
        field = app.main.query_one(field_id, Input)
        before = field.value
        field.focus()
        field.value = ""
        await pilot.press(*typed, "enter")
        await wait_until(pilot, lambda: field.value == before, what="the value in use back in the field")
        assert (app.session.iters, app.session.warmup) == (20, 3)
        assert any(message in line for line in notifications(app)), notifications(app)


async def test_the_sidebars_run_options_are_the_tables_values_in_its_words(tiny_app):
    """The selects offer what core/run_option_table.py says each option takes, and their tooltips say its help: the
    words `--help` says for the same option (tests/test_run_option_table.py checks that side)."""
    from textual.widgets import Checkbox, Select

    from torchperf_tui.core.run_option_table import RUN_OPTIONS, run_option

    async with tiny_app(size=(100, 30)) as pilot:
        main = pilot.app.main
        for entry in RUN_OPTIONS:
            if entry.name in ("step", "optimizer") or not entry.sidebar:  # one select: the step with its optimizer
                continue
            widget = main.query_one(f"#{entry.name}" if entry.name == "dtype" else
                                    "#channels-last" if entry.name == "channels_last" else f"#option-{entry.name}")
            assert entry.help in str(widget.tooltip), (entry.name, widget.tooltip)
            if isinstance(widget, Select):
                offered = [value for _, value in widget._options if value is not Select.BLANK]  # noqa: SLF001
                assert offered == [value for _, value in entry.shown] or offered == list(entry.choices), entry.name
            elif isinstance(widget, Checkbox):
                assert str(widget.label) == entry.label
        step = main.query_one("#option-step", Select)
        assert [value for _, value in step._options] == ["infer", *(f"train:{name}" for name in  # noqa: SLF001
                                                                  run_option("optimizer").choices)]
        assert run_option("step").help in str(step.tooltip) and run_option("optimizer").help in str(step.tooltip)
