"""The Device tab on an eight-GPU box (the fake NVML's): how the GPUs are linked and their P2P support in two tables
that scroll sideways beside the sidebar at 80x24, with the legends and each GPU's link peaks; none across one GPU."""

from __future__ import annotations

from tests.app.helpers import fixed_cpu, make_app, screen_text, wait_ready
from tests.engine.test_topology import EIGHT_GPU_LINKS, matrix
from tests.fakes.fake_cuda import FakeCuda
from tests.fakes.fake_nvml import eight_gpu_box
from torchperf_tui.engine.hardware.device import probe_device
from torchperf_tui.engine.hardware.nvml import Nvml


async def test_the_device_tab_shows_the_eight_gpu_matrix_and_scrolls_it_sideways_at_80x24():
    report = fixed_cpu(probe_device(nvml=Nvml.open(module=eight_gpu_box()), cuda=FakeCuda.unavailable()))
    app = make_app(device_report=report, answers={})
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await pilot.press("4")
        await pilot.pause()
        view = app.main.query_one("#device-topology")
        links = app.main.query_one("#topology-links")
        assert view.display
        rows = [[str(cell) for cell in links.get_row_at(k)] for k in range(links.row_count)]
        assert [row[1:9] for row in rows] == matrix(EIGHT_GPU_LINKS)
        assert rows[7][9:] == ["1", "32-63,96-127"]
        p2p = app.main.query_one("#topology-p2p")
        assert [str(cell) for cell in p2p.get_row_at(6)][8] == "OK/GNS"
        # narrower than the matrix beside the sidebar: the table scrolls sideways instead of wrapping its rows
        assert links.virtual_size.width > links.scrollable_content_region.width
        links.scroll_to(x=links.max_scroll_x, animate=False)
        await pilot.pause()
        assert links.scroll_x > 0
        assert "GPU5 (00000000:AB:00.0): NVLink 12 links 300.0 GB/s" in screen_text(app, "#topology-peaks")


async def test_one_gpu_shows_no_matrix():
    app = make_app(gpu=True, frozen=True, answers={})
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await pilot.press("4")
        await pilot.pause()
        assert not app.main.query_one("#device-topology").display
