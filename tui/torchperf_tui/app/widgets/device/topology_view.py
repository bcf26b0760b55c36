"""The Device tab's GPU topology: how the GPUs are linked and whether each reaches the others' memory (P2P), as
`nvidia-smi topo -m` lays it out, in two tables that scroll sideways where the pane is narrower than the matrix (eight
GPUs beside the sidebar at 80x24), with their legends and each GPU's link peaks. Shown across two GPUs or more."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.markup import escape
from textual.widgets import DataTable, Static

from torchperf_tui.wording.topology import (LINK_LEGEND, LINKS_TITLE, NUMBERING, P2P_LEGEND, P2P_TITLE, PEAKS_HEADING,
                                            gpu_link_lines, link_cells, link_header, p2p_cells, p2p_header, shown)


class TopologyView(Vertical):
    """Filled by `show(topology)`; hidden while there is no matrix to show."""

    DEFAULT_CSS = "TopologyView { height: auto; } TopologyView > DataTable { height: auto; }"

    def compose(self) -> ComposeResult:
        yield Static(f"\n[b]{LINKS_TITLE}[/]")
        yield DataTable(id="topology-links", cursor_type="none", zebra_stripes=True)
        yield Static(escape(LINK_LEGEND), classes="legend")
        yield Static(f"\n[b]{P2P_TITLE}[/]")
        yield DataTable(id="topology-p2p", cursor_type="none", zebra_stripes=True)
        yield Static(escape(P2P_LEGEND), classes="legend")
        yield Static("", id="topology-peaks")

    def on_mount(self) -> None:
        self.display = False

    def show(self, topology) -> None:
        self.display = shown(topology)
        if not self.display:
            return
        for selector, header, rows in (("#topology-links", link_header(topology), link_cells(topology)),
                                       ("#topology-p2p", p2p_header(topology), p2p_cells(topology))):
            table = self.query_one(selector, DataTable)
            table.clear(columns=True)
            table.add_columns(*header)
            table.add_rows(rows)
        notes = [f"n/a: {note}" for note in topology.notes]
        self.query_one("#topology-peaks", Static).update(
            "\n" + "\n".join(escape(line) for line in [PEAKS_HEADING, *gpu_link_lines(topology), NUMBERING, *notes]))
