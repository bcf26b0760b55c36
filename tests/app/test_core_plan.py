"""On a box with cores to spare the UI's event loop is kept off the measurement's CPUs, and the measurement process
off the UI's; on a small box (this 2-core one) nothing is pinned. Driven with fake CPU sets and a recorder."""

from __future__ import annotations

import os

from torchperf_tui.app.session import Session, core_plan


def test_only_a_box_with_more_than_four_cpus_gives_the_ui_one_of_its_own():
    assert core_plan(frozenset()) is None and core_plan({0, 1}) is None and core_plan(set(range(4))) is None
    assert core_plan(set(range(16))) == (15, frozenset(range(15)))
    assert core_plan({0, 2, 4, 6, 8}) == (8, frozenset({0, 2, 4, 6}))  # the CPUs the app may run on, not 0..n


class FakeClient:
    def __init__(self, calls: list) -> None:
        self.calls = calls

    def _on_supervisor(self, fn) -> None:
        self.calls.append("supervisor")
        fn()


def session_with(cpus: set[int], client=True) -> tuple[Session, list]:
    calls: list = []
    session = Session()
    session.cores = core_plan(cpus)
    session.set_affinity = lambda pid, cpus: calls.append((pid, set(cpus)))
    session.measure = FakeClient(calls) if client else object()
    return session, calls


def test_each_ready_measurement_process_is_kept_off_the_ui_cpu_and_the_ui_thread_pinned_once():
    session, calls = session_with(set(range(8)))
    session.measurement_pid = 123
    # the process first, then the supervisor thread that restarts it made before the UI thread is pinned
    assert calls == [(123, set(range(7))), "supervisor", (0, {7})]
    calls.clear()
    session.measurement_pid = 456  # a restarted process: put back in its place, the UI already pinned
    assert calls == [(456, set(range(7)))] and session.measurement_pid == 456


def test_a_small_box_or_a_client_without_a_supervisor_thread_pins_no_ui_thread():
    session, calls = session_with({0, 1})
    session.measurement_pid = 123
    assert calls == [] and session.cores is None
    session, calls = session_with(set(range(8)), client=False)
    session.measurement_pid = 123
    assert calls == [(123, set(range(7)))]  # the UI thread would start restarts inside its one-CPU mask


def test_this_box_decides_from_the_cpus_the_app_may_run_on():
    session = Session()
    assert session.cores == core_plan(os.sched_getaffinity(0))
