"""A noisy host and noisy samples are flagged with their figure: engine/hardware/host_noise.py read through a fake reader,
and the figures carried by run_benchmark's result into the history record and its comparisons."""

from __future__ import annotations

import pytest

from tests.records import make_record
from torchperf_tui.engine.hardware import host_noise
from torchperf_tui.engine.records.history_compare import compare_records
from torchperf_tui.engine.records.history_records import HistoryRecord, record_from_timing
from torchperf_tui.engine.hardware.host_noise import HostNoise, HostProbe
from torchperf_tui.core.stats import p50_over_min, share_above
from torchperf_tui.wording.history import history_line


class FakeReader:
    """Readings scripted per edge of the window: (time s, load, machine busy CPU s, own CPU s)."""

    def __init__(self, start, end, cores=2, missing=None) -> None:
        self.readings = [start, end]
        self._cores = cores
        self.missing = dict(missing or {})
        self._current = None

    def _next(self):
        self._current = self.readings.pop(0)

    def now(self):
        self._next()
        return self._current[0]

    def load(self):
        return self._current[1]

    def busy_cpu_s(self):
        return self._current[2]

    def own_cpu_s(self):
        return self._current[3]

    def cores(self):
        return self._cores


QUIET = [10.0] * 30 + [10.4] * 30  # a fixed-shape run on a quiet box: the median 1.02x the fastest
# Over 10 s: the measurement used 2 cores (20 CPU s), the machine 20.3 CPU s: others 0.03 of a core.
QUIET_HOST = ((0.0, 1.9, 100.0, 50.0), (10.0, 2.1, 120.3, 70.0))


def noise_of(start, end, samples, cores=2, spread=True, missing=None) -> HostNoise:
    probe = HostProbe(FakeReader(start, end, cores, missing))
    probe.begin()
    probe.end()
    return probe.summary(samples, spread=spread)


def test_a_quiet_host_and_steady_samples_say_nothing_but_their_figures():
    noise = noise_of(*QUIET_HOST, QUIET)
    assert noise.other_busy_cores == pytest.approx(0.03)
    assert noise.own_busy_cores == pytest.approx(2.0)
    assert noise.p50_over_min == pytest.approx(p50_over_min(QUIET))
    assert not noise.noisy and noise.warnings() == []
    assert noise.summary() == ("load 2.1 on 2 cores, other processes busy on 0.0 of them · p50 1.02x the fastest "
                               "sample, 0 % over 2x")


def test_other_processes_busy_on_a_core_flag_the_host_with_the_figures():
    # 10 s: the machine was busy 34 CPU s, this process 20: others held 1.4 cores; the load read 3.1 at the end.
    noise = noise_of((0.0, 2.0, 100.0, 50.0), (10.0, 3.1, 134.0, 70.0), QUIET)
    assert noise.other_busy_cores == pytest.approx(1.4)
    assert noise.host_noisy and not noise.samples_noisy
    assert noise.warnings() == ["noisy host: load 3.1 on 2 cores, other processes busy on 1.4 of them during the "
                                "timed run"]


def test_a_load_above_the_cores_flags_the_host_where_the_cpu_times_cannot_be_read():
    missing = {"cpu": "psutil could not read the CPU times: AccessDenied"}
    noise = noise_of((0.0, 3.4, None, None), (5.0, 3.0, None, None), QUIET, missing=missing)
    assert noise.other_busy_cores is None and noise.load == 3.4
    assert noise.warnings() == ["noisy host: load 3.4 on 2 cores during the timed run"]
    # the same load on 4 cores is not above them by half again
    assert noise_of((0.0, 3.4, None, None), (5.0, 3.0, None, None), QUIET, cores=4).warnings() == []


def test_a_median_far_above_the_fastest_sample_flags_the_samples_with_its_ratio():
    samples = [2.87] * 5 + [194.0] * 25  # the tester's busy host: p50 194 ms against a fastest of 2.87 ms
    noise = noise_of(*QUIET_HOST, samples)
    assert noise.samples_noisy and not noise.host_noisy
    assert noise.warnings() == ["noisy samples: p50 is 67.6x the fastest sample"]


def test_a_slow_tail_in_one_sample_of_ten_flags_the_samples_with_its_share():
    samples = [10.0] * 27 + [25.0] * 3  # the median is the fastest, but 10 % took 2.5x as long
    assert share_above(samples, host_noise.SLOW_FACTOR) == pytest.approx(0.1)
    noise = noise_of(*QUIET_HOST, samples)
    assert noise.warnings() == ["noisy samples: 10 % of them took over 2x the fastest"]
    calm = [10.0] * 29 + [25.0]  # one accident in 30
    assert noise_of(*QUIET_HOST, calm).warnings() == []


def test_too_few_samples_or_a_varying_shape_say_nothing_of_the_spread():
    wild = [1.0] * 5 + [50.0] * 10
    few = noise_of(*QUIET_HOST, wild)
    assert few.p50_over_min is None and "fewer than 20" in few.missing["spread"] and few.warnings() == []
    varying = noise_of(*QUIET_HOST, [1.0] * 10 + [50.0] * 20, spread=False)
    assert varying.p50_over_min is None and varying.missing["spread"] == "the input shape varies by design"


def test_a_window_that_never_opened_has_no_host_figures():
    probe = HostProbe(FakeReader(*QUIET_HOST))
    noise = probe.summary([])
    assert noise.other_busy_cores is None and noise.load is None and noise.missing["window"] == "no timed iteration ran"
    assert noise.warnings() == [] and noise.summary().startswith("host load n/a (no timed iteration ran")


def test_run_benchmark_reads_the_host_at_the_timed_windows_edges_and_the_record_keeps_the_marks(monkeypatch):
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.timing import run_benchmark

    busy = ((0.0, 5.0, 100.0, 50.0), (2.0, 5.6, 104.0, 51.0))  # others: 1.5 cores
    monkeypatch.setattr("torchperf_tui.engine.measurements.timing.HostProbe", lambda: HostProbe(FakeReader(*busy)))
    cfg = BenchConfig(model="tests.tinymodels:tiny_cnn", input_shape=(1, 3, 16, 16), device="cpu", warmup=1, iters=4)
    result = run_benchmark(cfg)
    noise = result.host_noise
    assert noise.other_busy_cores == pytest.approx(1.5) and noise.load_start == 5.0 and noise.load_end == 5.6
    assert noise.samples == 4 and noise.p50_over_min is None  # 4 samples: no word on their spread
    result.app_marks = ["window resized during the run"]  # as the app sets it
    marks = ["window resized during the run",
             "noisy host: load 5.6 on 2 cores, other processes busy on 1.5 of them during the timed run"]
    assert result.disturbance_marks() == marks
    data = result.to_dict()
    assert data["host_noise"]["host_noisy"] is True and data["disturbance_marks"] == marks
    record = record_from_timing(result, fingerprint={})
    assert record.disturbed == marks and record.details["host_noise"]["other_busy_cores"] == pytest.approx(1.5)
    again = HistoryRecord.from_dict(record.to_dict())
    assert again.disturbed == marks
    assert history_line(again).endswith(f"[disturbed: {'; '.join(marks)}]")


def test_disturbance_marks_read_from_a_file_are_checked_and_cannot_carry_escape_sequences():
    data = make_record().to_dict()
    assert HistoryRecord.from_dict(data).disturbed == []  # a record written before marks were kept
    data["disturbed"] = ["\x1b[2Jwindow resized" + "x" * 500]
    (mark,) = HistoryRecord.from_dict(data).disturbed
    assert mark.startswith("\\x1b[2Jwindow resized") and len(mark) <= 200  # the ESC written out, not sent
    data["disturbed"] = "window resized"
    with pytest.raises(ValueError, match="disturbed is not a list of strings"):
        HistoryRecord.from_dict(data)


def test_a_comparison_with_a_disturbed_run_says_its_ratio_may_be_the_disturbance():
    clean, disturbed = make_record(10.0), make_record(18.0)
    disturbed.disturbed = ["window resized during the run"]
    comparison = compare_records(clean, disturbed)
    note = (f"{disturbed.short_id} was disturbed (window resized during the run): part of the ratio may be the "
            "disturbance, not what differs between the runs")
    assert comparison.disturbance_note == note and note in comparison.summary()
    other = make_record(12.0)
    other.disturbed = ["noisy host: load 3.1 on 2 cores during the timed run"]
    both = compare_records(other, disturbed).disturbance_note  # two disturbances are not like for like
    assert both.startswith(f"{other.short_id} was disturbed (noisy host") and f" and {disturbed.short_id} was" in both
    assert compare_records(clean, make_record(11.0)).disturbance_note is None


def test_other_processes_cpu_without_the_windows_length_is_judged_as_read():
    """A HostNoise that says the others' CPU but not how long the window was (a record written before its length was
    kept): judged on the figure as read, never a TypeError in whatever reads it (the app's Timing tab)."""
    busy = HostNoise(cores=2, other_busy_cores=host_noise.OTHER_BUSY_CORES + 0.5)
    quiet = HostNoise(cores=2, other_busy_cores=0.1)
    assert busy.uncertainty_cores is None and busy.host_noisy and not quiet.host_noisy


def test_others_busy_beside_a_whole_idle_core_are_not_a_noisy_host():
    """Others compete for the cores a run needs: on a 16-core box a GPU run (one launch thread) beside 0.7 of a core
    of other work, 14 cores idle, is quiet (the H200 check called it noisy); on 2 cores the same others are not."""
    big = HostNoise(cores=16, window_s=10.0, own_busy_cores=1.1, other_busy_cores=0.7)
    small = HostNoise(cores=2, window_s=10.0, own_busy_cores=1.1, other_busy_cores=0.7)
    cpu_run = HostNoise(cores=16, window_s=10.0, own_busy_cores=15.6, other_busy_cores=0.7)  # threads on every core
    assert big.spare_cores == pytest.approx(14.2) and big.core_to_spare and not big.host_noisy
    assert small.host_noisy and cpu_run.host_noisy
    assert HostNoise(cores=16, window_s=10.0, other_busy_cores=0.7).host_noisy  # own CPU unread: judged as before


def test_disturbance_marks_of_a_measurement_and_of_what_measures_nothing():
    from types import SimpleNamespace

    from torchperf_tui.core.marks import disturbance_marks

    measured = SimpleNamespace(disturbance_marks=lambda: ("window resized during the run",))
    assert disturbance_marks(measured) == ["window resized during the run"]
    assert disturbance_marks(SimpleNamespace(flops=10)) == []  # a count of FLOPs measures nothing
