"""How each result reads to a person: the facts of a timing run, its run conditions, the timing modes, the roofline,
a batch search, an A/B comparison, the device, a profile, the kernels per layer, a model's complexity and the measured
ceilings as rows (label, value, level) or sentences, said once for the CLI and the app. The CLI lays the rows into Rich
tables (cli/render.py); the panes put them into their widgets, the level as a colour.

No torch and no Textual here: the app words its results before the engine is loaded, and the CLI has no app.
"""

from __future__ import annotations

from torchperf_tui.core.formatting import format_shape

NORMAL = ""  # a fact
WARNING = "warning"  # a fact that says the numbers may not be the model's alone (the warning colour in the app)

Row = tuple  # (label, value, level): value a str, level NORMAL or WARNING


def row(label: str, value, level: str = NORMAL) -> Row:
    return (label, value, level)


def plain(text) -> str:
    """A figure as it is: the CLI's way of stressing one (a wording's `strong`; its `escape` too: no markup there)."""
    return str(text)


def bold(text) -> str:
    """A figure in bold Textual markup: the panes' way of stressing one (a wording's `strong`)."""
    return f"[b]{text}[/]"


def subject(result, dtype: bool = True) -> str:
    """'resnet18 on cpu, input 1x3x224x224 float32': what a result measured, where, on which input (with its dtype
    unless `dtype` is False); the CLI's headings start with it. A model with overrides names them; one fed more than
    one float tensor names each of its inputs; a timm or transformers model says its weights are random:
    'hf:gpt2 (n_layer=2) on cpu, float32, sequence length 128: input_ids 1x128 int64 (ids < 50257), ...; random
    weights'."""
    model = model_label(result.model, getattr(result, "model_args", ""))
    inputs = getattr(result, "inputs", "")
    if not inputs:
        text = f"{model} on {result.device}, input {format_shape(result.input_shape)}" + (f" {result.dtype}" if dtype else "")
    else:
        seq_len = getattr(result, "seq_len", None)
        text = (f"{model} on {result.device}" + (f", {result.dtype}" if dtype else "")
                + (f", sequence length {seq_len}" if seq_len else "") + f": {inputs}")
    return text + (f"; {RANDOM_WEIGHTS}" if random_weights(result.model) else "")


RANDOM_WEIGHTS = "random weights (nothing downloaded)"


def model_label(model, model_args: str = "") -> str:
    """'hf:gpt2 (n_layer=2,n_embd=64)': a model with its overrides as typed (round brackets: square ones are markup
    to Rich and Textual)."""
    return f"{model} ({model_args})" if model_args else str(model)


def random_weights(model) -> bool:
    """A timm or transformers model, built from its config with random weights, which its result says (torchvision's
    are random too, and said in its catalogue: weights=None)."""
    return isinstance(model, str) and model.strip().lower().startswith(("hf:", "timm:"))
