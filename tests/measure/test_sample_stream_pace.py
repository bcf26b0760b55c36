"""A timing run's samples leave the measurement process in batches: at most once a second on the CPU, where the
model's threads fill the cores the app's process would wake on to draw them, twice a second elsewhere."""

from __future__ import annotations

from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.measure import runners
from torchperf_tui.measure.runners import CPU_SEND_EVERY_S, SEND_EVERY_S, JobContext, SampleStream, send_every_s


def test_a_cpu_run_sends_its_samples_at_most_once_a_second():
    assert CPU_SEND_EVERY_S >= 1.0 > SEND_EVERY_S
    assert send_every_s(BenchConfig(model="resnet18", device="cpu")) == CPU_SEND_EVERY_S


def test_a_bad_device_leaves_its_error_to_the_run():
    assert send_every_s(BenchConfig(model="resnet18", device="tpu")) == SEND_EVERY_S


def test_the_first_sample_leaves_at_once_and_the_rest_wait_for_their_interval(monkeypatch):
    """The first pass shows as soon as it is done (a model whose next pass takes a minute is seen meanwhile), the
    timed samples after it in batches."""
    sent = []
    clock = [100.0]
    monkeypatch.setattr(runners.time, "monotonic", lambda: clock[0])
    stream = SampleStream(JobContext(1, sent.append), every_s=CPU_SEND_EVERY_S)
    stream.on_sample("first", 0, 1, 50.0)
    assert [(s.phase, len(s.samples_ms)) for s in sent] == [("first", 1)]
    for i in range(5):
        clock[0] += 0.1
        stream.on_sample("timed", i, 10, 1.0)
    assert len(sent) == 1  # 0.5 s in: a 0.5 s stream would have sent, this one waits
    clock[0] += CPU_SEND_EVERY_S
    stream.on_sample("timed", 5, 10, 1.0)
    assert [len(s.samples_ms) for s in sent] == [1, 6]
    stream.on_sample("timed", 6, 10, 1.0)
    stream.close()
    assert [len(s.samples_ms) for s in sent] == [1, 6, 1]
