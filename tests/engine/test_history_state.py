"""A run's history record says the thread count it used and what the model's code changed in torch's global
state, so Compare and `history` can tell such a run from a clean one."""

from __future__ import annotations

from tests.records import ENV
from torchperf_tui.engine.measurements.flags import Flags
from torchperf_tui.engine.records.history_compare import compare_records
from torchperf_tui.engine.records.history_records import HistoryRecord, record_from_timing
from torchperf_tui.core.stats import compute_stats
from torchperf_tui.engine.measurements.timing import TimingResult
from torchperf_tui.wording.history import history_line


def _result(threads: int, notes: list[str] | None = None) -> TimingResult:
    samples = [4.0, 5.0, 6.0, 5.0]
    return TimingResult(model="resnet18", device="cpu", input_shape=(1, 3, 32, 32), dtype="float32",
                        channels_last=False, flags=Flags(), first_iter_ms=40.0, warmup_ms=[], samples_ms=samples,
                        stats=compute_stats(samples, batch=1), cancelled=False, started_at=1_800_000_000.0,
                        duration_s=1.0, timer="perf_counter", flags_in_effect=Flags(num_threads=threads),
                        state_notes=notes or [])


def test_a_record_keeps_the_thread_count_the_run_used_not_defaults():
    record = record_from_timing(_result(2), fingerprint=ENV)
    assert record.flags["num_threads"] == 2 and record.flags_text == "threads=2 (default)"
    assert "flags: threads=2 (default)" in history_line(record) and "torch state" not in history_line(record)


def test_two_runs_of_the_same_flags_on_different_thread_counts_do_not_compare_as_the_same_flags():
    one, two = record_from_timing(_result(1), fingerprint=ENV), record_from_timing(_result(2), fingerprint=ENV)
    assert compare_records(two, one).flags_diff == {"num_threads": (2, 1)}


def test_a_run_under_a_state_changed_by_the_model_keeps_the_note_through_a_round_trip():
    note = "the model's code set torch threads to 1 (asked: 2) during the run: samples measured under a state"
    record = record_from_timing(_result(1, [note]), fingerprint=ENV)
    back = HistoryRecord.from_dict(record.to_dict())
    assert back.state_notes == [note]
    assert "[torch state changed by the model's code]" in history_line(back)
