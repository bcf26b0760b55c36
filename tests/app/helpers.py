"""Shared pieces for the UI tests: waiting on the app, fixed device reports, a frozen telemetry source."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import NamedTuple

TINY = "tests.tinymodels:tiny_cnn"
GiB = 1024**3


async def wait_until(pilot, predicate, timeout: float = 120.0, what: str = "condition", shown=None) -> None:
    """Let the app run until `predicate()` is true (workers report through messages). The app runs on this loop
    and draws on its own timer meanwhile: the wait sleeps between looks. Pilot's pause would first wait for every
    widget's queue (a message to each of hundreds) and then refresh the screen, at each look. `shown`: what the
    screen says instead, for the failure's message (a wait that times out on a busy CI box is read from it)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            instead = f"; the screen shows {shown()!r}" if shown is not None else ""
            raise AssertionError(f"timed out waiting for {what}{instead}")
        await asyncio.sleep(0.05)


class Shown(NamedTuple):
    """One notification as the app asked for it to be shown."""

    message: str
    title: str
    severity: str
    timeout: float | None = None  # seconds the toast stays (None: Textual's default)


def recording_notify(notify):
    """App.notify wrapped to keep every notification the app shows, on the app (tests/app/conftest.py installs it
    for every app test). A toast expires (6 s by default, less than a busy box can take between showing it and
    the test's check), so a test reads this record, never `app._notifications`."""

    def notify_and_record(self, message, *args, **kwargs):
        self.__dict__.setdefault("_shown_notifications", []).append(
            Shown(str(message), str(kwargs.get("title", "")), str(kwargs.get("severity", "information")),
                  kwargs.get("timeout")))
        return notify(self, message, *args, **kwargs)

    notify_and_record.records_notifications = True
    return notify_and_record


def shown_notifications(app) -> list[Shown]:
    """Every notification `app` has shown since it started, in order, expired toasts included."""
    if not getattr(type(app).notify, "records_notifications", False):
        raise AssertionError("notifications are recorded only in the app tests (tests/app/conftest.py)")
    return list(app.__dict__.get("_shown_notifications", []))


def notifications(app) -> list[str]:
    """The messages of every notification `app` has shown, expired toasts included."""
    return [shown.message for shown in shown_notifications(app)]


async def toasts_gone(pilot, timeout: float = 60.0) -> None:
    """Let every toast on the screen expire, as a user waits for one to leave: a snapshot must not catch a toast
    that a slower box would already have taken away."""
    await wait_until(pilot, lambda: not pilot.app.screen.query("Toast"), timeout, "the toasts to expire")


async def run_and_wait(pilot, run_id: int = 1) -> None:
    """Press r and wait for run `run_id` to finish (done, cancelled or failed)."""
    app = pilot.app
    await pilot.press("r")
    await wait_until(pilot, lambda: app.session.runs.get(run_id) is not None and app.session.runs.get(run_id).finished,
                     what=f"run #{run_id} to finish")


async def wait_ready(pilot, timeout: float = 90.0) -> None:
    """Engine imported, device probed, catalogue listed and flag switches built: every flag's row holds its control.
    (A row is in the screen before it has composed its switch: a stress run saw a flip find the rows and no
    '#flag-cudnn_benchmark' in them, once this wait no longer let the app's queues empty at each look.)"""
    app = pilot.app

    def ready() -> bool:
        rows = app.main.query("FlagRow")
        return (app.session.report is not None and app.pane("flags").flags is not None
                and bool(rows) and all(_flag_control(row) for row in rows)
                and bool(app.main.query_one("#model-list").option_count > 1))

    await wait_until(pilot, ready, timeout, "the engine to load")


def _flag_control(row):
    """The control a flag's row composes (its switch, or its select), or an empty query while it has not yet."""
    return row.query("#" + (row.id or "").replace("flag-row-", "flag-", 1))


async def flip(pilot, name: str, attempts: int = 5, follow_s: float = 30.0) -> None:
    """Click the switch of flag `name` as a user would, and return once the Flags pane holds the new value.
    A click can land on a toast or tooltip that happens to lie over the switch at that moment (CI saw the
    run after a flip never start): then it is clicked again, and a switch that never flips fails the test.
    A click that did land is never repeated, however slowly the pane follows: on a busy box a second click
    would flip the switch back (a stress run saw the retries start run after run and push run #1 out)."""
    from textual.widgets import Switch

    flags = pilot.app.pane("flags")
    before = getattr(flags.flags, name)
    await wait_until(pilot, lambda: pilot.app.main.query(f"#flag-{name}"), what=f"the switch of {name}")
    switch = pilot.app.main.query_one(f"#flag-{name}", Switch)
    # Below the sidebar's fold (a flag more than the terminal has rows for) it is scrolled into sight first, as a
    # user scrolls to it: a click on a switch out of sight lands elsewhere.
    switch.scroll_visible(animate=False)
    await wait_until(pilot, lambda: switch.region.area > 0 and pilot.app.screen.get_widget_at(
        switch.region.x, switch.region.y)[0] is switch, what=f"the switch of {name} in sight")
    for _ in range(attempts):
        await pilot.click(switch)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            if getattr(flags.flags, name) != before:
                return
            if switch.value != bool(before):  # the click landed: wait for the pane, never click again
                await wait_until(pilot, lambda: getattr(flags.flags, name) != before, follow_s,
                                 f"the Flags pane to take the flip of {name}")
                return
            await pilot.pause(0.05)
        pilot.app.clear_notifications()
    raise AssertionError(f"clicking #flag-{name} did not flip it")


def analysed(app, spec: str | None = None) -> bool:
    """The picker holds the analysis of `spec` (any model when None) and the screen shows it: the picker sets
    its result before the App hears of it, so a test that read the summary on the first alone could race."""
    from torchperf_tui.wording.complexity import complexity_summary

    picker = app.pane("picker")
    if picker.complexity is None or (spec is not None and picker.model != spec):
        return False
    summary = " ".join(screen_text(app, "#model-summary").split())
    return f"{picker.model} · {complexity_summary(picker.complexity)}" in summary


async def first_recorded_run(pilot, path):
    """Press r and wait for the run's record in the history file at `path`, as History would list it: the record."""
    from torchperf_tui.engine.records.history_file import HistoryFile

    await pilot.press("r")
    await wait_until(pilot, lambda: path.exists() and HistoryFile(str(path)).load().records,
                     what="the run in the history file")
    return HistoryFile(str(path)).load().records[-1]


async def paste(pilot, text: str, *then: str) -> None:
    """`text` pasted into the focused field, as a terminal sends a paste (one event), then the keys `then` pressed
    (⏎, Tab). The field takes it as typed text: its Changed, then Submitted or Blurred. Typing it key by key costs
    two idle waits of Pilot's a key, seconds for a model's spec; a test of what each key does types it."""
    from textual import events

    pilot.app.post_message(events.Paste(text))
    await pilot.pause()
    if then:
        await pilot.press(*then)


async def paste_into(pilot, field_id: str, text: str) -> None:
    """Focus the field `field_id`, clear it and paste `text` with ⏎, as a user enters a value there."""
    field = pilot.app.main.query_one(f"#{field_id}")
    field.focus()
    field.value = ""
    await paste(pilot, text, "enter")


async def choose_model(pilot, spec: str = TINY, shape: str = "3x32x32") -> None:
    """Paste the spec and the input shape into their fields as a user would, and wait for the analysis at that
    shape (for a model whose analysis fails, for its error line). Before the first model the shape goes first: it
    is then that model's, analysed once at it; after one, the model first and then its shape."""
    app = pilot.app
    picker = app.pane("picker")
    size = int(shape.split("x")[-1])
    first = picker.model is None and "oom" not in spec
    if first:
        await paste_into(pilot, "shape", shape)
    await paste_into(pilot, "custom-model", spec)
    if "oom" in spec:  # its forward raises, so the analysis fails too: wait for that error
        await wait_until(pilot, lambda: picker.model == spec and "error" in screen_text(app, "#model-summary"),
                         what="the analysis error")
        app.main.query_one("#shape").value = shape
        await pilot.press("escape")
        return
    if not first:
        await wait_until(pilot, lambda: analysed(app, spec), what="the analysis")
        await paste_into(pilot, "shape", shape)
    await wait_until(pilot, lambda: analysed(app, spec) and picker.complexity.input_shape[-1] == size,
                     what="the analysis at the shape typed")
    await pilot.press("escape")


async def pick_listed(pilot, name: str) -> None:
    """/, the catalogue model's name typed into the filter and ⏎, as a user picks a listed model (at its default
    input); returns once its analysis is shown."""
    await pilot.press("slash", *name, "enter")
    await wait_until(pilot, lambda: analysed(pilot.app, name), what=f"the analysis of {name}")
    await pilot.press("escape")


async def run_custom_model(pilot, spec: str) -> None:
    """Paste a module:factory into the custom field as a user would (the field cleared first), wait for its
    analysis, and press r."""
    app = pilot.app
    await paste_into(pilot, "custom-model", spec)
    await wait_until(pilot, lambda: analysed(app, spec), what=f"the analysis of {spec}")
    await pilot.press("escape", "r")


def screen_text(app, selector: str) -> str:
    """The plain text a Static shows."""
    rendered = app.main.query_one(selector).render()
    return rendered.plain if hasattr(rendered, "plain") else str(rendered)


def fixed_cpu(report):
    """The report with CPU facts fixed, so snapshots do not depend on the machine."""
    from torchperf_tui.engine.hardware.device import CpuFacts

    cpu = CpuFacts(model="Test CPU 8-core", physical_cores=8, logical_cores=16, freq_mhz=3000.0,
                   ram_total_bytes=64 * GiB, torch_threads=8, mkldnn_available=True)
    return dataclasses.replace(report, cpu=cpu, torch_version="2.x (test)")


def cpu_report():
    from torchperf_tui.engine.hardware.device import DeviceReport
    from torchperf_tui.engine.hardware.nvml import NA

    return fixed_cpu(DeviceReport(
        torch_version="", cuda_available=False,
        cuda_reason="this PyTorch build has CUDA but no NVIDIA driver was found",
        cuda_runtime=NA("no CUDA"), cudnn_version=NA("no CUDA"), driver_version=NA("no driver"),
        nvml_available=False, nvml_reason="NVML library not found (libnvidia-ml.so.1)",
        gpus=[], cpu=None))


def gpu_report_and_fakes():
    from tests.fakes.fake_cuda import h100_fakes
    from torchperf_tui.engine.hardware.device import probe_device
    from torchperf_tui.engine.hardware.nvml import Nvml

    fake_nvml, fake_cuda = h100_fakes()
    report = probe_device(nvml=Nvml.open(module=fake_nvml), cuda=fake_cuda)
    return fixed_cpu(report), fake_nvml, fake_cuda


# The real measurement process the app tests get (tests/app/conftest.py sets it for each test): the worker's warm
# one (tests/fakes/shared_measurement.py), or None where the test keeps a process of its own.
REAL_PROCESS: dict = {"shared": None}


def real_process():
    """The client factory of the real measurement process for this test's apps: the worker's shared one, or
    measure/client.py's MeasurementProcess (a process of the app's own) where the test is marked `own_process`."""
    from torchperf_tui.measure.client import MeasurementProcess

    return REAL_PROCESS["shared"] or MeasurementProcess


def make_app(*, gpu: bool = False, frozen: bool = False, answers: dict | None = None, measurement=None,
             poll_telemetry: bool = False, **options):
    """Every test app: the package's make_app (app/factory.py) with telemetry sampled once (`poll_telemetry=True`:
    polled) and these tests' fakes as its seams.

    `gpu`: on the fake H100 of `gpu_report_and_fakes` (its NVML and CUDA seams), else on this box's CPU. `frozen`:
    the device report fixed (CPU facts pinned) and a frozen telemetry source, for snapshots. `answers`: the
    measurement process is a FakeMeasurement answering those job kinds with recorded results (tests/app/
    recorded_answers.py) and handing the rest to a real one; `measurement`: another client factory (a
    FakeMeasurement the test keeps, to read its requests); neither: the real measurement process, the worker's
    warm one (`real_process()`) unless the test is marked `own_process`."""
    from torchperf_tui.app.factory import Seams, make_app as build_app

    if answers is not None:
        if measurement is not None:
            raise ValueError("answers or measurement, not both")
        from tests.fakes.fake_measurement import FakeMeasurement

        measurement = FakeMeasurement(answers, real=real_process())
    elif measurement is None:
        measurement = real_process()
    # a seam a test gives by name (a telemetry source, a fixed device report) goes with the others
    seams: dict = {"measurement": measurement,
                   **{name: options.pop(name) for name in ("device_report", "telemetry", "nvml", "cuda")
                      if name in options}}
    if gpu:
        report, seams["nvml"], seams["cuda"] = gpu_report_and_fakes()
        if frozen:
            seams["device_report"] = report
    elif frozen:
        seams["device_report"] = cpu_report()
    if frozen:
        seams["telemetry"] = FrozenTelemetry(gpu=gpu)
    return build_app(Seams(**seams), poll_telemetry=poll_telemetry, **options)


class FrozenTelemetry:
    """A telemetry source that returns the same history every time (for deterministic snapshots)."""

    def __init__(self, gpu: bool) -> None:
        from torchperf_tui.engine.hardware.nvml import NA
        from torchperf_tui.engine.hardware.telemetry import GpuSample, TelemetrySample

        samples = []
        for i in range(20):
            used = (4 + (i % 5)) * GiB if i < 15 else 2 * GiB  # a release shows as the drop at the end
            gpus = [GpuSample(index=0, mem_used_bytes=used, mem_total_bytes=80 * GiB,
                              mem_free_bytes=80 * GiB - used, util_gpu_pct=40 + i, util_mem_pct=20,
                              temperature_c=45, power_w=210.0, sm_clock_mhz=1980)] if gpu else []
            no_cuda = NA("no CUDA")
            samples.append(TelemetrySample(
                timestamp=1_000_000.0 + 0.5 * i, gpus=gpus,
                torch_allocated_bytes=1 * GiB if gpu else no_cuda,
                torch_reserved_bytes=3 * GiB if gpu else no_cuda,
                torch_peak_bytes=3 * GiB if gpu else no_cuda,
                process_rss_bytes=(700 + 10 * (i % 5)) * 1024**2,
                system_ram_used_bytes=20 * GiB, system_ram_total_bytes=64 * GiB))
        self.history = samples

    def sample(self):
        return self.history[-1]


def in_sight(app, widget) -> bool:
    """The widget lies within the screen and within every container around it (a tab scrolled or not)."""
    region = widget.region
    if region.height == 0 or region.width == 0:
        return False
    return all(ancestor.region.contains_region(region) for ancestor in widget.ancestors
               if hasattr(ancestor, "region") and ancestor is not app)


def column_in_sight(table, key: str) -> bool:
    """The column `key` ends within the table's width without scrolling (its left columns' widths summed)."""
    right = 0
    for column_key, column in table.columns.items():
        right += column.get_render_width(table)
        if column_key.value == key:
            return right <= table.scrollable_content_region.width
    raise KeyError(key)


def row_cells(table, index: int) -> dict[str, str]:
    """Row `index` of a DataTable as {column key: cell text}: a test names the column it reads, so a column moved
    for the layout's sake does not make it read another."""
    return {key.value: str(cell) for key, cell in zip(table.columns, table.get_row_at(index))}


def read_pty(fd: int, proc, out: bytearray, until, timeout: float) -> bool:
    """Read what a program started on a pty writes (a full pty would block it) into `out` until `until(out)`,
    the program's end or the deadline; whether `until(out)` holds."""
    import os
    import select
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if until(out):
            return True
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                chunk = b""
            if not chunk:
                if proc.poll() is not None:
                    return until(out)
                time.sleep(0.05)
                continue
            out.extend(chunk)
        elif proc.poll() is not None and until(out):
            return True
    return until(out)
