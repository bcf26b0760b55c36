"""Exports of run records: JSON that parses back, CSV with one row per run, a Markdown table."""

from __future__ import annotations

import csv
import dataclasses
import io
import json

import pytest

from tests.records import make_record
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.wording.history_export import export_records
from torchperf_tui.engine.measurements.flags import Flags
from torchperf_tui.engine.records.history_records import HistoryRecord


def test_export_json_parses_back_to_the_records():
    records = [make_record(10.0), make_record(8.0)]
    data = json.loads(export_records(records, "json"))
    assert [HistoryRecord.from_dict(d) for d in data] == records


def test_export_csv_has_one_row_per_run_with_flattened_flags_and_stats():
    records = [make_record(10.0), make_record(8.0, flags=Flags(cudnn_benchmark=True).to_dict())]
    rows = list(csv.DictReader(io.StringIO(export_records(records, "csv"))))
    assert len(rows) == 2
    assert [float(r["p50_ms"]) for r in rows] == [10.0, 8.0]
    assert [r["flag.cudnn_benchmark"] for r in rows] == ["False", "True"]
    assert rows[0]["flag.num_threads"] == ""  # None: left as it was
    assert rows[0]["env.driver"] == "550.54.15" and rows[0]["input_shape"] == "1x3x224x224"
    assert rows[0]["id"] == records[0].id and float(rows[1]["fps"]) == pytest.approx(1000 / 9)
    assert "samples_ms" not in rows[0]


def test_export_md_is_a_table_with_a_header_row():
    records = [make_record(10.0, model="my|model"), make_record(8.0)]
    lines = export_records(records, "md").splitlines()
    assert lines[0].startswith("| When (UTC) | ID | Kind | Model |") and "| Per | p50 |" in lines[0]
    assert set(lines[1].replace("|", "")) == {"-"}
    assert len(lines) == 6 and lines[4] == ""  # the table, then the legend of its marks
    header_cells = lines[0].count(" | ")
    assert all(line.replace("\\|", "").count(" | ") == header_cells for line in lines[2:4])
    assert "my\\|model" in lines[2] and "10.00 ms" in lines[2]
    # make_record's runs have 3 samples, fewer than p50, p90 and p99 need: marked, the mark explained under the table
    assert "| 10.00 ms? |" in lines[2] and lines[2].count("?") == 3 and lines[5].startswith("? = more than the sample")


def test_export_md_marks_nothing_when_every_percentile_is_supported():
    record = make_record(10.0)
    record.stats = dataclasses.replace(record.stats, n=600)
    lines = export_records([record], "md").splitlines()
    assert len(lines) == 3 and "?" not in lines[2]


def test_export_unknown_format_is_a_one_line_error():
    with pytest.raises(TorchperfError, match="choose one of json, csv, md"):
        export_records([make_record()], "xlsx")


def test_an_export_names_each_runs_source_overrides_sequence_length_and_inputs():
    hf = dataclasses.replace(make_record(10.0, model="hf:gpt2"),
                             details={"source": "hf", "model_args": "n_layer=2", "seq_len": 256,
                                      "inputs": "input_ids 1x256 int64 (ids < 50,257)"})
    rows = list(csv.DictReader(io.StringIO(export_records([hf, make_record(8.0)], "csv"))))
    assert (rows[0]["source"], rows[0]["model_args"], rows[0]["seq_len"]) == ("hf", "n_layer=2", "256")
    assert rows[0]["inputs"].startswith("input_ids 1x256") and rows[1]["model_args"] == "" and rows[1]["seq_len"] == ""
    assert "hf:gpt2 (n_layer=2)" in export_records([hf], "md")
