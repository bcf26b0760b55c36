"""`compare --baseline FILE` with hostile settings in the file and on a busy box: a setting the command line would
refuse is refused from the file too (one line, exit 2, before any measurement), and a run marked disturbed that
reads slower past the limit ends "disturbed: not judged" with exit 0, its confirmation included. The measurement is
faked where the test is about the verdict (cli_baseline.measure_now): no process is started, no load is needed."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from tests.cli_run import run
from tests.records import make_record
from torchperf_tui.cli import baseline as cli_baseline
from torchperf_tui.core import options
from torchperf_tui.engine.records.history_records import HistoryRecord, new_record_id

NOISY_HOST = "noisy host: load 6.1 on 2 cores, other processes busy on 1.8 of them"


def samples(median: float, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(s) for s in median * (1 + np.abs(rng.normal(0, 0.03, 64)))]


def baseline_record(**flags) -> HistoryRecord:
    record = make_record(p50=10.0)
    return dataclasses.replace(record, device="cpu", samples_ms=samples(10.0, seed=1),
                               flags={**record.flags, **flags}, details={"warmup_iters": 3})


def write_baseline(tmp_path, record: HistoryRecord, **details) -> str:
    data = record.to_dict()
    data["details"].update(details)
    path = tmp_path / "base.json"
    path.write_text(json.dumps({"record": data}))
    return str(path)


@pytest.fixture()
def measured(monkeypatch):
    """cli_baseline.measure_now replaced: each call returns the next of `runs` (median, disturbance marks), and
    the configurations it was asked to measure are kept."""
    asked = []
    runs: list[tuple[float, list[str]]] = []

    def fake(args, cfg, record):
        asked.append(cfg)
        median, marks = runs[len(asked) - 1]
        return dataclasses.replace(record, id=new_record_id(), samples_ms=samples(median, seed=len(asked) + 1),
                                   flags={**record.flags, "num_threads": cfg.flags.num_threads},
                                   disturbed=list(marks))

    monkeypatch.setattr(cli_baseline, "measure_now", fake)
    return runs, asked


def test_more_threads_in_the_file_than_this_machine_has_is_refused_before_measuring(capsys, tmp_path, measured):
    too_many = options.cpu_count() + 1
    record = baseline_record(num_threads=too_many)
    code, out, err = run(capsys, "compare", "--baseline", write_baseline(tmp_path, record), "--no-history")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert f"the baseline {record.short_id} ({tmp_path / 'base.json'}): threads={too_many}: this machine" in err
    assert measured[1] == []  # nothing measured


def test_threads_typed_on_the_command_line_replace_the_files_and_are_named(capsys, tmp_path, measured):
    runs, asked = measured
    runs.append((10.0, []))
    record = baseline_record(num_threads=options.cpu_count() + 1)
    code, out, err = run(capsys, "compare", "--baseline", write_baseline(tmp_path, record), "--threads", "1",
                         "--no-history", "--json", "--fail-if-slower", "1000")
    assert code == 0, err
    assert asked[0].flags.num_threads == 1
    gate = json.loads(out)
    assert gate["typed"] == ["threads"] and gate["differences"] == [
        {"name": "threads", "baseline": options.cpu_count() + 1, "now": 1}]


@pytest.mark.parametrize("details, said", [
    ({"warmup_iters": 10**12}, "warm-up: expected a count 0-10,000 or 'auto', got '1000000000000'"),
    ({"step": "fly"}, "unknown step 'fly'"),
])
def test_a_bad_setting_in_the_file_is_one_line_and_exit_2(capsys, tmp_path, measured, details, said):
    record = baseline_record()
    code, out, err = run(capsys, "compare", "--baseline", write_baseline(tmp_path, record, **details))
    assert code == 2 and out == "" and said in err and len(err.strip().splitlines()) == 1
    assert f"the baseline {record.short_id}" in err and measured[1] == []


def test_a_disturbed_slower_run_is_measured_again_and_not_judged_with_exit_0(capsys, tmp_path, measured):
    runs, asked = measured
    runs += [(12.0, [NOISY_HOST]), (12.0, [NOISY_HOST])]
    code, out, err = run(capsys, "compare", "--baseline", write_baseline(tmp_path, baseline_record()), "--no-history")
    assert code == 0, out + err
    assert len(asked) == 2 and "in a run marked disturbed: measuring again to confirm" in err
    lines = out.splitlines()
    assert lines[0].startswith("slower: ")
    assert lines[1].startswith("gate: disturbed: not judged: ") and lines[1].endswith("(exit 0)")
    assert any(line.startswith("note: not judged: the first run (") and ", disturbed)" in line for line in lines)
    assert any(f"was disturbed ({NOISY_HOST})" in line for line in lines)


def test_the_json_says_not_judged(capsys, tmp_path, measured):
    runs, _ = measured
    runs.append((12.0, [NOISY_HOST]))
    code, out, _ = run(capsys, "compare", "--baseline", write_baseline(tmp_path, baseline_record()), "--no-history",
                       "--no-confirm", "--json")
    data = json.loads(out)
    assert code == 0 and (data["verdict"], data["failed"], data["not_judged"], data["exit_code"]) == \
        ("slower", False, True, 0)
    assert data["disturbed"] == [NOISY_HOST]


def test_a_clean_confirmation_of_a_disturbed_failure_fails(capsys, tmp_path, measured):
    """The first run disturbed and slower, the second quiet and as slow: a regression, exit 1."""
    runs, asked = measured
    runs += [(12.0, [NOISY_HOST]), (12.0, [])]
    code, out, _ = run(capsys, "compare", "--baseline", write_baseline(tmp_path, baseline_record()), "--no-history")
    assert code == 1 and len(asked) == 2 and out.splitlines()[1].startswith("gate: FAILS: ")


def test_a_quiet_confirmed_failure_still_fails(capsys, tmp_path, measured):
    runs, _ = measured
    runs += [(12.0, []), (12.0, [])]
    code, out, _ = run(capsys, "compare", "--baseline", write_baseline(tmp_path, baseline_record()), "--no-history")
    assert code == 1 and "note: confirmed: the first run (" in out


# -- ambiguous: the interval across the limit


def test_an_ambiguous_run_passes_with_exit_0_and_says_so_first(capsys, tmp_path, measured):
    """10 % slower with its interval across the 10 % limit: the gate cannot tell, says AMBIGUOUS on its line and
    exits 0; nothing is measured again (a confirmation is for a failure)."""
    runs, asked = measured
    runs.append((11.0, []))
    path = write_baseline(tmp_path, baseline_record())
    code, out, err = run(capsys, "compare", "--baseline", path, "--no-history")
    assert code == 0 and len(asked) == 1 and "confirm" not in err, out + err
    assert out.splitlines()[1].startswith("gate: AMBIGUOUS: ") and out.splitlines()[1].endswith("(exit 0)")
    runs.append((11.0, []))
    code, out, _ = run(capsys, "compare", "--baseline", path, "--no-history", "--no-confirm", "--json")
    data = json.loads(out)
    assert (code, data["verdict"], data["ambiguous"], data["failed"], data["exit_code"]) == (0, "slower", True,
                                                                                             False, 0)


def test_fail_if_ambiguous_confirms_and_fails_with_exit_1(capsys, tmp_path, measured):
    runs, asked = measured
    runs += [(11.0, []), (11.0, [])]
    code, out, err = run(capsys, "compare", "--baseline", write_baseline(tmp_path, baseline_record()), "--no-history",
                         "--fail-if-ambiguous")
    assert code == 1 and len(asked) == 2, out + err
    assert "note: ambiguous (+10.5 %) against the baseline: measuring again to confirm" in err
    assert out.splitlines()[1].startswith("gate: FAILS: AMBIGUOUS (--fail-if-ambiguous): ")

