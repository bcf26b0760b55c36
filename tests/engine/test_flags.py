import threading

import pytest
import torch

from torchperf_tui.core.errors import FlagError
from torchperf_tui.core.flag_table import FLAG_ENTRIES
from torchperf_tui.engine.measurements.flags import (Flags, TorchState, applied_flags, flag_applicability, guarded_job,
                                                     pristine_state, restore_state)
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.timing import run_benchmark
from tests import state_changing_models as hostile


def test_current_reflects_torch_state():
    before = Flags.current()
    assert before.num_threads == torch.get_num_threads()
    assert before.cudnn_benchmark == torch.backends.cudnn.benchmark


def test_applied_flags_sets_and_restores_everything():
    before = Flags.current()
    wanted = Flags(cudnn_benchmark=True, cudnn_deterministic=True, cudnn_enabled=False, tf32_matmul=True,
                   tf32_cudnn=False, deterministic_algorithms=True, mkldnn_enabled=False, num_threads=1)
    with applied_flags(wanted):
        inside = Flags.current()
        assert torch.backends.cudnn.benchmark is True
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.get_num_threads() == 1
    assert inside == wanted
    assert Flags.current() == before


def test_applied_flags_restores_after_an_error():
    before = Flags.current()
    with pytest.raises(ZeroDivisionError):
        with applied_flags(Flags(cudnn_benchmark=not before.cudnn_benchmark, num_threads=1)):
            1 / 0
    assert Flags.current() == before


def test_flags_are_held_by_one_run_at_a_time():
    """A second flags context waits until the first has restored the state: no run sees flags change."""
    entered = threading.Event()
    release = threading.Event()
    seen_by_second = []

    def first():
        with applied_flags(Flags(cudnn_benchmark=True)):
            entered.set()
            release.wait(5)

    def second():
        entered.wait(5)
        with applied_flags(Flags(cudnn_benchmark=False)):
            seen_by_second.append(torch.backends.cudnn.benchmark)

    t1, t2 = threading.Thread(target=first), threading.Thread(target=second)
    t1.start(), t2.start()
    entered.wait(5)
    t2.join(0.2)
    assert t2.is_alive(), "second context entered while the first still held the flags"
    assert torch.backends.cudnn.benchmark is True
    release.set()
    t1.join(5), t2.join(5)
    assert seen_by_second == [False]


def test_bad_threads_and_unknown_flag_are_flag_errors():
    before = Flags.current()
    with pytest.raises(FlagError):
        with applied_flags(Flags(num_threads=0)):
            pass
    assert Flags.current() == before
    with pytest.raises(FlagError, match="unknown flag"):
        Flags().replace(benchmark=True)


def test_cuda_flags_do_not_apply_on_cpu_and_say_why():
    for spec in FLAG_ENTRIES:
        applies, reason = flag_applicability(spec.name, "cpu")
        if spec.device == "cuda":
            assert not applies and "CUDA" in reason
        else:
            assert applies or reason  # CPU flags apply unless the build lacks oneDNN, which is then said
    assert flag_applicability("num_threads", "cuda") == (False, "sets CPU threads; the model runs on the GPU")


def test_tf32_needs_ampere(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (7, 5))
    applies, reason = flag_applicability("tf32_matmul", "cuda")
    assert not applies and "8.0" in reason and "7.5" in reason
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    assert flag_applicability("tf32_matmul", "cuda") == (True, None)


def test_describe_names_only_what_differs_and_always_the_cpu_threads():
    """The thread count a CPU run used is always said, never "defaults" (a run on one thread read "flags
    defaults" while every other ran on two)."""
    assert Flags().describe("cpu", threads_used=2) == "threads=2 (default)"
    assert Flags().describe("cpu") == "threads=default"  # before a run: not known yet, and said so
    assert Flags().describe("cpu", default_threads=2) == "threads=2 (default)"  # known: said as a run says it
    text = Flags(cudnn_benchmark=True, num_threads=2).describe()
    assert "cudnn.benchmark=on" in text and "threads=2" in text
    assert Flags(cudnn_benchmark=True).describe(device="cpu", threads_used=4) == "threads=4 (default)"
    assert Flags(num_threads=2).describe("cpu", threads_used=1) == "threads=2 (ran on 1)"
    assert Flags().describe("cuda:0", threads_used=2) == "defaults"  # the GPU's run: threads are not its setting


def test_flags_described_against_another_set_name_only_what_differs():
    base = Flags(deterministic_algorithms=True)
    assert Flags(deterministic_algorithms=True, mkldnn_enabled=False).describe("cpu", against=base) == \
        "oneDNN (mkldnn)=off"
    assert base.describe("cpu", against=base) == "same flags"
    assert Flags(num_threads=2).describe("cpu", against=Flags()) == "threads=2"
    assert Flags().describe("cpu", against=Flags(num_threads=2)) == "threads=default"
    assert Flags().describe("cpu", against=Flags(num_threads=1), default_threads=2) == "threads=2 (default)"


def test_flags_described_against_another_set_tell_the_thread_counts_that_ran_apart():
    """Compare said "same flags" for two runs of equal flags, one of which ran on one thread."""
    assert Flags().describe("cpu", against=Flags(), threads_used=1, against_threads=2) == "threads=1"
    assert Flags().describe("cpu", against=Flags(num_threads=2), threads_used=2) == "same flags"


# -- what a model's code does to torch's global state ----------------------------------------------------

@pytest.fixture
def baseline():
    """The process's pristine state; put back after the test whatever it did."""
    state = pristine_state()
    restore_state(state)
    yield state
    restore_state(state)


def _cfg(model: str, **kw) -> BenchConfig:
    return BenchConfig(model=model, input_shape=(1, 3, 16, 16), device="cpu", warmup=2, iters=5, **kw)


def test_a_factory_that_sets_threads_is_said_overridden_for_the_run_and_put_back(baseline):
    """The tester's case: a factory calling torch.set_num_threads(1) slowed every later model of the session."""
    hostile.FactorySetsThreads.seen.clear()
    result = run_benchmark(_cfg("tests.state_changing_models:factory_sets_threads"))
    set_to, own = hostile.FactorySetsThreads.set_to, baseline.flags.num_threads
    assert set_to != own
    assert len(result.state_notes) == 1
    note = result.state_notes[0]
    assert f"torch threads to {set_to}" in note and "factory" in note and "put back" in note
    assert set(hostile.FactorySetsThreads.seen) == {own}  # the run itself ran on the process's own count
    assert result.threads_used == own and result.flags_text() == f"threads={own} (default)"
    assert TorchState.current() == baseline  # nothing leaks to the next model
    after = run_benchmark(_cfg("tests.tinymodels:tiny_cnn"))
    assert after.state_notes == [] and after.threads_used == own


def test_a_forward_that_sets_threads_during_the_run_marks_its_samples(baseline):
    result = run_benchmark(_cfg("tests.state_changing_models:forward_sets_threads"))
    set_to = hostile.ForwardSetsThreads.set_to
    assert set_to is not None and set_to != baseline.flags.num_threads
    assert len(result.state_notes) == 1
    note = result.state_notes[0]
    assert (f"torch threads to {set_to} (asked: {baseline.flags.num_threads}) during the run" in note
            and "did not ask for" in note)
    assert result.threads_used == set_to  # the count torch reported in the run: said, not hidden
    assert TorchState.current() == baseline


def test_a_factory_that_turns_a_flag_off_is_said_and_put_back(baseline):
    result = run_benchmark(_cfg("tests.state_changing_models:factory_disables_mkldnn"))
    assert any("oneDNN (mkldnn) to off" in note for note in result.state_notes)
    assert result.flags_in_effect.mkldnn_enabled  # the run ran under its own flags
    assert torch.backends.mkldnn.enabled and TorchState.current() == baseline


def test_threads_left_empty_are_the_process_own_count_not_what_the_last_model_set(baseline):
    torch.set_num_threads(hostile.other_thread_count())  # as a model's code would, outside any flags context
    with applied_flags(Flags()):
        inside = torch.get_num_threads()
    assert inside == baseline.flags.num_threads


def test_a_guarded_job_puts_the_state_back_and_says_what_changed(baseline):
    other = hostile.other_thread_count()

    def job():
        torch.set_num_threads(other)
        torch.set_default_dtype(torch.float64)
        return "result", {}

    result, extra = guarded_job(job)
    assert result == "result" and TorchState.current() == baseline
    notes = extra["state_notes"]
    assert any(f"torch threads to {other}; put back to {baseline.flags.num_threads}" in n for n in notes)
    assert any("default dtype to float64" in n for n in notes)


def test_a_guarded_job_that_fails_still_puts_the_state_back(baseline):
    def job():
        torch.backends.cudnn.benchmark = not baseline.flags.cudnn_benchmark
        raise ValueError("the model's own error")

    with pytest.raises(ValueError):
        guarded_job(job)
    assert TorchState.current() == baseline


def test_a_guarded_job_adds_to_a_result_that_carries_notes_without_saying_a_change_twice(baseline):
    result = run_benchmark(_cfg("tests.tinymodels:tiny_cnn"))
    other = hostile.other_thread_count()

    def job():
        out = run_benchmark(_cfg("tests.state_changing_models:factory_sets_threads"))
        torch.backends.mkldnn.enabled = False  # after the run: only the job's guard sees it
        return out, {}

    out, extra = guarded_job(job)
    assert result.state_notes == [] and "state_notes" not in extra
    assert sum("torch threads" in n for n in out.state_notes) == 1 and f"to {other}" in out.state_notes[0]
    assert any("oneDNN (mkldnn) to off" in n and "after the job" in n for n in out.state_notes)
    assert TorchState.current() == baseline


def test_a_thread_count_the_model_set_is_not_called_the_default(baseline):
    result = run_benchmark(_cfg("tests.state_changing_models:forward_sets_threads"))
    own, set_to = baseline.flags.num_threads, hostile.ForwardSetsThreads.set_to
    assert result.flags_text() == f"threads={set_to} (set by the model's code; default {own})"


def test_an_ab_comparison_says_what_the_factory_set_and_each_arm_s_thread_count(baseline):
    from torchperf_tui.engine.measurements.abtest import ArmSpec, run_ab

    own = baseline.flags.num_threads
    result = run_ab(_cfg("tests.state_changing_models:factory_sets_threads"), ArmSpec(Flags()),
                    ArmSpec(Flags(num_threads=1)), blocks=6, per_block=2)
    assert len(result.state_notes) == 1 and "torch threads to" in result.state_notes[0]
    assert result.a.threads_used == own and result.b.threads_used == 1
    assert result.a.flags_text("cpu") == f"threads={own} (default)"
    assert TorchState.current() == baseline


def test_an_ab_arm_whose_thread_count_the_model_set_is_not_called_the_default(baseline):
    """A forward that sets the thread count in an arm's block: the arm, its history record and the CLI's table say
    the count was the model's, with the default beside it; the other arm ran on the default."""
    from torchperf_tui.cli import render as cli_render
    from torchperf_tui.engine.measurements.abtest import ArmSpec, run_ab
    from torchperf_tui.engine.records.history_records import records_from_ab

    own = baseline.flags.num_threads
    result = run_ab(_cfg("tests.state_changing_models:forward_sets_threads"), ArmSpec(Flags()),
                    ArmSpec(Flags(mkldnn_enabled=False)), blocks=6, per_block=2)
    set_to = hostile.ForwardSetsThreads.set_to
    first, other = result.order[0], "B" if result.order[0] == "A" else "A"  # the model's third pass: the first block
    changed = f"threads={set_to} (set by the model's code; default {own})"
    arms = {"A": result.a, "B": result.b}
    assert arms[first].threads_used == set_to and arms[first].flags_text("cpu").endswith(changed)
    assert arms[other].flags_text("cpu").endswith(f"threads={own} (default)")
    records = {r.details["arm"]: r for r in records_from_ab(result, fingerprint={})}
    assert records[first].flags_text.endswith(changed) and records[other].flags_text.endswith("(default)")
    with cli_render.console.capture() as captured:
        cli_render.render_ab(result)
    assert "set by the model's code" in captured.get()
    assert TorchState.current() == baseline


def test_a_run_with_deterministic_algorithms_off_does_not_import_the_compiler():
    """torch's use_deterministic_algorithms imports torch._inductor (and dynamo) to mirror the flag in the
    compiler's config: over a second of CPU in every measurement process for a flag already off. Off stays off
    without it; on, and back off, go through torch's setter and the compiler's config follows."""
    import subprocess
    import sys

    code = """
import sys, torch
from torchperf_tui.engine.measurements.flags import Flags, applied_flags
with applied_flags(Flags()):
    assert not torch.are_deterministic_algorithms_enabled()
print("compiler imported when off:", "torch._inductor" in sys.modules)
with applied_flags(Flags(deterministic_algorithms=True)):
    import torch._inductor.config as config
    assert torch.are_deterministic_algorithms_enabled() and config.deterministic
assert not torch.are_deterministic_algorithms_enabled() and not config.deterministic
torch.use_deterministic_algorithms(True, warn_only=True)
with applied_flags(Flags()):
    assert not torch.are_deterministic_algorithms_enabled()
assert torch.are_deterministic_algorithms_enabled() and torch.is_deterministic_algorithms_warn_only_enabled()
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["compiler imported when off: False", "ok"]
