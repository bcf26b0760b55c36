"""The run option table: each setting of how a run runs that is not a backend flag, described once.

A backend flag is an entry of core/flag_table.py; everything else a user sets about a run (the dtype, the memory
format, the input-shape schedule, what an iteration does, mixed precision, torch.compile, how many iterations, what a
flip in the app starts) is an entry here. An entry says its name (the field of a run's BenchConfig, and its key in
an A/B arm's SPEC where an arm may set it), the values it takes, its default, its help (the CLI's and the sidebar's
tooltip alike), its command-line option, and how the sidebar shows its values. The CLI's options
(cli/args.py), the SPEC keys an arm may set and their refusal (engine/measurements/ab_arms.py), the checks of the
step, optimizer, mixed precision and compile mode, and the sidebar's selects and counts
(app/widgets/flags/run_options.py) loop over it. How many iterations a command runs by default is that command's
own (64 timed passes for bench, 5 profiled ones for profile): the command says it, the table words the rest.

No torch: the CLI's process and the app's UI process read the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from torchperf_tui.core import options as checks
from torchperf_tui.core.errors import TorchperfError

# How an option takes its value: --x VALUE (one of `choices`, or checked where it is parsed); --x alone (on);
# --x or --x VALUE (alone: `const`); not on the command line (the app's alone).
VALUE, ON, OPTIONAL, APP = "value", "on", "optional", "app"


@dataclass(frozen=True)
class RunOption:
    """A run option: what it is, the values it takes, and how the CLI, an arm's SPEC and the sidebar name it."""

    name: str  # the run's field (BenchConfig), the SPEC key where `arm_key`, the sidebar's select id
    label: str  # the sidebar's
    help: str  # the CLI's help and the sidebar's tooltip; a command adds its own default where it has one
    choices: tuple[str, ...] = ()  # the values it takes (empty: any text its parser accepts)
    default: str | None = None  # the value when not given (None: off, for amp and compile)
    style: str = VALUE
    const: str | None = None  # OPTIONAL: the value of the option typed alone
    metavar: str | None = None
    arm_key: bool = False  # an A/B arm's SPEC may set it
    shown: tuple[tuple[str, str], ...] = ()  # the sidebar's select: (what it shows, the value); empty: its choices
    check: Callable[[str], object] | None = None  # a count's check (core/options.py), for the CLI and the sidebar
    noun: str = ""  # what a refusal calls it (default: its label)
    aliases: tuple[tuple[str, str], ...] = ()  # other names of its values: (alias, value)
    sidebar: bool = True  # the app's sidebar has a select for it (False: the command line's and a SPEC's alone)

    @property
    def option(self) -> str:
        """The command-line option: 'channels_last' -> '--channels-last' ('' for the app's own)."""
        return "" if self.style == APP else "--" + self.name.replace("_", "-")

    def choose(self, value: str) -> str:
        """`value` as the one of the choices it names (in any case, or by an alias: 'BF16' -> 'bfloat16'); else
        TorchperfError in one line naming them."""
        key = value.strip().lower()
        key = dict(self.aliases).get(key, key)
        if key not in self.choices:
            raise TorchperfError(f"unknown {self.noun or self.label} {value!r}: choose {self.choices_said()}")
        return key

    @property
    def initial(self) -> str | None:
        """The value a run takes when it is not given: its default, or where it has none (amp, compile) the
        sidebar's first value, which stands for none ('off', 'eager')."""
        return self.shown[0][1] if self.default is None and self.shown else self.default

    def run_value(self, text: str | None) -> str | None:
        """The value a run takes from `text` as the CLI, the sidebar or a record gives it: None (off) for none, ''
        or the sidebar's value that stands for none ('eager', 'off'); else `text` as it is."""
        if text is None or text == "" or (self.default is None and text == self.initial):
            return None
        return text

    def choices_said(self) -> str:
        """Its values as a sentence says them: 'default, reduce-overhead or max-autotune'."""
        *rest, last = self.choices
        return f"{', '.join(rest)} or {last}" if rest else last


RUN_OPTIONS: tuple[RunOption, ...] = (
    RunOption("dtype", "dtype", "the dtype of the model and its input: float32, float16 or bfloat16, the whole model "
              "cast (amp is mixed precision instead)", ("float32", "float16", "bfloat16"), "float32", arm_key=True,
              aliases=(("fp32", "float32"), ("f32", "float32"), ("fp16", "float16"), ("half", "float16"),
                       ("f16", "float16"), ("bf16", "bfloat16"))),
    RunOption("channels_last", "channels_last", "channels_last memory format for the model and its input",
              style=ON, arm_key=True),
    RunOption("shapes", "shapes", "input shapes of the timed iterations: fixed | cycle:K[:LO-HI] | "
              "random[:LO-HI[:batch=B1-B2]] (cudnn.benchmark re-tunes for every new shape; first-seen iterations "
              "are drawn apart)", default="fixed", metavar="SCHEDULE", arm_key=True,
              shown=(("fixed", "fixed"), ("cycle:4", "cycle:4"), ("random", "random"))),
    RunOption("step", "step", "what one timed iteration does: infer, a forward pass; or train: forward, loss, "
              "backward and the optimizer's step, gradients set to None between steps", ("infer", "train"),
              "infer", arm_key=True),
    RunOption("optimizer", "optimizer", "the training step's optimizer: sgd (momentum 0.9) or adamw",
              ("sgd", "adamw"), "sgd", arm_key=True),
    RunOption("amp", "mixed precision", "mixed precision: torch.autocast around forward and loss (a gradient scaler "
              "for fp16 training); not the dtype, which casts the whole model", ("fp16", "bf16"), arm_key=True,
              shown=(("no amp", "off"), ("amp bf16", "bf16"), ("amp fp16", "fp16"))),
    RunOption("compile", "graph", "torch.compile the model, in one of its modes: default, reduce-overhead (adds "
              "CUDA graphs on a GPU), max-autotune or max-autotune-no-cudagraphs; its cold start (an empty cache) and "
              "its warm start (a second process, the cache filled) are reported apart",
              ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"),
              style=OPTIONAL, const="default", metavar="MODE", noun="compile mode", arm_key=True,
              shown=(("eager", "eager"), ("compile", "default"), ("compile+graphs", "reduce-overhead"),
                     ("max-autotune", "max-autotune"), ("autotune-nocg", "max-autotune-no-cudagraphs"))),
    RunOption("quant", "quantization", "quantize the model's Linear layers with torchao (the [quant] extra): int8wo "
              "(int8 weights), int8dq (int8 weights and activations), int4wo (int4 weights, CUDA, bfloat16), fp8 "
              "(float8 weights and activations, compute capability 8.9+) or fp8wo (float8 weights); the run also "
              "says how far its outputs drift from the float32 model", ("int8wo", "int8dq", "int4wo", "fp8", "fp8wo"),
              arm_key=True, metavar="SCHEME", noun="quantization scheme",
              shown=(("no quant", "off"), ("int8wo", "int8wo"), ("int8dq", "int8dq"), ("int4wo", "int4wo"),
                     ("fp8", "fp8"), ("fp8wo", "fp8wo"))),
    RunOption("attn", "attention", "a transformers model's attention implementation (hf: only): eager (its own "
              "matmuls and softmax), sdpa (torch's scaled_dot_product_attention), flex_attention (torch's FlexAttention) "
              "or flash_attention_2 (the flash-attn package, CUDA); default: the one transformers picks",
              ("eager", "sdpa", "flex_attention", "flash_attention_2"), arm_key=True, metavar="IMPL",
              noun="attention implementation", aliases=(("flex", "flex_attention"), ("fa2", "flash_attention_2")),
              shown=(("attn default", "default"), ("attn eager", "eager"), ("attn sdpa", "sdpa"),
                     ("attn flex", "flex_attention"), ("attn fa2", "flash_attention_2"))),
    RunOption("cache", "KV cache", "a generation's KV cache: dynamic (transformers' DynamicCache, grown a position a "
              "step) or static (its StaticCache, allocated for the whole generation and read whole each step, with "
              "the decode step torch.compiled: the warm-up's first step compiles, said apart)", ("dynamic", "static"),
              "dynamic", arm_key=True, metavar="KIND", noun="KV cache", sidebar=False),
    RunOption("iters", "iters", "timed iterations of a run", check=checks.iters),
    RunOption("warmup", "warm-up", "untimed iterations before the timed ones, or 'auto': until the iteration time "
              "settles", check=checks.warmup),
    RunOption("flip", "on flip", "what flipping a flag starts: a new run, or the old flags against the new "
              "interleaved in blocks, with a significance verdict in Compare", ("run", "ab"), "run", style=APP,
              shown=(("new run", "run"), ("A/B", "ab"))),
)

_BY_NAME = {entry.name: entry for entry in RUN_OPTIONS}
# The SPEC keys of an arm's run options, in the table's order (the flags' keys come first, core/flag_table.py).
ARM_KEYS: tuple[str, ...] = tuple(entry.name for entry in RUN_OPTIONS if entry.arm_key)


def _faults() -> list[str]:
    """What an entry lacks for the CLI, a SPEC and the sidebar to take it, a line each."""
    faults = [f"{name}: two entries" for name in _BY_NAME if [e.name for e in RUN_OPTIONS].count(name) > 1]
    for entry in RUN_OPTIONS:
        if entry.style not in (VALUE, ON, OPTIONAL, APP):
            faults.append(f"{entry.name}: style is value, on, optional or app")
        if entry.style == OPTIONAL and entry.const not in entry.choices:
            faults.append(f"{entry.name}: typed alone, its option takes one of its choices")
        if entry.default is not None and entry.choices and entry.default not in entry.choices:
            faults.append(f"{entry.name}: its default is none of its choices")
        shown_values = [value for _, value in entry.shown]
        faults += [f"{entry.name}: the sidebar shows {value!r}, none of its choices" for value in shown_values
                   if entry.choices and value not in (*entry.choices, entry.initial)]
    return faults


if _faults():  # a new entry says everything its consumers need
    raise TypeError("the run option table: " + "; ".join(_faults()))


def run_option(name: str) -> RunOption:
    """The entry named `name` (KeyError for none: a caller's typo, not a user's)."""
    return _BY_NAME[name]


def with_default(name: str, default) -> str:
    """An entry's help with the default said after it: '... (default fixed)'."""
    return f"{run_option(name).help} (default {default})"
