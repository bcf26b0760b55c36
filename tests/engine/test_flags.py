import threading

import pytest
import torch

from torchperf_tui.engine.errors import FlagError
from torchperf_tui.engine.flags import FLAG_SPECS, Flags, applied_flags, flag_applicability


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
    for spec in FLAG_SPECS:
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


def test_describe_names_only_what_differs():
    assert Flags().describe() == "defaults"
    text = Flags(cudnn_benchmark=True, num_threads=2).describe()
    assert "cudnn.benchmark=on" in text and "threads=2" in text
    assert Flags(cudnn_benchmark=True).describe(device="cpu") == "defaults"


def test_flags_described_against_another_set_name_only_what_differs():
    base = Flags(deterministic_algorithms=True)
    assert Flags(deterministic_algorithms=True, mkldnn_enabled=False).describe("cpu", against=base) == \
        "oneDNN (mkldnn)=off"
    assert base.describe("cpu", against=base) == "same flags"
    assert Flags(num_threads=2).describe("cpu", against=Flags()) == "threads=2"
    assert Flags().describe("cpu", against=Flags(num_threads=2)) == "threads=auto"
