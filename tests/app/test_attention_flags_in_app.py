"""The SDPA backends in the app: a select in the Flags pane that re-runs timing as the other flags do, a set the
CPU has no backend for refused in one line (the select goes back), and k tables the attention kernel each arm ran."""

from __future__ import annotations

from textual.widgets import Select

from tests.app.helpers import notifications, screen_text, wait_until

ATTENTION = "tests.attention_models:tiny_attention"


def _rows(app) -> list[list[str]]:
    table = app.main.query_one("#kernels-table")
    return [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]


async def test_the_sdpa_select_reruns_refuses_efficient_on_the_cpu_and_k_names_each_arms_kernel(tiny_app):
    async with tiny_app(spec=ATTENTION, shape="64x32", size=(110, 34), warmup=1, iters=5) as pilot:
        app = pilot.app
        flags = app.pane("flags")
        select = app.main.query_one("#flag-sdpa", Select)
        assert select.value == "all" and not select.disabled
        assert app.main.query_one("#flag-matmul_precision", Select).value == "highest"

        select.value = "efficient"  # no such backend on the CPU: one line, and the select back to 'all'
        await wait_until(pilot, lambda: any("only on CUDA" in n for n in notifications(app)), what="the refusal")
        await pilot.pause()
        assert select.value == "all" and flags.flags.sdpa == "all"

        timing = app.pane("timing")
        select.value = "math"  # a flip re-runs timing under the new set
        await wait_until(pilot, lambda: flags.flags.sdpa == "math" and timing.record is not None, what="a run")
        select.value = "flash"
        await wait_until(pilot, lambda: flags.flags.sdpa == "flash", what="the second flip")
        await pilot.press("k")
        pane = app.main.query_one("KernelsPane")
        await wait_until(pilot, lambda: pane.result is not None, what="the kernel profile")
        table = _rows(app)
        assert len(table) == 1 and table[0][0].endswith("attn") and "math→flash" in table[0][3]
        assert (table[0][4], table[0][5]) == ("math", "flash")
        assert "1 of 1 attention site changed kernel" in screen_text(app, "#kernels-summary")
        assert "sdpa=math" in screen_text(app, "#kernels-status") and "sdpa=flash" in screen_text(app, "#kernels-status")
