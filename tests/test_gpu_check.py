"""scripts/gpu_check.sh, the check run first on a lent GPU machine, tried here as a dry run: every command it would
run parses with the CLI's own parser, OUT holds at most 8 files and no folder, a budget too small skips a section
and says so, and bad arguments are one line and exit 2."""

from __future__ import annotations

import os
import shlex
import subprocess
import tarfile
from pathlib import Path

from torchperf_tui.cli.args import build_parser

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"


def check(out: Path, *sections: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), str(out), *sections], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "GPU_CHECK_DRY_RUN": "1", **env}, timeout=60)


def commands(summary: str) -> list[list[str]]:
    return [shlex.split(line.strip()[2:]) for line in summary.splitlines() if line.strip().startswith("$ ")]


def test_every_torchperf_command_of_the_check_parses_and_out_holds_at_most_eight_files(tmp_path):
    result = check(tmp_path / "out")
    assert result.returncode == 0, result.stderr
    files = sorted((tmp_path / "out").iterdir())
    assert 1 <= len(files) <= 8 and all(f.is_file() for f in files)
    assert {"summary.txt", "logs.tar.gz"} <= {f.name for f in files}
    summary = (tmp_path / "out" / "summary.txt").read_text()
    for section in ("env", "tests", "attention", "sweep", "flags", "why", "capacity", "generate", "exporter", "shots"):
        assert f"== {section} (" in summary
    ran = commands(summary)
    tui = [argv[3:] for argv in ran if argv[:3] == ["python3", "-m", "torchperf_tui"]]
    assert len(tui) >= 12
    for argv in tui:
        args = build_parser().parse_args(argv)  # argparse exits 2 on an option the CLI does not take
        if args.command not in ("info", "exporter"):
            assert args.device == "cuda", argv
    with tarfile.open(tmp_path / "out" / "logs.tar.gz") as tar:
        assert {"logs/attention.log", "logs/shots.log"} <= set(tar.getnames())


def test_a_section_that_does_not_fit_the_budget_is_skipped_and_said(tmp_path):
    result = check(tmp_path / "out", "env", "tests", GPU_CHECK_BUDGET="30")
    assert result.returncode == 0
    summary = (tmp_path / "out" / "summary.txt").read_text()
    assert "== env (" in summary and "== tests: skipped" in summary and "it needs 60 s" in summary


def test_an_unknown_section_or_budget_is_one_line_and_exit_2(tmp_path):
    for sections, env in ((("bogus",), {}), ((), {"GPU_CHECK_BUDGET": "ten"})):
        result = check(tmp_path / "out", *sections, **env)
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert not (tmp_path / "out").exists()
