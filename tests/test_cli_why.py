"""`torchperf-tui why MODEL`: the findings in words and in --json, the report as Markdown and as self-contained HTML
with its plots, and bad input as one line with exit 2 before anything is measured."""

from __future__ import annotations

import json
import os

import pytest

from tests.cli_run import run


@pytest.fixture(autouse=True)
def _jobs_in_this_process(monkeypatch, tmp_path):
    """The job runs in this process (as in tests/test_cli.py)."""
    from tests.measure.in_process import InProcessMeasurement

    monkeypatch.setattr("torchperf_tui.measure.cli_jobs.MeasurementProcess", InProcessMeasurement)
    monkeypatch.setenv("TORCHPERF_HISTORY", str(tmp_path / "history.jsonl"))


SLOW = ("why", "tests.tinymodels:slow_layer_net", "--input", "8x64", "--iters", "10", "--warmup", "2", "--threads",
        "1", "--verify", "0")


def test_why_names_the_slow_layer_in_words_and_in_json(capsys):
    code, out, err = run(capsys, *SLOW)
    assert code == 0, err
    assert "why: tests.tinymodels:slow_layer_net on cpu, input 8x64 float32" in out
    assert "layer scale (SlowElementwise) takes" in out and "   at stake: about " in out
    assert "   measured: not run: no option fixes it: the layer's own code" in out
    assert "note: timing each layer" in err
    code, out, err = run(capsys, *SLOW, "--json")
    data = json.loads(out)
    scale = [f for f in data["findings"] if f["key"] == "slow_layer"]
    assert scale and scale[0]["layer"] == "scale" and scale[0]["verdict"] == "not run" and scale[0]["share"] >= 0.1
    assert data["pass_ms"] > 0 and data["layers"][0][0] == "scale" and len(data["samples_ms"]) == 10


@pytest.mark.parametrize("suffix", ["md", "html"])
def test_the_report_is_one_file_with_the_findings_and_plots(capsys, tmp_path, suffix):
    path = tmp_path / f"why.{suffix}"
    code, out, err = run(capsys, *SLOW, "--report", str(path))
    assert code == 0, err
    assert f"report written to {path}" in err
    text = path.read_text()
    assert "layer scale (SlowElementwise) takes" in text and "no option fixes it" in text
    if suffix == "html":
        import base64
        import re

        images = re.findall(r'src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"', text)
        plots = [base64.b64decode(data).decode() for data in images]
        # the histogram with its median, the layers' bars, the layers on the roofline: drawn inside the file
        assert len(plots) == 3 and all(p.startswith('<svg xmlns="http://www.w3.org/2000/svg"') for p in plots)
        assert "median " in plots[0] and "scale" in plots[1] and "<circle" in plots[2]
        outside = re.sub(r'src="data:[^"]*"', "", text)
        assert text.startswith("<!DOCTYPE html>") and "<script" not in text and "http" not in outside
        assert "no ceilings kept for the device (torchperf-tui ceilings measures them)" in text
    else:
        assert "## Latency of the set-up as given" in text and "## The slowest layers" in text
        assert "## The layers on the roofline" in text and "| layer | FLOPs a byte | reached | of the roof |" in text


@pytest.mark.parametrize("extra, words", [
    (("--report", "/dev/null"), "--report /dev/null: write FILE.md or FILE.html"),
    (("--report", "{tmp}/out.txt"), "write FILE.md or FILE.html"),
    (("--report", "{tmp}"), "write FILE.md or FILE.html"),
    (("--report", "{tmp}/fifo.md"), "fifo.md"),
    (("--report", "{tmp}/missing/dir/r.md"), "r.md"),
    (("--threshold", "101"), "--threshold: must be <= 100"),
    (("--threshold", "nan"), "--threshold: expected a finite number"),
    (("--verify", "-1"), "--verify: must be at least 0"),
    (("--budget", "inf"), "--budget: expected a finite number"),
    (("--blocks", "2"), "blocks"),
])
def test_bad_why_input_is_one_line_and_exit_2(capsys, tmp_path, extra, words):
    os.mkfifo(tmp_path / "fifo.md")
    extra = tuple(part.replace("{tmp}", str(tmp_path)) for part in extra)
    code, out, err = run(capsys, "why", "tests.tinymodels:tiny_cnn", *extra)
    assert code == 2 and out == ""
    assert words in err and len(err.strip().splitlines()) == 1, err
