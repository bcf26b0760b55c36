"""The job registry (measure/jobs.py) is the one list of job kinds: a new kind is one entry plus its runner, and the
CLI and the app send it alike; the lists that stay in app/ and cli/ (keys, palette, help, panes, engine modules,
commands) hold every entry's facts, and every kind either front end sends is in the registry."""

from __future__ import annotations

import argparse
import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.measure.in_process import InProcessMeasurement
from torchperf_tui.measure import cli_jobs, jobs
from torchperf_tui.measure.protocol import NOTE, JobDone, Started

PACKAGE = Path(jobs.__file__).resolve().parents[1]


def toy_job(params: dict, ctx) -> tuple[dict, dict]:
    """A job kind that is not in the package: a note beside its result, and an extra."""
    ctx.progress(NOTE, f"counting to {params['n']}")
    return {"counted": list(range(params["n"]))}, {"said": "done"}


TOY = jobs.JobKind("toy", f"{__name__}:toy_job", measures=True)


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(jobs.KINDS, "toy", TOY)


class Owner:
    """A pane as the session sees it: attached, taking the JobEvent messages of its jobs."""

    is_attached = True

    def __init__(self) -> None:
        self.messages: list = []

    def post_message(self, message) -> None:
        self.messages.append(message)


def test_a_new_kind_is_one_entry_and_its_runner_for_the_cli_and_the_app_alike(toy):
    notes: list = []
    result, extra = cli_jobs.run_job("toy", {"n": 3}, "counting", on_progress=lambda what, data: notes.append(data),
                                     process_factory=InProcessMeasurement)
    assert (result, extra) == ({"counted": [0, 1, 2]}, {"said": "done"})
    assert notes == ["counting to 3"]  # the CLI prints a job's notes on stderr

    from torchperf_tui.app.session import Session  # the app's side, as a pane sends a job

    events: list = []
    session = Session(measurement=lambda on_event, on_notice, cpus: InProcessMeasurement(on_event))
    session.start(events.append, lambda text: None)
    owner = Owner()
    job_id = session.submit("toy", {"n": 3}, "counting", owner, "slot")
    for event in events:  # the in-process measurement answers before submit returns
        if not isinstance(event, Started):  # as the App hands them over (app/app.py)
            session.dispatch(event)
    shown = [message.event for message in owner.messages]
    assert [type(event) for event in shown] == [JobDone]  # the note is the CLI's: the app leaves it out
    assert (shown[0].job_id, shown[0].result, shown[0].extra) == (job_id, result, extra)
    assert "toy" in jobs.measuring_kinds()  # measures: one at a time, by the client's rule and the app's


def test_a_kind_that_is_not_in_the_registry_is_a_bug():
    with pytest.raises(cli_jobs.MeasurementBug, match="unknown job kind 'toy'"):
        cli_jobs.run_job("toy", {"n": 1}, process_factory=InProcessMeasurement)


def test_the_registry_loads_without_torch_or_textual():
    script = ("import sys\nimport torchperf_tui.measure.jobs\n"
              "print(sorted(m for m in ('torch', 'textual', 'numpy') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "[]", proc.stderr


def test_every_runner_is_there():
    for name in jobs.KINDS:
        assert callable(jobs.runner_of(name)), name


def sent_kinds(folder: str, pattern: str) -> set[str]:
    """The job kinds the code under `folder` sends, as `pattern`'s group finds them."""
    found = set()
    for path in (PACKAGE / folder).rglob("*.py"):
        for match in re.findall(pattern, path.read_text()):  # a pattern of several groups: the one that matched
            found |= {group for group in (match if isinstance(match, tuple) else (match,)) if group}
    return found


def test_every_kind_either_front_end_sends_is_in_the_registry_and_none_is_a_twin():
    # a command sends a kind by run_job, or through run_across_ranks (cli/collectives.py: the ranks' commands)
    cli = sent_kinds("cli", r'\b(?:run_job|job)\(\s*"(\w+)"|\brun_across_ranks\(\s*args,\s*"(\w+)"')
    app = sent_kinds("app", r'jobs\.start\(\s*"(\w+)"')  # a pane starts a job by its kind
    assert cli and app
    assert cli <= set(jobs.KINDS) and app <= set(jobs.KINDS), (cli | app) - set(jobs.KINDS)
    for kind in jobs.KINDS.values():
        assert (kind.name in cli) == bool(kind.commands), kind.name
        assert (kind.name in app) == (kind.pane is not None), kind.name


def test_each_entrys_keys_palette_and_help_are_in_the_app():
    from torchperf_tui.app.commands import BINDINGS, PALETTE
    from torchperf_tui.app.screens.help import HELP

    bound = {binding.key: binding.action for binding in BINDINGS}
    palette = {title: action for title, _, action in PALETTE}
    for kind in jobs.KINDS.values():
        assert len(kind.keys) == len(kind.actions) == len(kind.palette), kind.name
        for key, action, title in zip(kind.keys, kind.actions, kind.palette):
            assert bound.get(key) == action, (kind.name, key)
            assert palette.get(title) == action, (kind.name, title)
            assert f"`{key}`" in HELP, (kind.name, key)


def test_each_entrys_pane_and_engine_module_are_the_apps():
    from torchperf_tui.app.screens.main import PANES
    from torchperf_tui.app.session import ENGINE_MODULES

    for kind in jobs.KINDS.values():
        assert kind.pane is None or kind.pane in PANES, kind.name
        assert kind.engine is None or kind.engine in ENGINE_MODULES, kind.name
        for action in kind.actions:  # a key that hands over to a pane names the kind's own
            owner = re.match(r"pane\('(\w+)'", action)
            assert owner is None or owner.group(1) == kind.pane, (kind.name, action)


def test_each_entrys_commands_are_the_clis():
    from torchperf_tui.cli.args import build_parser
    from torchperf_tui.cli.commands import COMMANDS

    parser = build_parser()
    sub = next(action for action in parser._actions  # noqa: SLF001 - argparse has no public list of subcommands
               if isinstance(action, argparse._SubParsersAction))  # noqa: SLF001
    for kind in jobs.KINDS.values():
        for command in kind.commands:
            assert command in COMMANDS and command in sub.choices, (kind.name, command)


def test_a_registry_entry_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        TOY.measures = False  # type: ignore[misc]
