"""On a box with cores to spare the UI's event loop is kept off the measurement's CPUs, and the measurement process
off the UI's (it puts itself there before it imports torch); on a small box (this 2-core one) nothing is pinned.
Driven with fake CPU sets and a recorder, and one real process put on one CPU."""

from __future__ import annotations

import os

from torchperf_tui.app.session import Session, core_plan
from torchperf_tui.measure.process import CPUS_ENV, apply_cpu_set


def test_only_a_box_with_more_than_four_cpus_gives_the_ui_one_of_its_own():
    assert core_plan(frozenset()) is None and core_plan({0, 1}) is None and core_plan(set(range(4))) is None
    assert core_plan(set(range(16))) == (15, frozenset(range(15)))
    assert core_plan({0, 2, 4, 6, 8}) == (8, frozenset({0, 2, 4, 6}))  # the CPUs the app may run on, not 0..n


def session_with(cpus: set[int], measurement=None) -> tuple[Session, list]:
    calls: list = []
    session = Session(measurement=measurement)
    session.cores = core_plan(cpus)
    session.set_affinity = lambda pid, cpus: calls.append((pid, set(cpus)))
    return session, calls


def test_the_measurement_process_is_started_on_the_measurement_cpus_and_the_ui_thread_pinned_once():
    made: list = []

    class FakeClient:
        def __init__(self, **kwargs) -> None:
            made.append(kwargs)

        def start(self) -> None:
            pass

    session, calls = session_with(set(range(8)), measurement=FakeClient)
    session.start(lambda event: None, lambda text: None)
    assert made[0]["cpus"] == frozenset(range(7))  # given before the process imports torch, not after Ready
    session.measurement_pid = 123
    assert calls == [(0, {7})]  # the UI thread alone; the process placed itself
    session.measurement_pid = 456  # a restarted process: it placed itself too, the UI already pinned
    assert calls == [(0, {7})] and session.measurement_pid == 456


def test_a_small_box_pins_nothing_and_starts_the_process_where_it_is():
    made: list = []
    session, calls = session_with({0, 1}, measurement=lambda **kwargs: made.append(kwargs)
                                  or type("C", (), {"start": lambda self: None})())
    session.start(lambda event: None, lambda text: None)
    session.measurement_pid = 123
    assert calls == [] and session.cores is None and made[0]["cpus"] is None


def test_the_worker_applies_its_cpu_set_and_takes_the_variable_out():
    applied: list = []
    environ = {CPUS_ENV: "0,2,3", "OTHER": "x"}
    assert apply_cpu_set(environ, lambda pid, cpus: applied.append((pid, set(cpus)))) == frozenset({0, 2, 3})
    assert applied == [(0, {0, 2, 3})] and environ == {"OTHER": "x"}  # what the model starts does not inherit it
    for text in ("", "a,b", ","):
        assert apply_cpu_set({CPUS_ENV: text}, lambda pid, cpus: applied.append(cpus)) is None
    assert apply_cpu_set({}, lambda pid, cpus: applied.append(cpus)) is None and len(applied) == 1

    def refuses(pid, cpus):
        raise OSError(22, "Invalid argument")

    assert apply_cpu_set({CPUS_ENV: "999"}, refuses) is None  # a CPU gone: it runs where it was started


def test_a_measurement_process_given_one_cpu_sized_torch_from_it():
    """Applied before torch is imported: torch's default thread count is the one CPU's, not the box's."""
    from tests.measure.test_measurement_process import Recorder
    from torchperf_tui.measure.client import MeasurementProcess

    rec = Recorder()
    cpu = min(os.sched_getaffinity(0))
    process = MeasurementProcess(rec.on_event, rec.on_notice, cpus={cpu})
    process.start()
    try:
        probe = process.submit("probe", {}, "probing")
        rec.wait_for(lambda: rec.end_of(probe) is not None, timeout=120)
        assert rec.end_of(probe).result.cpu.torch_threads == 1
        reading = process.submit("memory")
        rec.wait_for(lambda: rec.end_of(reading) is not None, timeout=60)
        assert os.sched_getaffinity(process.pid) == {cpu}
    finally:
        process.stop()


def test_this_box_decides_from_the_cpus_the_app_may_run_on():
    session = Session()
    assert session.cores == core_plan(os.sched_getaffinity(0))
