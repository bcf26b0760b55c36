"""TF32 per backend: each TF32 flag set and read through torch's per-backend fp32_precision settings (CUDA's matmuls,
cuDNN's convolutions and RNNs, oneDNN's convolutions and RNNs), on its own and with the float32 matmul precision; put
back as it was, "none" (inherit) included; no warning and no state torch's own legacy readers refuse; and on a torch
without those settings, allow_tf32, said once, by the flags that cannot act there."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from torchperf_tui.core.flag_table import FLAG_ENTRIES, flag_entry
from torchperf_tui.engine.measurements import precision_flags as precision
from torchperf_tui.engine.measurements.flags import (WITHOUT_FP32_PRECISION, Flags, TorchState, StateWatch,
                                                     applicability_table, applied_flags, asked_state,
                                                     flag_applicability, inert_flags, pristine_state)

TF32_FLAGS = [entry.name for entry in FLAG_ENTRIES if entry.fp32_precision]
per_backend = pytest.mark.skipif(not precision.per_backend(), reason="this torch has no per-backend fp32_precision")


def test_the_table_has_a_tf32_flag_per_backend():
    assert TF32_FLAGS == ["tf32_matmul", "tf32_cudnn", "tf32_rnn", "tf32_mkldnn"]
    assert {name: flag_entry(name).fp32_precision for name in TF32_FLAGS} == {
        "tf32_matmul": ("backends.cuda.matmul",), "tf32_cudnn": ("backends.cudnn.conv",),
        "tf32_rnn": ("backends.cudnn.rnn",), "tf32_mkldnn": ("backends.mkldnn.conv", "backends.mkldnn.rnn")}
    assert [flag_entry(name).device for name in TF32_FLAGS] == ["cuda", "cuda", "cuda", "cpu"]
    assert [flag_entry(name).default for name in TF32_FLAGS] == [False, True, True, False]  # PyTorch's


@per_backend
@pytest.mark.parametrize("name", TF32_FLAGS)
def test_each_tf32_flag_is_set_and_read_through_its_own_settings_alone(name):
    entry = flag_entry(name)
    before = TorchState.current()
    others = {path: precision.read(path) for other in TF32_FLAGS if other != name
              for path in flag_entry(other).fp32_precision}
    for on in (not entry.default, entry.default):
        with applied_flags(Flags().replace(**{name: on})):
            now = Flags.current()
            assert getattr(now, name) is on
            assert [precision.read(path) == "tf32" for path in entry.fp32_precision] == [on] * len(entry.fp32_precision)
            assert {path: precision.read(path) for path in others} == others  # the other backends left alone
            assert {other: getattr(now, other) for other in TF32_FLAGS if other != name} == \
                {other: getattr(before.flags, other) for other in TF32_FLAGS if other != name}
            assert now.matmul_precision == "highest"
        assert TorchState.current() == before  # flags, and every setting as read, "none" included


@per_backend
def test_tf32_matmul_at_highest_keeps_torch_own_readers_working():
    """TF32 matmul at 'highest' is torch's 'high' for cuBLAS with oneDNN's matmuls back to full float32 (what
    allow_tf32 did): torch's legacy getters, which its compiler still asks, find no mix of the two APIs."""
    with applied_flags(Flags(tf32_matmul=True)):
        assert precision.read("backends.cuda.matmul") == "tf32" and precision.read("backends.mkldnn.matmul") == "ieee"
        assert (Flags.current().tf32_matmul, Flags.current().matmul_precision) == (True, "highest")
        assert torch.get_float32_matmul_precision() == "high" and torch.backends.cuda.matmul.allow_tf32
    for precision_name, onednn in (("high", "tf32"), ("medium", "bf16")):
        with applied_flags(Flags().replace(matmul_precision=precision_name)):
            assert precision.read("backends.mkldnn.matmul") == onednn
            assert (Flags.current().matmul_precision, Flags.current().tf32_matmul) == (precision_name, True)
            assert torch.get_float32_matmul_precision() == precision_name
    assert torch.get_float32_matmul_precision() == "highest" and not torch.backends.cuda.matmul.allow_tf32
    with applied_flags(Flags(tf32_cudnn=False, tf32_rnn=False)):
        assert not Flags.current().tf32_cudnn and not Flags.current().tf32_rnn
    assert torch.backends.cudnn.allow_tf32  # put back as found: torch's legacy getter agrees with it again


@per_backend
def test_settings_are_put_back_as_read_inheriting_included():
    before = precision.settings()
    every = Flags(tf32_matmul=True, tf32_cudnn=False, tf32_rnn=False, tf32_mkldnn=True).replace(
        matmul_precision="medium")
    with applied_flags(every):
        assert Flags.current() == every.resolved()
    assert precision.settings() == before
    legacy = torch.get_float32_matmul_precision()
    parent = torch.backends.fp32_precision
    try:  # a model's code sets torch's own fp32 precision: every setting below it that inherits reads "tf32"
        torch.backends.fp32_precision = "tf32"
        inherited = precision.settings()
        assert dict(inherited)["backends.mkldnn.conv"] == "tf32" and Flags.current().tf32_mkldnn
        with applied_flags(Flags()):  # torch's defaults: TF32 off for matmuls and oneDNN, whatever a parent says
            assert precision.read("backends.mkldnn.conv") == "ieee" and precision.read("backends.cuda.matmul") == "ieee"
            assert not Flags.current().tf32_mkldnn and not Flags.current().tf32_matmul
        assert precision.settings() == inherited
        torch.backends.fp32_precision = parent
        assert precision.settings() == before  # they inherit again: put back as "none", not as the "tf32" read
        assert torch.get_float32_matmul_precision() == legacy  # and torch's own precision as it was, not 'high'
    finally:
        torch.backends.fp32_precision = parent


@per_backend
def test_a_model_that_changes_a_setting_no_flag_shows_is_said_and_put_back():
    """oneDNN's convolutions to bf16: TF32 oneDNN still reads off, the setting says it."""
    watch = StateWatch()
    torch.backends.mkldnn.conv.fp32_precision = "bf16"  # as a model's factory would
    try:
        watch.built()
        assert any("set fp32 precision to mkldnn.conv=bf16: overridden for the run" in note for note in watch.notes), \
            watch.notes
        assert not Flags.current().tf32_mkldnn
        with applied_flags(Flags()):
            assert precision.read("backends.mkldnn.conv") == "ieee"  # the run runs in full float32
    finally:
        watch.close()
    assert precision.read("backends.mkldnn.conv") == dict(watch.start.fp32_precision)["backends.mkldnn.conv"]


@per_backend
def test_a_model_that_flips_a_tf32_flag_is_said_once_by_the_flag():
    watch = StateWatch()
    torch.backends.cudnn.rnn.fp32_precision = "ieee"
    try:
        watch.built()
    finally:
        watch.close()
    assert len(watch.notes) == 1 and "TF32 RNN to off" in watch.notes[0], watch.notes
    assert TorchState.current() == watch.start


def test_no_flag_set_applies_or_reads_with_a_warning():
    """Every TF32 flag on and off, each precision, in a fresh process with deprecation and user warnings as errors:
    applying, reading, the state and the applicability raise none (torch warns once per process)."""
    code = """
import torch
from torchperf_tui.core.flag_table import FLAG_ENTRIES
from torchperf_tui.engine.measurements.flags import Flags, TorchState, applicability_table, applied_flags
names = [entry.name for entry in FLAG_ENTRIES if entry.fp32_precision]
sets = [Flags().replace(**{name: not getattr(Flags(), name)}) for name in names]
sets += [Flags().replace(**{name: True for name in names}), Flags().replace(**{name: False for name in names})]
sets += [Flags().replace(matmul_precision=p, tf32_matmul=t)
         for p in ("highest", "high", "medium") for t in (False, True)]
before = TorchState.current()
for flags in sets:
    with applied_flags(flags):
        TorchState.current()
assert TorchState.current() == before
applicability_table()
print("ok")
"""
    done = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-W", "error::UserWarning", "-c", code],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok"


def test_oneDNN_tf32_says_when_this_cpu_cannot_use_it(monkeypatch):
    monkeypatch.setattr(precision, "cpu_has_tf32", lambda: False)
    assert flag_applicability("tf32_mkldnn", "cpu") == (
        False, "this CPU has no AMX-FP16, which torch requires before oneDNN computes float32 in TF32")
    assert inert_flags(Flags(tf32_mkldnn=True), "cpu") == [
        "TF32 oneDNN has no effect here: this CPU has no AMX-FP16, which torch requires before oneDNN computes "
        "float32 in TF32"]
    assert flag_applicability("tf32_mkldnn", "cuda")[1] == "oneDNN runs CPU ops only"
    if precision.per_backend() and torch.backends.mkldnn.is_available():
        monkeypatch.setattr(precision, "cpu_has_tf32", lambda: True)
        assert flag_applicability("tf32_mkldnn", "cpu") == (True, None)


# -- a torch without per-backend fp32_precision ------------------------------------------------------------------

class LegacyMatmul:
    """cuBLAS's settings as an older torch has them: allow_tf32, no fp32_precision."""

    def __init__(self) -> None:
        self.allow_tf32 = False


@pytest.fixture
def legacy_torch(monkeypatch):
    """torch.backends.cuda.matmul and torch.backends.cudnn as a torch without fp32_precision has them, on an Ampere
    GPU (the engine's seams: torch.cuda's availability and capability); torch's own settings put back after."""
    pristine_state()  # taken of the real torch, before the fakes, if no test took it yet
    settings = precision.settings()
    cudnn = SimpleNamespace(is_available=lambda: True, enabled=True, benchmark=False, deterministic=False,
                            allow_tf32=True)
    monkeypatch.setattr(torch.backends.cuda, "matmul", LegacyMatmul())
    monkeypatch.setattr(torch.backends, "cudnn", cudnn)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (8, 0))
    assert not precision.per_backend()
    yield SimpleNamespace(matmul=torch.backends.cuda.matmul, cudnn=cudnn)
    monkeypatch.undo()
    precision.restore(settings)  # the real set_float32_matmul_precision wrote CUDA's and oneDNN's matmul settings


def test_without_fp32_precision_tf32_goes_through_allow_tf32(legacy_torch):
    before = Flags.current()
    assert (before.tf32_matmul, before.tf32_cudnn, before.tf32_rnn, before.tf32_mkldnn) == (False, True, True, False)
    wanted = Flags(tf32_matmul=True, tf32_cudnn=False, tf32_rnn=True, tf32_mkldnn=True)
    with applied_flags(wanted):
        assert legacy_torch.matmul.allow_tf32 is True and legacy_torch.cudnn.allow_tf32 is False
        now = Flags.current()
        # cuDNN's RNNs follow its convolutions (one allow_tf32), oneDNN has none: as asked_state says, no false note
        assert (now.tf32_matmul, now.tf32_cudnn, now.tf32_rnn, now.tf32_mkldnn) == (True, False, False, False)
        assert now == asked_state(wanted).flags
    assert Flags.current() == before and legacy_torch.cudnn.allow_tf32 is True
    assert TorchState.current().fp32_precision == ()


def test_without_fp32_precision_the_fallback_is_said_once_by_the_flags_that_cannot_act(legacy_torch):
    table = applicability_table()
    said = [(kind, name) for kind, flags in table.items() for name, (_, why) in flags.items()
            if why == WITHOUT_FP32_PRECISION]
    assert said == [("cpu", "tf32_mkldnn"), ("cuda", "tf32_rnn")]
    assert "allow_tf32" in WITHOUT_FP32_PRECISION
    assert table["cuda"]["tf32_matmul"] == (True, None) and table["cuda"]["tf32_cudnn"] == (True, None)
    assert inert_flags(Flags(tf32_rnn=False), "cuda") == [f"TF32 RNN has no effect here: {WITHOUT_FP32_PRECISION}"]


def test_with_fp32_precision_nothing_says_the_fallback():
    if not precision.per_backend():
        pytest.skip("this torch has no per-backend fp32_precision")
    table = applicability_table()
    assert all(why != WITHOUT_FP32_PRECISION for flags in table.values() for _, why in flags.values())
