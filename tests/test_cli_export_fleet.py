"""`export --format github-benchmark | pytorch-v3` as a CI job runs it: written whole to --output (beside the
target, then renamed), what was written said on stderr, bad input one line and exit 2; and the GitHub Actions
workflow of docs/history-and-ci.md: valid YAML whose torchperf-tui commands the CLI's parser takes."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
from pathlib import Path

import pytest

from tests.cli_run import run
from tests.records import make_record
from torchperf_tui.cli.args import build_parser
from torchperf_tui.engine.records.history_file import HistoryFile

CI_PAGE = Path(__file__).resolve().parents[1] / "docs" / "history-and-ci.md"


@pytest.fixture
def history(tmp_path):
    path = tmp_path / "h.jsonl"
    cancelled = dataclasses.replace(make_record(5.0, model="cancelled_net"), cancelled=True)
    HistoryFile(path).extend([make_record(10.0), make_record(8.0, model="resnet50"), cancelled])
    return str(path)


def _leftovers(folder) -> list[str]:
    return [name for name in os.listdir(folder) if name.endswith(".tmp")]


def test_github_benchmark_goes_to_output_whole_and_says_what_it_wrote(capsys, tmp_path, history):
    target = tmp_path / "latency.json"
    target.write_text("an older export, longer than the new one " * 100)
    code, out, err = run(capsys, "--history", history, "export", "--format", "github-benchmark", "--output",
                         str(target))
    assert code == 0 and out == ""
    assert err.strip() == f"wrote 2 entries (2 runs, 1 cancelled left out) to {target}"
    entries = json.loads(target.read_text())
    assert [(e["value"], e["unit"]) for e in entries] == [(10.0, "ms"), (8.0, "ms")]
    assert _leftovers(tmp_path) == []
    code, _, err = run(capsys, "--history", history, "export", "--format", "github-benchmark", "--metric",
                       "throughput", "--output", str(target))
    assert code == 0 and [e["unit"] for e in json.loads(target.read_text())] == ["samples/s", "samples/s"]


def test_pytorch_v3_goes_to_stdout_as_a_json_array(capsys, history):
    code, out, err = run(capsys, "--history", history, "export", "--format", "pytorch-v3")
    assert code == 0 and err == ""
    rows = json.loads(out)
    assert len(rows) == 12 and {row["model"]["name"] for row in rows} == {"resnet18", "resnet50"}  # 6 metrics each


def test_an_empty_history_exports_an_empty_array(capsys, tmp_path):
    for fmt in ("github-benchmark", "pytorch-v3"):
        code, out, _ = run(capsys, "--history", str(tmp_path / "none.jsonl"), "export", "--format", fmt)
        assert code == 0 and json.loads(out) == []


@pytest.mark.parametrize("argv, words", [
    (["--format", "xlsx"], "invalid choice: 'xlsx'"),
    (["--format", "github-benchmark", "--metric", "memory"], "invalid choice: 'memory'"),
    (["--format", "csv", "--metric", "throughput"], "csv has no choice"),
    (["--format", "pytorch-v3", "--metric", "latency"], "pytorch-v3 carries every metric"),
])
def test_bad_export_options_are_one_line_and_exit_2(capsys, history, argv, words):
    code, out, err = run(capsys, "--history", history, "export", *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and words in err


def test_an_output_that_is_a_directory_is_refused_in_one_line(capsys, tmp_path, history):
    code, _, err = run(capsys, "--history", history, "export", "--format", "pytorch-v3", "--output", str(tmp_path))
    assert code == 2 and err.count("\n") == 1 and _leftovers(tmp_path) == []


# -- the documented workflow ---------------------------------------------------------------------------------

def _workflow_text() -> str:
    text = CI_PAGE.read_text(encoding="utf-8")
    section = text.split("\n## In CI\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```yaml\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "the CI section holds one workflow"
    return blocks[0]


def _commands(workflow: str) -> list[list[str]]:
    """Each torchperf-tui command of the workflow's steps, as argv (a redirect and what follows it dropped)."""
    commands = []
    for line in workflow.replace("\\\n", " ").splitlines():
        line = line.strip()
        if line.startswith("run:"):
            line = line[4:].strip()
        if line.startswith("torchperf-tui "):
            argv = shlex.split(line)[1:]
            commands.append(argv[:argv.index(">")] if ">" in argv else argv)
    return commands


def _parser_knows(command: str, option: str) -> bool:
    sub = next(a for a in build_parser()._subparsers._group_actions).choices[command]  # noqa: SLF001
    return option in sub._option_string_actions  # noqa: SLF001


def test_the_documented_workflow_benches_gates_and_exports_with_commands_the_cli_takes():
    workflow = _workflow_text()
    commands = _commands(workflow)
    assert [argv[0] for argv in commands] == ["bench", "compare", "bench", "export", "export"]
    assert ["--baseline", "base.json", "--fail-if-slower", "5"] == commands[1][1:]
    assert commands[3][1:] == ["--format", "github-benchmark", "--output", "latency.json"]
    assert commands[4][1:] == ["--format", "github-benchmark", "--metric", "throughput", "--output", "throughput.json"]
    assert "scripts/install.sh" in workflow and "--json > " in workflow
    from torchperf_tui.cli.baseline import baseline_requested

    assert _parser_knows("compare", "--baseline")
    for argv in commands:  # parsed as main() parses them (compare --baseline leaves MODEL, --a and --b out)
        assert build_parser(baseline=baseline_requested(argv)).parse_args(argv).command == argv[0]


def test_the_documented_workflow_is_yaml_that_feeds_each_export_to_github_action_benchmark():
    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load(_workflow_text())
    steps = workflow["jobs"]["perf"]["steps"]
    assert all(isinstance(step, dict) and ("run" in step or "uses" in step) for step in steps)
    actions = [step["with"] for step in steps if step.get("uses", "").startswith("benchmark-action/")]
    assert [(a["tool"], a["output-file-path"]) for a in actions] == [("customSmallerIsBetter", "latency.json"),
                                                                     ("customBiggerIsBetter", "throughput.json")]
    runs = "\n".join(step.get("run", "") for step in steps)
    assert "compare --baseline base.json --fail-if-slower 5" in runs
