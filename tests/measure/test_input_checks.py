"""What the user types about the input, checked where it is typed: each field's error quotes that field (the
app's shape field has no batch), and an input too large for the memory free is refused in one line before the
allocator is asked."""

from __future__ import annotations

import pytest

from torchperf_tui.core.errors import InputTooLarge, ShapeError
from torchperf_tui.measure.selection import Selection

TINY = "tests.tinymodels:tiny_cnn"


@pytest.mark.parametrize(("shape", "batch", "words", "not_words"), [
    ("3x-5x224", "1", ["input '3x-5x224'", "dimension 2 is -5"], ["1x3x-5x224"]),
    ("abc", "1", ["input 'abc'", "3x224x224", "own field"], ["1xabc", "1x3x224x224"]),
    ("3x224x224", "0", ["batch 0", "at least 1"], ["0x3x224x224"]),
    ("3x224x224", "abc", ["batch 'abc'", "whole number"], ["abcx3"]),
])
def test_each_field_error_quotes_that_field_as_typed(shape, batch, words, not_words):
    with pytest.raises(ShapeError) as caught:
        Selection(model=TINY, shape=shape, batch=batch).config()
    message = str(caught.value)
    for word in words:
        assert word in message
    for word in not_words:
        assert word not in message


def test_the_cli_keeps_its_own_shape_messages(capsys):
    from torchperf_tui.entry import main

    assert main(["bench", TINY, "--input", "1x3x-5x16", "--no-history"]) == 2
    err = capsys.readouterr().err
    assert "1x3x-5x16" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_an_input_larger_than_the_free_memory_is_refused_with_both_sizes(monkeypatch):
    import torch

    from torchperf_tui.engine.workloads import inputs

    monkeypatch.setattr(inputs, "free_bytes", lambda device: 1024**3)  # 1 GiB free
    assert inputs.make_input((100, 3, 224, 224)).shape[0] == 100  # 57 MiB: made
    # 4000x3x224x224 float32 is 2.2 GiB: over the 1 GiB free
    with pytest.raises(InputTooLarge) as caught:
        inputs.make_input((4000, 3, 224, 224), dtype=torch.float32)
    message = str(caught.value)
    assert "4000x3x224x224 float32 needs 2.2 GiB" in message and "1.0 GiB free" in message
    assert "lower the batch" in message
    # It is a MemoryError too: the throughput search counts such a batch as one that does not fit.
    assert isinstance(caught.value, MemoryError)


def test_an_input_that_fits_is_made_as_before(monkeypatch):
    import torch

    from torchperf_tui.engine.workloads import inputs

    monkeypatch.setattr(inputs, "free_bytes", lambda device: None)  # unknown: the allocator decides
    assert inputs.make_input((2, 3, 8, 8), dtype=torch.float16).dtype == torch.float16


def test_a_huge_batch_in_the_cli_is_one_line_not_the_allocator(capsys):
    from torchperf_tui.entry import main

    # 1e11 elements: far over any free RAM here, under the shape bound (2**40 elements).
    assert main(["bench", TINY, "--input", "100000000x3x16x64", "--iters", "1", "--warmup", "0",
                 "--no-history"]) == 2
    err = capsys.readouterr().err.strip()
    assert "needs" in err and "free: lower the batch" in err and len(err.splitlines()) == 1
    assert "DefaultCPUAllocator" not in err


def test_float16_on_the_cpu_is_noted_in_the_cli(capsys):
    from torchperf_tui.entry import main

    assert main(["bench", TINY, "--input", "1x3x8x8", "--dtype", "float16", "--device", "cpu", "--iters", "2",
                 "--warmup", "0", "--no-history"]) == 0
    err = capsys.readouterr().err
    assert "note: float16 on the CPU" in err and "bfloat16" in err
