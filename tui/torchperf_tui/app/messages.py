"""The App-level messages: what comes from the measurement process and the engine loader, and what several
panes tell the App to pass on. A pane's own messages are nested in the pane that posts them
(`FlagsPane.Changed`, `ModelPicker.Analysed`, ...): "attributes down, messages up".

Timing samples arrive batched by the measurement process (at most every ~100 ms), never one message per
iteration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message


@dataclass
class EngineLoaded(Message):
    """The UI's engine modules were imported in a thread (Session.missing says what is not usable)."""


@dataclass
class MeasurementEvent(Message):
    """An event from the measurement process (measure/protocol.py), posted by its reader thread."""

    event: Any


@dataclass
class MeasurementNotice(Message):
    """One line about the measurement process itself: it died and was replaced, it could not start."""

    text: str


@dataclass
class JobEvent(Message):
    """An event of a job a pane started, posted to that pane: `slot` names the pane's purpose for it."""

    slot: str
    event: Any
    bubble = False


@dataclass
class RunsChanged(Message):
    """A kept run started, streamed, ended or was forgotten: the Compare view is out of date."""


@dataclass
class HistoryChanged(Message):
    """A run was appended to the history file."""
