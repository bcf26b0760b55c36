"""Shared test set-up: `gpu`-marked tests need a real CUDA device and are skipped cleanly without one."""

from __future__ import annotations

import gc
import itertools
import os
import tempfile

import pytest

from tests.fakes.fake_nvml import FakeNvml
from torchperf_tui.engine.hardware.torch_notices import quiet_torch_notices

# The tests import torch in their own process, where transformers then imports torchao (the test extra has it) and
# torch logs its notices for torch's developers into the output a test reads: dropped here as the measurement
# process drops them (measure/process.py).
quiet_torch_notices()

# The CLI's output is 200 columns wide in a pipe unless COLUMNS says otherwise; pytest-xdist's workers inherit
# COLUMNS=80 from execnet, so the tests that read whole lines would depend on how they were started.
os.environ.pop("COLUMNS", None)
# The timm and transformers catalogues take seconds to list: the test session keeps one listing per version for all
# its workers and the measurement processes they start (engine/workloads/catalogue_cache.py), not the user's.
os.environ.setdefault("TORCHPERF_CATALOGUE_CACHE",
                      os.path.join(tempfile.gettempdir(), f"torchperf-tests-catalogue-{os.getuid()}.json"))

# torch.compile's inductor compiles its kernels in a pool of worker processes (one a core), each importing torch: on
# a 2-core box starting that pool costs more than it saves. The tests compile tiny models and test what the tool says
# of a compile, not inductor's parallelism, so they compile in their own process (and so do the measurement processes
# and commands they start, which inherit it): 35 s -> 27 s for a compiled run's test, 68 s -> 46 s for a static cache's
# compiled decode and a warm start (one at a time, on a quiet 2-core box). A user's compile keeps torch's default.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

# Python collects its youngest objects every 700 allocations; an app test allocates Textual's widgets, styles and
# strips by the million, and those collections took ~0.5 s of a test's ~3 s of CPU (measured over eight apps: 5.2 s
# in the collector, 1.3 s with these). Collected every 50,000 instead, and whatever the worker has imported by the
# end of collection is never walked again (gc.freeze, pytest_collection_finish below). Memory: +40 MB a worker.
gc.set_threshold(50_000, 10, 10)


def pytest_collection_finish(session):
    gc.freeze()


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (none on this machine)")
    for item in gpu_items:
        item.add_marker(skip)


OWN_PROCESS = "own_process"


def pytest_configure(config):
    config.addinivalue_line("markers", f"{OWN_PROCESS}: the test's apps and commands each start a measurement "
                                       "process of their own (it tests the process: its start, death, deadlines, "
                                       "pid, CPUs, output or environment), not the worker's shared one")


@pytest.fixture(scope="session")
def _shared_cli_measurement():
    """The worker's one warm measurement process for the CLI's commands (tests/fakes/shared_measurement.py), started
    by the first command that runs a job, stopped at the end. The app tests have one of their own
    (tests/app/conftest.py): an app's process runs on the app's CPUs, a command's on all of them."""
    from torchperf_tui.measure.client import MeasurementProcess
    from tests.fakes.shared_measurement import SharedMeasurement

    shared = SharedMeasurement(lambda on_event, on_notice, cpus: MeasurementProcess(on_event=on_event,
                                                                                   on_notice=on_notice,
                                                                                   output="stderr"))
    yield shared
    shared.close()


@pytest.fixture(autouse=True)
def _cli_measurement(request, monkeypatch, _shared_cli_measurement):
    """The CLI's commands in this test run their jobs in the worker's shared process (a test that patches
    cli_jobs.MeasurementProcess itself still does), or, marked own_process, in a process each as a user's do.
    Each job carries the test's own history and ceilings files (core/kept_files.py's FILE_ENVS)."""
    if request.node.get_closest_marker(OWN_PROCESS) is None:
        monkeypatch.setattr("torchperf_tui.measure.cli_jobs.MeasurementProcess", _shared_cli_measurement.for_cli)


@pytest.fixture(autouse=True)
def _private_history(tmp_path, monkeypatch):
    """Runs made by tests go to a history file of their own, never the user's; so do measured ceilings."""
    monkeypatch.setenv("TORCHPERF_HISTORY", str(tmp_path / "history.jsonl"))
    monkeypatch.setenv("TORCHPERF_CEILINGS", str(tmp_path / "ceilings.json"))


class _CountingEnergy(FakeNvml):
    """Each energy read finds the counter 1 J further on; under one thread the GPU is at its power cap."""

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        gpu = self._enter("nvmlDeviceGetTotalEnergyConsumption", handle)
        gpu.energy_mj += 1000
        return gpu.energy_mj

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        import torch

        self._enter("nvmlDeviceGetCurrentClocksEventReasons", handle)
        return 0x4 if torch.get_num_threads() == 1 else 0


@pytest.fixture
def fake_gpu_conditions(monkeypatch):
    """run_benchmark, run_ab, run_modes and the throughput search read this fake NVML beside a CPU run as they read a GPU's beside a CUDA run."""
    fake = _CountingEnergy()

    from torchperf_tui.engine.hardware.nvml import Nvml
    from torchperf_tui.engine.hardware.condition_sampler import ConditionSampler

    # A clock a second further on at each reading, so that a window (its two edges) lasts a second: long enough for
    # its energy to be judged (run_conditions.SHORT_WINDOW_S), whatever the tiny CPU model's real speed.
    seconds = itertools.count()

    def sampler(device, period_s=None):
        return ConditionSampler(Nvml.open(fake), 0, period_s=None, clock=lambda: float(next(seconds)))

    monkeypatch.setattr("torchperf_tui.engine.measurements.timing.conditions_sampler", sampler)
    monkeypatch.setattr("torchperf_tui.engine.measurements.abtest.conditions_sampler", sampler)
    monkeypatch.setattr("torchperf_tui.engine.measurements.timing_modes.conditions_sampler", sampler)
    monkeypatch.setattr("torchperf_tui.engine.measurements.throughput.conditions_sampler", sampler)
    return fake
