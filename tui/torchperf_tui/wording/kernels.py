"""The kernels each conv layer ran under A and under B (engine.analysis.kernels.KernelComparison) in words: the
CLI's heading and table of `compare --kernels`, and the facts the kernels pane says too (what was profiled, how many
layers changed, a layer's time, what it ran: a list for the CLI, its longest kernel for the pane)."""

from __future__ import annotations

from torchperf_tui.wording import subject


def what_ran(result) -> str:
    """'GPU kernels', or on the CPU 'ATen conv implementation'."""
    return "GPU kernels" if result.kind == "cuda-kernel" else "ATen conv implementation"


def changed_text(result) -> str:
    """'3 of 20 conv layers changed what they ran'."""
    return f"{len(result.changed_layers)} of {len(result.layers)} conv layers changed what they ran"


def us_text(us: float) -> str:
    """A time per iteration in µs: '1,234'."""
    return f"{us:,.0f}"


def shows_step(result) -> bool:
    """Whether the step is said: a training step, or under autocast (plain inference goes without saying)."""
    return bool(result.training or getattr(result, "amp", None))


def ran_text(kernels, names: dict[str, str], compact: bool = False) -> str:
    """What a layer ran (each kernel by its short name in `names`): the CLI's up to three with their µs, one a line
    (one alone: its time is the layer's); `compact`: the pane's longest kernel and how many more ran."""
    if not kernels:
        return "–" if compact else "(nothing recorded)"
    if compact:
        return names[kernels[0].name] + (f" +{len(kernels) - 1}" if len(kernels) > 1 else "")
    if len(kernels) == 1:
        return names[kernels[0].name]
    return "\n".join(f"{names[k.name]} {us_text(k.us_per_iter)} us" for k in kernels[:3]) + (
        f"\n+{len(kernels) - 3} more" if len(kernels) > 3 else "")


def kernels_title(result) -> str:
    """The CLI's heading: the model, input and step, what was profiled, per conv layer (and pass)."""
    step = f", each iteration {result.step}" if shows_step(result) else ""
    return (f"{subject(result, dtype=False)}{step}: {what_ran(result)} "
            f"per conv layer{' and pass' if result.training else ''}, per iteration ({result.iters} profiled)")


def layer_rows(result, width: int):
    """(the layer, its name on its first row else '', the pass, its part, the kernels' short names in `width`): a
    row per conv layer, per pass (fwd, dgrad, wgrad, bwd) of a training step's."""
    from torchperf_tui.engine.analysis.kernels import short_kernel_names  # text only: torch stays unimported

    for layer in result.layers:
        for index, (phase, part) in enumerate(layer.phases() if result.training else [("", layer)]):
            names = short_kernel_names([k.name for k in [*part.a, *part.b]], width)
            yield layer, layer.layer if index == 0 else "", phase, part, names


def kernel_cells(result) -> list[tuple[str, ...]]:
    """The CLI's table: (layer, [pass,] what A ran, what B ran or 'same', A us, B us, 'changed' or '')."""
    return [(name, *([phase] if result.training else []), ran_text(part.a, names),
             ran_text(part.b, names) if part.changed else "same", us_text(part.a_us), us_text(part.b_us),
             "changed" if part.changed else "")
            for _, name, phase, part, names in layer_rows(result, 36)]
