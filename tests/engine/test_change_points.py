"""Change points in the history (engine/records/change_points.py): a planted step found at the record it starts with,
its size and interval, and what changed in the environment beside it; none in noise alone, nor for one slow record;
a short series said to be too short; each set-up its own series."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tests.records import ENV, make_record
from torchperf_tui.engine.records.change_points import (MIN_RECORDS, SeriesPoint, change_points, history_changes,
                                                        series_of)
from torchperf_tui.engine.records.history_records import HistoryRecord

NOISE = 0.02  # each record's median within a few percent of the next, as runs of one build on one box


def noisy_medians(levels: list[tuple[float, int]], seed: int = 0) -> list[float]:
    """`count` medians around each `level` in turn, with NOISE relative spread."""
    rng = np.random.default_rng(seed)
    return [float(level * (1 + rng.normal(0, NOISE))) for level, count in levels for _ in range(count)]


def records_of(medians: list[float], env_at=lambda i: ENV, host_at=lambda i: None, **changes) -> list[HistoryRecord]:
    """A timing record per median, oldest first, a day apart; `env_at(i)` its fingerprint, `host_at(i)` its host's
    load (details["host_noise"]), `changes` replace the fields of each."""
    records = []
    for i, median in enumerate(medians):
        record = make_record(median, median * 2, env=env_at(i))
        details = dict(record.details)
        if host_at(i) is not None:
            details["host_noise"] = host_at(i)
        records.append(dataclasses.replace(record, created_at=f"2026-{1 + i // 28:02d}-{1 + i % 28:02d}T10:00:00+00:00",
                                           details=details, **changes))
    return records


def points_of(medians: list[float]) -> list[SeriesPoint]:
    return [SeriesPoint(f"r{i:03d}", "2026-11-22T20:30:00+00:00", m) for i, m in enumerate(medians)]


def test_a_planted_step_is_found_at_the_first_record_after_it_with_its_size_and_interval():
    changes = change_points(points_of(noisy_medians([(10.0, 20), (13.0, 20)])))
    assert len(changes) == 1
    change, = changes
    assert (change.index, change.record_id, change.previous_id, change.n_before, change.n_after) == \
        (20, "r020", "r019", 20, 20)
    assert (change.before_p50_ms, change.after_p50_ms) == (pytest.approx(10.0, rel=0.02), pytest.approx(13.0, rel=0.02))
    assert change.change_pct == pytest.approx(30.0, abs=3.0)
    assert 1.0 < change.ci_low < change.ratio < change.ci_high and change.p_value < 0.05


@pytest.mark.parametrize("seed", range(10))
def test_noise_alone_has_no_change_point(seed):
    assert change_points(points_of(noisy_medians([(10.0, 40)], seed=seed))) == []


def test_one_slow_record_is_no_change_point():
    medians = noisy_medians([(10.0, 40)], seed=3)
    medians[17] *= 3.0  # one run on a busy box
    assert change_points(points_of(medians)) == []


def test_a_step_and_a_step_back_are_two_change_points():
    changes = change_points(points_of(noisy_medians([(10.0, 30), (12.0, 30), (10.0, 30)], seed=1)))
    assert [change.index for change in changes] == [30, 60]
    assert changes[0].change_pct == pytest.approx(20.0, abs=3.0)
    assert changes[1].change_pct == pytest.approx(-100 / 6, abs=3.0)  # 12 -> 10
    assert (changes[0].n_before, changes[0].n_after, changes[1].n_after) == (30, 30, 30)


def test_a_step_between_identical_medians_is_found_and_identical_medians_have_none():
    """A coarse timer gives every run of a set-up the same median: no spread, one difference at the step."""
    change, = change_points(points_of([10.0] * 10 + [12.0] * 10))
    assert (change.index, change.ratio, change.ci_low, change.ci_high) == (10, 1.2, 1.2, 1.2)
    assert change_points(points_of([10.0] * 20)) == []


def test_a_series_shorter_than_two_segments_is_too_short_and_not_analysed():
    short = [10.0] * 4 + [30.0] * (MIN_RECORDS - 5)  # a clear step, one record short of two segments
    assert change_points(points_of(short)) is None
    # two segments of the fewest records: the step is found, and passes its test (at 3 against 3 it never could)
    assert change_points(points_of(short + [30.0]))[0].index == 4


def test_each_set_up_is_its_own_series_and_runs_without_a_median_are_left_out():
    f32 = records_of(noisy_medians([(10.0, 8)]))
    f16 = records_of(noisy_medians([(6.0, 8)]), dtype="float16")
    cancelled = dataclasses.replace(make_record(99.0), cancelled=True)
    empty = dataclasses.replace(make_record(99.0), stats=None, samples_ms=[])
    mixed = [r for pair in zip(f32, f16) for r in pair] + [cancelled, empty]
    series = series_of(mixed)
    assert [len(points) for points in series.values()] == [8, 8]
    (name32, points32), (name16, _) = series.items()
    assert "float32" in name32 and "float16" in name16
    assert [p.record_id for p in points32] == [r.id for r in f32]


def test_the_environment_that_changed_beside_a_change_point_comes_with_it():
    """torch upgraded, the GPU's clock lower and another tenant on the host at the step; the driver changed
    before it, and is not named."""
    def env_at(i):
        return {**ENV, "torch": "2.14.1" if i < 20 else "2.15.0", "driver": "550" if i < 5 else "560",
                "gpu_sm_clock_mhz": 1980 if i < 20 else 1410}

    def host_at(i):
        return {"load": 0.3 if i < 20 else 2.9, "cores": 2, "other_busy_cores": 0.1 if i < 20 else 1.6,
                "host_noisy": False}

    records = records_of(noisy_medians([(10.0, 20), (13.0, 20)]), env_at=env_at, host_at=host_at)
    reads = []

    def again():
        reads.append(1)
        return iter(records)

    series, = history_changes(iter(records), again)
    change, = series.changes
    assert (change.record_id, change.previous_id) == (records[20].id, records[19].id)
    assert change.environment == [("torch", "2.14.1", "2.15.0"), ("GPU SM clock (MHz)", 1980.0, 1410.0),
                                  ("CPU", "load 0.3 on 2 cores, other processes busy on 0.1 cores",
                                   "load 2.9 on 2 cores, other processes busy on 1.6 cores")]
    assert reads == [1]
    data = series.to_dict()
    assert (data["records"], data["too_short"], data["change_points"][0]["record_id"]) == (40, False, records[20].id)
    assert data["change_points"][0]["environment"][0] == {"name": "torch", "before": "2.14.1", "after": "2.15.0"}


def test_a_history_without_a_change_point_is_read_once():
    def again():
        raise AssertionError("read again without a change point")

    stationary, short = records_of(noisy_medians([(10.0, 40)])), records_of([5.0] * 4, model="resnet50")
    found = history_changes(iter(stationary + short), again)
    assert [(len(s.points), s.changes) for s in found] == [(40, []), (4, None)]
    assert found[1].too_short and found[1].to_dict()["change_points"] == []
