"""A model's complexity (engine.workloads.complexity_result.Complexity) in words: the CLI's rows and per-layer table
of `flops`, and the figures the layers pane says too (the counts, a training step's backward against the forward, each
layer's counts)."""

from __future__ import annotations

from types import SimpleNamespace

from torchperf_tui.core.formatting import format_bytes, format_count, format_flops, format_shape
from torchperf_tui.wording import random_weights, RANDOM_WEIGHTS, Row, row, subject


def counts_backward(cx) -> bool:
    """Whether a training step was counted: the backward's FLOPs beside the forward's."""
    return getattr(cx, "backward_flops", None) is not None


def step_ratio(cx) -> str | None:
    """A training step's FLOPs against its forward's ('2.99x'); None where no backward was counted (or the forward
    counts nothing)."""
    return f"{cx.step_flops / cx.flops:.2f}x" if counts_backward(cx) and cx.flops else None


def attention_text(cx) -> str | None:
    """What the count of a model's scaled_dot_product_attention means, in one line; None where none ran. The count
    is the full S×S scores (SDPA's math kernel, the one counted); a flash kernel skips a causal call's masked half."""
    attention = getattr(cx, "attention", None)
    if attention is None:
        return None
    calls = f"{attention.calls} call{'s' if attention.calls != 1 else ''}"
    passes = "forward and backward" if counts_backward(cx) else "forward"
    text = f"SDPA {format_flops(attention.flops)} in {calls}: {passes} counted as the full S×S"
    if attention.causal_calls:
        return text + " (causal: flash computes about half)"
    if attention.masked_calls:
        return text + " (with a mask: counted as if nothing is masked)"
    return text


def complexity_title(cx) -> str:
    """'resnet18 at 1x3x224x224 (float32)'; a model with overrides or inputs other than one float tensor in the words
    every heading uses (wording.subject)."""
    if getattr(cx, "inputs", "") or getattr(cx, "model_args", ""):
        return subject(SimpleNamespace(model=cx.model, device="the meta device", input_shape=cx.input_shape, dtype=cx.dtype,
                                       model_args=cx.model_args, seq_len=cx.seq_len, inputs=cx.inputs))
    title = f"{cx.model} at {format_shape(cx.input_shape)} ({cx.dtype})"
    return title + (f"; {RANDOM_WEIGHTS}" if random_weights(cx.model) else "")


def complexity_rows(cx) -> list[Row]:
    """`flops`: parameters, size, FLOPs and MACs, of a training step its backward against the forward, and what the
    count of attention (SDPA) means."""
    ratio = step_ratio(cx)
    attention = attention_text(cx)
    return [row("parameters", f"{format_count(cx.params_total)} ({cx.params_total:,}), "
                              f"trainable {format_count(cx.params_trainable)}"),
            row("size", format_bytes(cx.size_bytes)),
            row("FLOPs", f"{format_flops(cx.flops)} ({cx.flops:,})"),
            row("MACs", f"{format_count(cx.macs, 'MACs')} ({cx.macs:,})"),
            *([row("training step", f"forward {format_flops(cx.flops)} + backward {format_flops(cx.backward_flops)} = "
                                    f"{format_flops(cx.step_flops)} ({ratio} the forward; the optimizer's update not "
                                    "counted)")] if ratio else []),
            *([row("attention", attention)] if attention else [])]


def layer_figures(layer, training: bool) -> dict[str, str]:
    """A layer's counts by the CLI's column: params, FLOPs, of a training step its backward's, the output's bytes."""
    return {"params": format_count(layer.params), "FLOPs": format_count(layer.flops),
            **({"bwd FLOPs": format_count(layer.backward_flops or 0)} if training else {}),
            "output bytes": format_bytes(layer.output_bytes)}


def layer_cells(cx) -> list[tuple[str, ...]]:
    """The CLI's per-layer table: (layer, type, input, output, params, FLOPs[, bwd FLOPs], output bytes)."""
    training = counts_backward(cx)
    return [(layer.name, layer.type, format_shape(layer.input_shape), format_shape(layer.output_shape),
             *layer_figures(layer, training).values()) for layer in cx.layers]


def shape_text(shape) -> str:
    if shape is None:
        return "–"
    if isinstance(shape, (list, tuple)) and shape and isinstance(shape[0], (list, tuple)):
        return ", ".join(shape_text(s) for s in shape)
    if isinstance(shape, (list, tuple)):
        return format_shape(shape)
    return str(shape)


def complexity_summary(cx) -> str:
    """One line: parameters, size, FLOPs and MACs of a Complexity (of a training step: its backward too), and its
    input; a factory's example_inputs each by name, shape and dtype."""
    ratio = step_ratio(cx)
    step = f" + backward {format_flops(cx.backward_flops)} (training step {ratio})" if ratio else ""
    fed = cx.inputs if getattr(cx, "example_inputs", False) else f"input {shape_text(cx.input_shape)} {cx.dtype}"
    return (f"{format_count(cx.params_total)} params · {format_bytes(cx.size_bytes)} · "
            f"{format_flops(cx.flops)} ({format_count(cx.macs, 'MACs')}){step} · {fed}")
