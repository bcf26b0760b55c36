"""Backend flag switches: a row per entry of the flag table (core/flag_table.py). A flag that has no effect on the
chosen device is disabled, with the reason (from engine/measurements/flags.flag_applicability) beside it and in its
tooltip. A flag with choices (the SDPA backends, the matmul precision) is a compact select; an SDPA set the CPU has
no backend for is refused here, in one line, and the select goes back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Label, Select, Static, Switch

from torchperf_tui.app.widgets.exit_safe_select import ExitSafeSelect
from torchperf_tui.core.flag_table import flag_entry
from torchperf_tui.core.options import cpu_count
from torchperf_tui.engine.measurements.attention_flags import sdpa_refusal
from torchperf_tui.core.errors import user_message


# What a choice shows in a select ten cells wide; the value is the flag's own ('flash+math').
CHOICE_LABELS = {"efficient": "effic.", "flash+math": "fl+math", "highest": "highest"}


def choice_options(entry, value) -> list[tuple[str, str]]:
    """(shown, value) for each of a flag's choices, and the flag's value where it is none of them (a SPEC's)."""
    choices = list(entry.choices) + ([str(value)] if value is not None and str(value) not in entry.choices else [])
    return [(CHOICE_LABELS.get(choice, choice), choice) for choice in choices]


def state_text(value: bool) -> str:
    """A switch's state in words: its colour alone says nothing on a monochrome terminal, under NO_COLOR or to
    a reader who does not tell the colours apart."""
    return "on" if value else "off"


class FlagRow(Horizontal):
    """One flag: its control (a switch with its state in words beside it, or the thread count), its label, and
    why it is disabled when it is."""

    DEFAULT_CSS = """
    FlagRow { height: auto; }
    FlagRow .flag-label { width: 1fr; }
    """

    def __init__(self, entry, value, ok: bool = True, reason: str | None = None, **kwargs) -> None:
        super().__init__(id=f"flag-row-{entry.name}", **kwargs)
        self.entry = entry
        self._value = value
        self._ok, self._reason = ok, reason

    def compose(self) -> ComposeResult:
        if self.entry.kind is bool:
            yield Switch(bool(self._value), id=f"flag-{self.entry.name}", animate=False,
                         tooltip=self.entry.help, disabled=not self._ok)
            yield Label(state_text(bool(self._value)), classes="flag-state")
        elif self.entry.kind is str:
            yield ExitSafeSelect(choice_options(self.entry, self._value), value=str(self._value), allow_blank=False,
                                 id=f"flag-{self.entry.name}", compact=True, tooltip=self.entry.help,
                                 disabled=not self._ok)
        else:
            cores = cpu_count()  # the same bound the CLI and the A/B SPECs enforce
            counts = sorted({1, 2, 4, 8, 16, cores} & set(range(1, cores + 1)) | {cores})
            yield ExitSafeSelect([("auto", "auto")] + [(str(n), str(n)) for n in counts],
                                 value="auto" if self._value is None else str(self._value),
                                 allow_blank=False, id=f"flag-{self.entry.name}", compact=True,
                                 tooltip=self.entry.help, disabled=not self._ok)
        yield Label(self._label_text(self._ok), classes="flag-label")

    def on_mount(self) -> None:
        if not self.query(f"#flag-{self.entry.name}"):
            return  # the app is closing as the row mounts: its children are already gone
        self.set_applicable(self._ok, self._reason)
        if self.entry.kind is bool:  # every change of the value, a user's flip or set_values' quiet one
            self.watch(self.query_one(f"#flag-{self.entry.name}", Switch), "value", self._show_state)

    def _show_state(self, value: bool) -> None:
        state = self.query_one(".flag-state", Label)
        state.update(state_text(value))
        state.set_class(bool(value), "-on")

    def _label_text(self, ok: bool) -> str:
        return self.entry.label if ok else f"{self.entry.label} [dim]· n/a[/]"

    def set_applicable(self, ok: bool, reason: str | None) -> None:
        control = self.query_one(f"#flag-{self.entry.name}")
        control.disabled = not ok
        label = self.query_one(".flag-label", Label)
        label.update(self._label_text(ok))
        self.tooltip = self.entry.help if ok else f"{self.entry.label}: {reason}"
        control.tooltip = self.tooltip
        self.set_class(not ok, "-not-applicable")


class FlagsPane(Vertical):
    """All engine flags as switches. `flags` is the set a run uses, `previous` the set before the last flip
    (arm A of an A/B and of the kernels view); posts Changed when the user flips one."""

    DEFAULT_CSS = """
    FlagsPane { height: auto; }
    FlagsPane #flags-na { display: none; }
    """

    @dataclass
    class Changed(Message):
        """The user flipped a flag (or chose a thread count): the flags before and after."""

        before: Any
        after: Any

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.flags: Any = None  # engine.measurements.flags.Flags, from when the engine is loaded
        self.previous: Any = None
        self.reasons = ""  # which flags do nothing on the device, and why

    def compose(self) -> ComposeResult:
        yield Label("Flags", classes="section-title")
        yield Static("loading…", id="flags-loading", classes="loading")
        yield Static("", id="flags-reason", classes="dim-note")
        yield Static("", id="flags-na", classes="dim-note")

    def arms(self):
        """(A, B): the flags before the last flip (the defaults if none) and the flags now; None when equal."""
        a = self.previous if self.previous is not None else type(self.flags)()
        return (a, self.flags) if a != self.flags else None

    def show_applicability(self, entries, device_kind: str, applicability) -> None:
        """One row per FlagEntry the first time, then only which apply on `device_kind`;
        `applicability(name, device_kind)` -> (ok, reason)."""
        if self.query(FlagRow):
            self.update_applicability(device_kind, applicability)
            return
        self.query_one("#flags-loading").remove()
        rows = [FlagRow(entry, getattr(self.flags, entry.name), *applicability(entry.name, device_kind))
                for entry in entries]
        self.mount_all(rows, before=self.query_one("#flags-reason"))
        self._show_reasons([(row.entry.label, row._reason) for row in rows if not row._ok])

    def update_applicability(self, device_kind: str, applicability) -> None:
        not_applicable = []
        for row in self.query(FlagRow):
            ok, reason = applicability(row.entry.name, device_kind)
            row.set_applicable(ok, reason)
            if not ok:
                not_applicable.append((row.entry.label, reason))
        self._show_reasons(not_applicable)

    def _show_reasons(self, not_applicable: list[tuple[str, str | None]]) -> None:
        """Which flags do nothing here and why, by reason; on a short terminal their rows are hidden and one
        line names them (the reasons are then in the Device tab)."""
        by_reason: dict[str, list[str]] = {}
        for label, reason in not_applicable:
            by_reason.setdefault(reason or "no effect here", []).append(label)
        self.reasons = "\n".join(f"n/a {', '.join(labels)}: {reason}" for reason, labels in by_reason.items())
        self.query_one("#flags-reason", Static).update(self.reasons)
        labels = [label for label, _ in not_applicable]  # two lines at most: the sdpa and matmul rows need theirs
        named = ", ".join(labels) if len(labels) <= 2 else f"{labels[0]} and {len(labels) - 1} more"
        self.query_one("#flags-na", Static).update(f"n/a here: {named} (why: Device tab)" if labels else "")

    def set_values(self, flags) -> None:
        """Show `flags` as the switches would, without posting Changed (the demo set them, not the user)."""
        self.flags = flags
        for row in self.query(FlagRow):
            control = row.query_one(f"#flag-{row.entry.name}")
            value = getattr(flags, row.entry.name)
            if isinstance(control, Switch):
                with control.prevent(Switch.Changed):
                    control.value = bool(value)
            elif row.entry.kind is str:
                with control.prevent(Select.Changed):
                    control.set_options(choice_options(row.entry, value))
                    control.value = str(value)
            else:
                with control.prevent(Select.Changed):
                    control.value = "auto" if value is None else str(value)

    def _post_if_changed(self, name: str, value) -> None:
        if self.flags is None or getattr(self.flags, name, object()) == value:
            return  # a control reporting the value it was built with is no change
        try:
            after = self.flags.replace(**{name: value})
        except Exception as exc:
            self.app.notify(user_message(exc), severity="error")
            return
        self.previous, self.flags = self.flags, after
        self.post_message(self.Changed(self.previous, after))

    @on(Switch.Changed)
    def _switch_changed(self, event: Switch.Changed) -> None:
        event.stop()
        self._post_if_changed((event.switch.id or "").removeprefix("flag-"), event.value)

    @on(Select.Changed)
    def _select_changed(self, event: Select.Changed) -> None:
        event.stop()
        name = (event.select.id or "").removeprefix("flag-")
        if flag_entry(name).kind is str:
            if self._refused(name, str(event.value), event.select):
                return
            self._post_if_changed(name, str(event.value))
            return
        value = None if event.value in ("auto", Select.BLANK) else int(event.value)
        self._post_if_changed(name, value)

    def _refused(self, name: str, value: str, select: Select) -> bool:
        """An SDPA set the CPU has no backend for (efficient, cuDNN): one line, and the select back to the set in
        use. (On CUDA what a set leaves depends on the model's dtype and calls: the run's check says.)"""
        kind = self.app.session.device_kind()
        refusal = sdpa_refusal(value, kind) if name == "sdpa" and not kind.startswith("cuda") else None
        if refusal and self.flags is not None:
            self.app.notify(refusal, title="sdpa", severity="error")
            with select.prevent(Select.Changed):
                select.value = str(getattr(self.flags, name))
        return bool(refusal)
