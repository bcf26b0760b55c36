"""Device pane: what this box is (GPU facts with peak FLOPS and bandwidth, or CPU facts and why no
CUDA/NVML was found), with a device selector when there is a choice; across GPUs their links, and collectives across
them (key L, its own section: collectives_view.py). It owns the probe, which runs in the measurement process (torch
answers there), and tells the App the report (flags and the header need it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.markup import escape
from textual.message import Message
from textual.widgets import Select, Static

from torchperf_tui.app.widgets.exit_safe_select import ExitSafeSelect
from torchperf_tui.core.formatting import format_number
from torchperf_tui.wording.ceilings import ceiling_kind, measured_when, took_text
from torchperf_tui.wording.device import cpu_figures, formula_lines, gpu_figures, gpu_title, version_rows
from torchperf_tui.app.widgets.device.collectives_view import CollectivesView
from torchperf_tui.app.widgets.device.topology_view import TopologyView
from torchperf_tui.app.pane_jobs import PaneJobs
from torchperf_tui.app.messages import JobEvent
from torchperf_tui.measure.protocol import JobFailed, Progress
from torchperf_tui.core.errors import first_line, user_message
from torchperf_tui.engine.hardware.device import probe_device
from torchperf_tui.engine.measurements.flags import applicability_table


def gpu_text(gpu) -> str:
    v = gpu_figures(gpu)
    lines = [
        f"[b]{gpu_title(gpu)}[/]  (compute capability {v['compute capability']})",
        f"  {v['SMs']} SMs · memory {v['memory']} · L2 {v['L2 cache']} · bus {v['memory bus']}",
        f"  clocks SM {v['max SM clock']} · memory {v['max memory clock']} · power limit {v['power limit']}",
        f"  peak FP32 {v['peak FP32']} · FP16 tensor {v['peak FP16 tensor']} · BF16 tensor {v['peak BF16 tensor']}",
        f"  peak bandwidth {v['peak bandwidth']}",
    ]
    lines += [f"  [dim]{line}[/]" for line in formula_lines(gpu)]
    return "\n".join(lines)


def cpu_text(cpu) -> str:
    v = cpu_figures(cpu)
    return "\n".join([
        f"[b]CPU: {cpu.model}[/]",
        f"  {format_number(cpu.physical_cores)} physical / {format_number(cpu.logical_cores)} logical cores · "
        f"{v['frequency']} · RAM {v['RAM']}",
        f"  torch threads {v['torch threads']} · oneDNN (mkldnn) {v['oneDNN (mkldnn)']}",
    ])


def report_text(report) -> str:
    versions = [f"{label} {value}" for label, value, _ in version_rows(report)]
    lines = [" · ".join(versions if report.cuda_available else versions[:1])]
    if not report.cuda_available:
        lines.append(f"[b $warning]No CUDA device:[/] {report.cuda_reason or 'torch.cuda.is_available() is False'}")
    if report.nvml_available:
        lines.append(f"NVML: {len(report.gpus)} GPU(s)")
    else:
        lines.append(f"[b $warning]No NVML:[/] {report.nvml_reason or 'not available'}")
    lines.append("")
    for gpu in report.gpus:
        lines.append(gpu_text(gpu))
        lines.append("")
    lines.append(cpu_text(report.cpu))
    return "\n".join(lines)


def device_choices(report) -> list[str]:
    """Devices a run can use: the CPU, and each CUDA device torch can see."""
    choices = ["cpu"]
    if report.cuda_available:
        choices += [f"cuda:{g.index}" for g in report.gpus]
    return choices


def ceilings_text(result, device: str) -> str:
    """The kept ceilings of the device with the workload that gave each, or how to measure them."""
    if result is None:
        transfers = ", and the host-device transfers" if device.startswith("cuda") else ""
        return (f"\n[b]Measured ceilings[/] of {device}: none yet. Press C to measure the best of several matmuls "
                f"and 3x3 convolutions per dtype, and a large copy (seconds){transfers}; the roofline and MFU are then "
                "given against them too")
    lines = []
    for c in result.ceilings:
        ran = [t for t in c.tried if t.value is not None]
        of = f" (best of {len(ran)} tried)" if len(ran) > 1 else ""
        lines.append(f"  {ceiling_kind(c)} {c.dtype}: {c.text}, {escape(c.origin)}{of}")
    lines += [f"  {ceiling_kind(c)}: {c.text}, {escape(c.size)}" for c in getattr(result, "transfers", None) or ()]
    if getattr(result, "no_transfers", None):
        lines.append(f"  {escape(result.no_transfers)}")
    if result.outdated:
        lines.append(f"  [b $warning]outdated:[/] {escape(result.outdated)}")
    kept = f"\n  kept in {escape(str(result.path))}" if result.path else ""
    return (f"\n[b]Measured ceilings[/] of {device}, {measured_when(result.measured_at)} (C measures again)\n"
            + "\n".join(lines) + kept)


class DevicePane(VerticalScroll):
    """Filled from a DeviceReport once the measurement process has probed the device."""

    @dataclass
    class Probed(Message):
        """The device report is shown (session.report and session.applicability are set)."""

        report: Any

    @dataclass
    class ProbeFailed(Message):
        """The probe failed; `error` is one line."""

        error: str

    @dataclass
    class Chosen(Message):
        """The user chose another device in the selector ('cpu', 'cuda:N')."""

        device: str

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.jobs = PaneJobs(self)

    def probe(self) -> None:
        """The device report and which flags apply where, from the measurement process (tests with a fake
        GPU: probed here, through the injected seams)."""
        session = self.app.session
        if session.nvml_seam is not None or session.cuda_seam is not None:
            self._probe_with_seams()
        else:
            self.jobs.start("probe", {}, "probing the device", enforce_cancel=False)

    @work(thread=True, group="probe", exit_on_error=False)
    def _probe_with_seams(self) -> None:
        session = self.app.session
        try:
            report = session.fixed_report or probe_device(nvml=self.app.call_from_thread(session.nvml_handle),
                                                          cuda=session.cuda_seam)
            table = applicability_table()
        except Exception as exc:
            self.app.call_from_thread(self._failed, user_message(exc))
            return
        self.app.call_from_thread(self._probed, report, table)

    # -- measured ceilings (key C) ------------------------------------------------------------------------
    def load_ceilings(self) -> None:
        """The ceilings kept for the device runs go to (nothing is measured)."""
        self.jobs.start("ceilings_kept", {"device": self.app.session.resolved_device()}, "reading the kept ceilings",
                        slot="ceilings", enforce_cancel=False)

    def measure_ceilings(self) -> None:
        """Measure the ceilings of the device runs go to, now, and keep them."""
        device = self.app.session.resolved_device()
        widget = self.query_one("#device-ceilings", Static)
        widget.display = True
        widget.update(f"\n[b]Measured ceilings[/] of {device}: measuring…")
        self.jobs.start("ceilings", {"device": device, "refresh": True},
                        f"measuring the ceilings of {device}")

    def _ceilings_event(self, event) -> None:
        widget = self.query_one("#device-ceilings", Static)
        widget.display = True
        device = self.app.session.resolved_device()
        if isinstance(event, Progress):
            widget.update(f"\n[b]Measured ceilings[/] of {device}: measuring {escape(str(event.data))}…")
        elif isinstance(event, JobFailed) and event.cancelled:
            widget.update(f"\n[b]Measured ceilings[/] of {device}: cancelled")
        elif isinstance(event, JobFailed) or event.extra.get("corrupt"):  # a corrupt ceilings file: its line, here
            error = event.error if isinstance(event, JobFailed) else first_line(event.extra["corrupt"])
            widget.update(f"\n[b]Measured ceilings[/] of {device}: [b $error]error:[/] {escape(error)}")
        else:
            widget.update(ceilings_text(event.result, device))
            if event.result is not None and not event.result.cached:
                self.app.notify("kept: the next roofline gives MFU against them",
                                title=f"ceilings measured{took_text(event.result)}")

    # -- collectives across the GPUs or processes (key L) ----------------------------------------------------
    def run_collectives(self) -> None:
        """all_reduce, all_gather and reduce_scatter over message sizes, in the pane's collectives section."""
        self.query_one(CollectivesView).start()

    def device_known(self) -> None:
        """The device probed, or the selector's the session's now: the collectives section says where its run
        would go."""
        self.query_one(CollectivesView).device_known()

    @on(JobEvent)
    def _job_event(self, message: JobEvent) -> None:
        event = self.jobs.accept(message)
        if event is None:
            return
        if message.slot == "ceilings":
            self._ceilings_event(event)
            return
        if isinstance(event, JobFailed):
            self._failed(event.error)
            return
        fixed = self.app.session.fixed_report
        self._probed(fixed if fixed is not None else event.result, event.extra.get("applicability", {}))

    def _probed(self, report, applicability: dict) -> None:
        session = self.app.session
        session.report, session.applicability = report, applicability
        self.show_report(report, session.resolved_device())
        self.post_message(self.Probed(report))

    def _failed(self, error: str) -> None:
        self.show_error(error)
        self.post_message(self.ProbeFailed(error))

    DEFAULT_CSS = "DevicePane { height: 1fr; } DevicePane > Static { height: auto; }"

    def compose(self) -> ComposeResult:
        select = ExitSafeSelect([("auto", "auto")], value="auto", allow_blank=False, id="device-select", compact=True)
        select.display = False  # shown once the report says there is a choice
        yield select
        yield Static("loading…", id="device-facts", classes="loading")
        yield TopologyView(id="device-topology")
        yield CollectivesView(id="device-collectives")
        yield Static("", id="device-flags")
        ceilings = Static("", id="device-ceilings")
        ceilings.display = False  # until there is something to say (none on a fake GPU)
        yield ceilings
        yield Static("", id="device-roofline")

    def show_report(self, report, device: str) -> None:
        session = self.app.session
        if session.nvml_seam is None and session.cuda_seam is None:  # a fake GPU has no ceilings to read
            self.load_ceilings()
        facts = self.query_one("#device-facts", Static)
        facts.remove_class("loading")
        facts.update(report_text(report))
        self.query_one(TopologyView).show(getattr(report, "topology", None))
        choices = device_choices(report)
        select = self.query_one("#device-select", Select)
        # A selector where there is a choice (a GPU box: the CPU or each GPU), and where the device asked for
        # (--device cuda on a box without one) is not there: it is shown as such, and the CPU can be chosen.
        missing = device != "auto" and device not in choices
        select.display = len(choices) > 1 or missing
        with select.prevent(Select.Changed):
            select.set_options([(c, c) for c in choices] + ([(f"{device} (not available)", device)] if missing else []))
            select.value = device if device in choices or missing else ("cuda:0" if report.cuda_available else "cpu")

    def show_flags_note(self, device_kind: str, reasons: str) -> None:
        """The flags that change nothing for a model on this device, and why (the sidebar, when short, only
        names them)."""
        self.query_one("#device-flags", Static).update(
            f"\n[b]Flags on {'the GPU' if device_kind == 'cuda' else 'the CPU'}[/]\n"
            + ("\n".join(f"  {escape(line)}" for line in reasons.splitlines()) if reasons else "  every flag applies"))

    def show_roofline(self, label: str, notes: str) -> None:
        """Why the latest run's roofline figures are n/a on this device, in full (the Timing pane's line cuts
        the reasons short), and how the figures were computed."""
        self.query_one("#device-roofline", Static).update(
            f"\n[b]Roofline of run {label}[/] (Timing pane): the reasons and notes in full\n"
            + "\n".join(f"  {escape(note)}" for note in notes.splitlines()))

    def show_error(self, text: str) -> None:
        self.query_one("#device-facts", Static).update(f"[b $error]error:[/] {text}")

    @on(Select.Changed, "#device-select")
    def _chosen(self, event: Select.Changed) -> None:
        event.stop()
        # The selector reports its placeholder value as it mounts: only a change of device is a choice.
        if isinstance(event.value, str) and event.value != "auto" and event.value != self.app.session.device:
            self.post_message(self.Chosen(event.value))
