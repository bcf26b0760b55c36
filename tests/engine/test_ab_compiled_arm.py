"""An A/B arm may be torch.compiled (compile=MODE in its SPEC): it compiles once before the blocks, its compile time
said apart with the passes after which it pays for itself, and every block of that arm runs the compiled model while
the other arm runs eager. Refused where it cannot be measured like for like: both arms compiled, varying shapes, the
kernels view, a generation. torch.compile is replaced here by a stand-in that counts its calls (a real compile takes
tens of seconds on this box; `compare --b compile=default` runs one)."""

from __future__ import annotations

import pytest
import torch

from torchperf_tui.core.errors import FlagError, TorchperfError
from torchperf_tui.engine.measurements.ab_arms import parse_arm_spec, same_arms
from torchperf_tui.engine.measurements.abtest import run_ab
from torchperf_tui.engine.measurements.bench_config import BenchConfig

TINY = "tests.tinymodels:tiny_cnn"


def stand_in_compile(monkeypatch) -> dict:
    """torch.compile as a wrapper that counts the calls of the model it was given: 'compiles' its modes asked."""
    seen = {"modes": [], "calls": 0}

    def compile(model, mode=None, **kwargs):
        if not isinstance(model, torch.nn.Module):  # the compiler made ready on a throwaway function first
            return model
        seen["modes"].append(mode)

        def compiled(*args, **kw):
            seen["calls"] += 1
            return model(*args, **kw)
        return compiled

    monkeypatch.setattr(torch, "compile", compile)
    return seen


def test_a_compiled_arm_compiles_before_its_blocks_runs_compiled_in_them_and_says_its_break_even(monkeypatch):
    seen = stand_in_compile(monkeypatch)
    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu", compile="max-autotune")
    result = run_ab(cfg, parse_arm_spec(""), parse_arm_spec("compile=default"), blocks=6, per_block=3)
    assert seen["modes"] == ["default"]  # B's mode, once; the base's own compile is not A's
    # B's calls: the compile's first call, then each block's discarded and warm-up passes and its 3 timed ones
    assert seen["calls"] == 1 + 6 * (2 + 3)
    assert result.a.compile_s is None and result.b.compile_s > 0 and result.b.compile_error is None
    assert (result.a.config.compile, result.b.config.compile) == (None, "default")
    note, = [n for n in result.notes if n.startswith("arm B compiled")]
    assert note.startswith(f"arm B compiled (default) in {result.b.compile_s:.1f} s before its blocks, not timed in "
                           "them; at the two arms' medians it ")
    assert result.to_dict()["b"]["compile"] == "default" and result.to_dict()["a"]["compile"] is None


def test_a_compile_that_fails_leaves_its_arm_eager_and_says_why(monkeypatch):
    def broken(model, **kwargs):
        def run(*args, **kw):
            raise RuntimeError("no working C++ compiler found")
        return run

    monkeypatch.setattr(torch, "compile", broken)
    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu")
    result = run_ab(cfg, parse_arm_spec(""), parse_arm_spec("compile=default"), blocks=6, per_block=2)
    assert result.b.compile_s is None and "no working C++ compiler found" in result.b.compile_error
    assert any(n.startswith("arm B ran eager: torch.compile(mode='default') failed") for n in result.notes)
    assert result.verdict is not None  # its blocks ran, eager


def test_compiled_arms_are_refused_where_they_cannot_be_measured_like_for_like(monkeypatch):
    seen = stand_in_compile(monkeypatch)
    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu")
    with pytest.raises(TorchperfError, match="an A/B compiles one arm at most"):
        run_ab(cfg, parse_arm_spec("compile=default"), parse_arm_spec("compile=max-autotune"), blocks=6)
    with pytest.raises(TorchperfError, match=r"arm B compiles: give it fixed shapes \(shapes=cycle:2 would"):
        run_ab(cfg, parse_arm_spec(""), parse_arm_spec("compile=default,shapes=cycle:2"), blocks=6)
    from torchperf_tui.engine.analysis.kernels import conv_kernels

    with pytest.raises(TorchperfError, match="--kernels profiles each layer's own kernels, eager"):
        conv_kernels(cfg, parse_arm_spec(""), parse_arm_spec("compile=default"))
    from torchperf_tui.engine.measurements.generation_ab import check_arm

    with pytest.raises(TorchperfError, match="compile= in 'compile=default': a generation A/B compares"):
        check_arm(parse_arm_spec("compile=default"))
    assert seen["modes"] == []  # refused before anything compiled
    with pytest.raises(FlagError, match="unknown compile mode 'fast'"):
        parse_arm_spec("compile=fast")


def test_eager_against_a_compiled_base_is_an_arm_of_its_own_and_compile_makes_arms_differ():
    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu")
    assert parse_arm_spec("compile=eager").run_of(BenchConfig(model=TINY, compile="default")).compile is None
    assert not same_arms(cfg, parse_arm_spec(""), parse_arm_spec("compile=default"))
    assert same_arms(cfg, parse_arm_spec(""), parse_arm_spec("compile=eager"))
