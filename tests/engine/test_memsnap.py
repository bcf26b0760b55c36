import json
import os
import pickle

import pytest
import torch

from torchperf_tui.core.errors import DeviceError, OutOfMemory, ShapeError, TorchperfError
from torchperf_tui.engine.measurements.flags import Flags
from torchperf_tui.engine.measurements.memsnap import (DEFAULT_MAX_ENTRIES, NOT_CUDA, VIEWER_HINT, TorchCudaMemory,
                                          count_entries, record_memory_snapshot, write_snapshot)
from torchperf_tui.engine.measurements.bench_config import BenchConfig

TINY = "tests.tinymodels:tiny_cnn"


class FakeMemory:
    """A MemoryRecorder that says it records on any device and logs every call, in order, to `calls`."""

    def __init__(self, snapshot=None, peak=12_345, on=True):
        self.calls = []
        self.on = on
        self.recording = False
        self.peak_bytes = peak
        self._snapshot = snapshot if snapshot is not None else {
            "segments": [{"address": 1, "total_size": 2 << 20, "blocks": []}] * 2,
            "device_traces": [[{"action": "alloc", "size": 512, "frames": []}] * 5, []],
        }

    def records_on(self, device):
        return self.on

    def record(self, max_entries):
        self.calls.append(("record", max_entries))
        self.recording = True

    def stop(self):
        self.calls.append("stop")
        self.recording = False

    def snapshot(self):
        self.calls.append("snapshot" if self.recording else "snapshot after stop")
        return self._snapshot

    def reset_peak(self, device):
        self.calls.append("reset_peak")

    def peak(self, device):
        self.calls.append("peak")
        return self.peak_bytes

    def synchronize(self, device):
        self.calls.append("synchronize")


def _cfg(model=TINY, shape=(2, 3, 16, 16), **extra):
    return BenchConfig(model=model, input_shape=shape, device="cpu", **extra)


def test_cpu_without_a_recorder_is_one_plain_device_error():
    with pytest.raises(DeviceError) as caught:
        record_memory_snapshot(_cfg(), iters=1)
    assert str(caught.value) == NOT_CUDA and "\n" not in NOT_CUDA
    assert "CUDA device" in NOT_CUDA and "RSS" in NOT_CUDA


def test_a_recorder_that_cannot_record_on_the_device_starts_nothing():
    fake = FakeMemory(on=False)
    with pytest.raises(DeviceError, match="needs a CUDA device"):
        record_memory_snapshot(_cfg(), memory=fake)
    assert fake.calls == []


def test_snapshot_is_written_at_the_announced_path_while_recording(tmp_path):
    fake = FakeMemory()
    result = record_memory_snapshot(_cfg(model="tests.tinymodels:tiny_cnn"), iters=3, out_dir=str(tmp_path),
                                    memory=fake, should_cancel=lambda: fake.calls.append("cancel?") or False)
    # recording starts before the first pass (each pass is preceded by its cancel check) and ends after
    assert fake.calls == ["reset_peak", ("record", DEFAULT_MAX_ENTRIES), "cancel?", "cancel?", "cancel?",
                          "synchronize", "snapshot", "peak", "stop"]
    assert os.path.dirname(result.path) == str(tmp_path)
    name = os.path.basename(result.path)
    assert name.startswith("tests.tinymodels_tiny_cnn-") and name.endswith(".pickle")
    with open(result.path, "rb") as fh:
        assert pickle.load(fh) == fake._snapshot
    assert os.listdir(tmp_path) == [name]  # no partial file left beside it
    assert result.size_bytes == os.path.getsize(result.path) > 0
    assert (result.iters, result.cancelled, result.device, result.dtype) == (3, False, "cpu", "float32")
    assert result.input_shape == (2, 3, 16, 16)
    assert (result.entries, result.segments, result.peak_allocated_bytes) == (5, 2, 12_345)
    assert result.viewer_hint == VIEWER_HINT and "https://pytorch.org/memory_viz" in VIEWER_HINT
    data = json.loads(json.dumps(result.to_dict()))
    assert data["path"] == result.path and data["input_shape"] == [2, 3, 16, 16] and data["entries"] == 5


def test_default_folder_is_under_the_temp_dir(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    result = record_memory_snapshot(_cfg(), iters=1, memory=FakeMemory())
    assert os.path.dirname(result.path) == str(tmp_path / "torchperf-tui" / "memsnap")
    assert os.path.exists(result.path)


def test_recording_stops_when_the_model_rejects_the_input(tmp_path):
    fake = FakeMemory()
    with pytest.raises(ShapeError, match="rejected input 1x5x8x8"):
        record_memory_snapshot(_cfg(shape=(1, 5, 8, 8)), out_dir=str(tmp_path), memory=fake)
    assert fake.calls[:2] == ["reset_peak", ("record", 100_000)] and fake.calls[-1] == "stop"
    assert not fake.recording and "snapshot" not in fake.calls
    assert os.listdir(tmp_path) == []


def test_recording_stops_when_the_model_cannot_be_built(tmp_path):
    fake = FakeMemory()
    with pytest.raises(TorchperfError):
        record_memory_snapshot(_cfg(model="tests.tinymodels:no_such_factory"), out_dir=str(tmp_path),
                               memory=fake)
    # A factory that cannot be found fails before anything is recorded (resolving its inputs); any recording
    # started is stopped.
    assert not fake.recording and (not fake.calls or fake.calls[-1] == "stop")


def test_out_of_memory_still_writes_the_snapshot_and_names_it(tmp_path):
    fake = FakeMemory()
    with pytest.raises(OutOfMemory) as caught:
        record_memory_snapshot(_cfg(model="tests.tinymodels:oom_model"), out_dir=str(tmp_path), memory=fake)
    message = str(caught.value)
    assert message.startswith("out of memory snapshotting tests.tinymodels:oom_model")
    (name,) = os.listdir(tmp_path)
    assert f"memory snapshot of the failure: {tmp_path / name}" in message
    with open(tmp_path / name, "rb") as fh:
        assert pickle.load(fh) == fake._snapshot
    assert fake.calls[-2:] == ["snapshot", "stop"]


def test_cancel_between_iterations_keeps_what_was_recorded(tmp_path):
    fake = FakeMemory()
    asked = []
    result = record_memory_snapshot(_cfg(), iters=10, out_dir=str(tmp_path), memory=fake,
                                    should_cancel=lambda: asked.append(1) or len(asked) > 2)
    assert result.cancelled and result.iters == 2 and len(asked) == 3
    assert os.path.exists(result.path) and fake.calls[-1] == "stop"


def test_cancel_before_the_first_pass_writes_nothing(tmp_path):
    fake = FakeMemory()
    result = record_memory_snapshot(_cfg(), out_dir=str(tmp_path), memory=fake, should_cancel=lambda: True)
    assert result.cancelled and result.iters == 0 and result.path is None and result.size_bytes == 0
    assert os.listdir(tmp_path) == [] and "snapshot" not in fake.calls and fake.calls[-1] == "stop"
    assert json.dumps(result.to_dict())


def test_passes_run_under_the_configured_flags_and_they_are_restored():
    from tests.tinymodels import ThreadsProbe

    before = torch.get_num_threads()
    ThreadsProbe.seen.clear()
    record_memory_snapshot(_cfg(model="tests.tinymodels:threads_probe", flags=Flags(num_threads=1)), iters=2,
                           out_dir=None, memory=FakeMemory())
    assert ThreadsProbe.seen == [1, 1] and torch.get_num_threads() == before


def test_iterations_must_be_positive():
    with pytest.raises(TorchperfError, match="at least 1"):
        record_memory_snapshot(_cfg(), iters=0, memory=FakeMemory())


def test_count_entries_tolerates_a_snapshot_without_history():
    assert count_entries({"segments": [{}]}) == (0, 1)
    assert count_entries({}) == (0, 0)


def test_torch_adapter_falls_back_when_clear_history_is_unknown(monkeypatch):
    seen = []

    def old_record_memory_history(enabled="all", context="all", stacks="all", max_entries=1, device=None):
        seen.append(dict(enabled=enabled, context=context, stacks=stacks, max_entries=max_entries))

    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history", old_record_memory_history)
    TorchCudaMemory().record(50)
    TorchCudaMemory().stop()
    assert seen[0] == dict(enabled="all", context="all", stacks="python", max_entries=50)
    assert seen[1]["enabled"] is None
    assert TorchCudaMemory().records_on(torch.device("cpu")) is False


@pytest.mark.gpu
def test_gpu_snapshot_opens_as_a_memory_viz_pickle(tmp_path):
    cfg = BenchConfig(model=TINY, input_shape=(8, 3, 64, 64), device="cuda")
    result = record_memory_snapshot(cfg, iters=2, out_dir=str(tmp_path))
    assert result.path and os.path.exists(result.path) and result.size_bytes > 0
    with open(result.path, "rb") as fh:
        snapshot = pickle.load(fh)
    assert "segments" in snapshot and "device_traces" in snapshot
    assert result.entries > 0 and result.segments > 0 and result.peak_allocated_bytes > 0
    frames = [frame for trace in snapshot["device_traces"] for entry in trace for frame in entry.get("frames", [])]
    assert any("tinymodels.py" in str(frame.get("filename", "")) for frame in frames)  # stacks point at the model
    # recording was stopped: a later allocation adds no event to the history
    keep = torch.ones(1024, device="cuda")
    after = torch.cuda.memory._snapshot()
    assert sum(len(t) for t in after["device_traces"]) <= result.entries
    del keep


def test_snapshot_is_pickle_protocol_4_whatever_the_interpreters_default(tmp_path):
    # memory_viz shows nothing for protocol 5, Python 3.14's default
    path = tmp_path / "snap.pickle"
    write_snapshot({"segments": [], "device_traces": [[]]}, str(path))
    data = path.read_bytes()
    assert data[0] == 0x80 and data[1] == 4
    assert pickle.loads(data) == {"segments": [], "device_traces": [[]]}


def test_snapshot_path_that_is_a_directory_is_refused(tmp_path):
    from torchperf_tui.core.output_files import OutputPathError

    (tmp_path / "snap.pickle").mkdir()
    with pytest.raises(OutputPathError, match="a directory"):
        write_snapshot({"segments": []}, str(tmp_path / "snap.pickle"))
