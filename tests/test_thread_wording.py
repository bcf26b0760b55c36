"""The thread count a run is left to is said one way, 'threads=2 (default)', before a run as after it: in the app
(from the measurement process's device report), in the measurement process's own texts (an A/B's or the kernels'
arms, a sweep's flags), and 'threads=default' only while nobody knows the count."""

from __future__ import annotations

from types import SimpleNamespace

from torchperf_tui.app.session import Session
from torchperf_tui.engine.measurements.flags import Flags, pristine_state


def test_the_app_says_the_default_count_once_the_measurement_process_has_reported_it():
    session = Session(device="cpu")
    assert session.flags_text(Flags()) == "threads=default"  # no report yet: the count is not known
    session.report = SimpleNamespace(cpu=SimpleNamespace(torch_threads=3), cuda_available=False)
    assert session.flags_text(Flags()) == "threads=3 (default)"
    assert session.flags_text(Flags(num_threads=1)) == "threads=1"  # asked for: no "(default)"
    assert session.flags_text(Flags(mkldnn_enabled=False)) == "oneDNN (mkldnn)=off, threads=3 (default)"


def test_a_report_that_could_not_read_the_count_leaves_it_unknown():
    session = Session(device="cpu")
    session.report = SimpleNamespace(cpu=SimpleNamespace(torch_threads="n/a (no torch)"), cuda_available=False)
    assert session.flags_text(Flags()) == "threads=default"


def test_the_measurement_process_names_its_own_count():
    """The app's kernels job words its arms in the measurement process, which knows its count (an A/B's arms and a
    sweep's flags the same way)."""
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.ab_arms import ArmSpec
    from torchperf_tui.measure.runners import JobContext, kernels_job

    base = BenchConfig(model="tests.tinymodels:tiny_cnn", input_shape=(1, 3, 32, 32), device="cpu")
    result, _ = kernels_job({"base": base, "a": ArmSpec(flags=Flags()), "b": ArmSpec(flags=Flags(mkldnn_enabled=False)),
                             "aa": True}, JobContext(1, lambda message: None))
    count = pristine_state().flags.num_threads
    # the flag the arms differ in, said by both (not 'threads=2 (default)' against 'oneDNN (mkldnn)=off, ...')
    assert result.a_spec == f"oneDNN (mkldnn)=on, threads={count} (default)"
    assert result.b_spec == f"oneDNN (mkldnn)=off, threads={count} (default)"
    assert Flags().describe("cuda", default_threads=count) == "defaults"  # a GPU run: threads are not its setting
