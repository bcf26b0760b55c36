"""Backend flag switches. A flag that has no effect on the chosen device is disabled, with the reason
(from engine.flags.flag_applicability) beside it and in its tooltip."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label, Select, Static, Switch

from torchperf_tui.app.messages import FlagChanged
from torchperf_tui.options import cpu_count


class FlagRow(Horizontal):
    """One flag: its control, its label, and why it is disabled when it is."""

    DEFAULT_CSS = """
    FlagRow { height: auto; }
    FlagRow .flag-label { width: 1fr; }
    """

    def __init__(self, spec, value, ok: bool = True, reason: str | None = None, **kwargs) -> None:
        super().__init__(id=f"flag-row-{spec.name}", **kwargs)
        self.spec = spec
        self._value = value
        self._ok, self._reason = ok, reason

    def compose(self) -> ComposeResult:
        if self.spec.kind is bool:
            yield Switch(bool(self._value), id=f"flag-{self.spec.name}", animate=False,
                         tooltip=self.spec.help, disabled=not self._ok)
        else:
            cores = cpu_count()  # the same bound the CLI and the A/B SPECs enforce
            counts = sorted({1, 2, 4, 8, 16, cores} & set(range(1, cores + 1)) | {cores})
            yield Select([("auto", "auto")] + [(str(n), str(n)) for n in counts],
                         value="auto" if self._value is None else str(self._value),
                         allow_blank=False, id=f"flag-{self.spec.name}", compact=True,
                         tooltip=self.spec.help, disabled=not self._ok)
        yield Label(self._label_text(self._ok), classes="flag-label")

    def on_mount(self) -> None:
        self.set_applicable(self._ok, self._reason)

    def _label_text(self, ok: bool) -> str:
        return self.spec.label if ok else f"{self.spec.label} [dim]· n/a[/]"

    def set_applicable(self, ok: bool, reason: str | None) -> None:
        control = self.query_one(f"#flag-{self.spec.name}")
        control.disabled = not ok
        label = self.query_one(".flag-label", Label)
        label.update(self._label_text(ok))
        self.tooltip = self.spec.help if ok else f"{self.spec.label}: {reason}"
        control.tooltip = self.tooltip
        self.set_class(not ok, "-not-applicable")


class FlagsPane(Vertical):
    """All engine flags as switches; posts FlagChanged when the user flips one."""

    DEFAULT_CSS = "FlagsPane { height: auto; }"

    def compose(self) -> ComposeResult:
        yield Label("Flags", classes="section-title")
        yield Static("loading…", id="flags-loading", classes="loading")
        yield Static("", id="flags-reason", classes="dim-note")

    def build(self, specs, flags, device_kind: str, applicability) -> None:
        """Mount one row per FlagSpec; `applicability(name, device_kind)` -> (ok, reason)."""
        self.query_one("#flags-loading").remove()
        self._flags = flags
        rows = [FlagRow(spec, getattr(flags, spec.name), *applicability(spec.name, device_kind)) for spec in specs]
        self.mount_all(rows, before=self.query_one("#flags-reason"))
        self._show_reasons({row._reason for row in rows if not row._ok})

    def update_applicability(self, device_kind: str, applicability) -> None:
        reasons = set()
        for row in self.query(FlagRow):
            ok, reason = applicability(row.spec.name, device_kind)
            row.set_applicable(ok, reason)
            if not ok:
                reasons.add(reason)
        self._show_reasons(reasons)

    def _show_reasons(self, reasons: set) -> None:
        note = self.query_one("#flags-reason", Static)
        note.update("n/a: " + "; ".join(sorted(r for r in reasons if r)) if reasons else "")

    def set_values(self, flags) -> None:
        """Show `flags` without posting FlagChanged (the app changed them, not the user)."""
        self._flags = flags
        for row in self.query(FlagRow):
            control = row.query_one(f"#flag-{row.spec.name}")
            value = getattr(flags, row.spec.name)
            if isinstance(control, Switch):
                with control.prevent(Switch.Changed):
                    control.value = bool(value)
            else:
                with control.prevent(Select.Changed):
                    control.value = "auto" if value is None else str(value)

    _flags = None  # the flags as last built or set: a control reporting the same value is no change

    def _post_if_changed(self, name: str, value) -> None:
        if self._flags is not None and getattr(self._flags, name, object()) == value:
            return
        if self._flags is not None:
            self._flags = self._flags.replace(**{name: value})
        self.post_message(FlagChanged(name, value))

    @on(Switch.Changed)
    def _switch_changed(self, event: Switch.Changed) -> None:
        event.stop()
        self._post_if_changed((event.switch.id or "").removeprefix("flag-"), event.value)

    @on(Select.Changed)
    def _select_changed(self, event: Select.Changed) -> None:
        event.stop()
        value = None if event.value in ("auto", Select.BLANK) else int(event.value)
        self._post_if_changed((event.select.id or "").removeprefix("flag-"), value)
