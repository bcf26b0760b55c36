"""What the user chose, frozen: the model, its input, the device, the flags and the run options, as one
value built on the UI thread from the sidebar's fields and turned into the engine's BenchConfig (the CLI builds
its BenchConfig from its arguments: cli/common.bench_config).

A job gets the config made from the selection at the moment it was asked for, so an option changed while it
runs cannot change what it measures, and its history record says what was measured. No torch: the modules
used here load without it (engine/hardware/lazy_torch.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torchperf_tui.core.formatting import format_shape
from torchperf_tui.core.run_option_table import run_option
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.flags import Flags
from torchperf_tui.engine.workloads.inputs import check_dims, parse_batch, parse_dims, parse_seq_len
from torchperf_tui.engine.workloads.model_args import parse_model_args


@dataclass(frozen=True)
class Selection:
    """`shape` is the input without the batch as typed ('3x224x224'), or '' for the model's default;
    `batch` as typed. `flags` is an engine.measurements.flags.Flags; `compile` 'eager' or a torch.compile mode."""

    model: str
    shape: str = ""
    batch: str = "1"
    dtype: str = "float32"
    channels_last: bool = False
    device: str = "auto"
    flags: Any = None
    shapes: str = "fixed"
    compile: str = "eager"
    warmup: int | str = 10
    iters: int = 64  # engine.measurements.bench_config.DEFAULT_ITERS (the engine is not imported before a job needs it)
    seed: int = 0  # of the input values and of a random shape schedule
    step: str = "infer"  # "infer" or "train" (forward, loss, backward, optimizer step)
    optimizer: str = "sgd"  # a training step's
    amp: str | None = None  # mixed precision: None, "fp16" or "bf16"
    model_args: str = ""  # the model's overrides as typed: 'KEY=VALUE,...' (engine/workloads/model_args.py)
    seq_len: str = ""  # a token model's sequence length as typed ('' for its default)
    quant: str | None = None  # a quantization scheme (engine/workloads/quantization.py), None: none
    attn: str | None = None  # a transformers model's attention implementation, None: the one it picks

    def batch_size(self) -> int:
        return check_dims((parse_batch(self.batch),))[0]

    def full_shape(self) -> tuple[int, ...] | None:
        """(batch, *dims) as typed, or None when no shape is typed (the model's default applies). Each field's
        error quotes that field as typed (not the two glued together)."""
        if not self.shape:
            return None
        return check_dims((self.batch_size(), *parse_dims(self.shape)))

    def config(self, flags: Any = None):
        """The engine's BenchConfig (with `flags` instead of the selection's, for an arm of an A/B). Raises
        the engine's one-line errors for a bad shape or batch."""
        return BenchConfig(model=self.model, input_shape=self.full_shape(), batch=self.batch_size(),
                           device=self.device, dtype=self.dtype, channels_last=self.channels_last,
                           warmup=self.warmup, iters=self.iters,
                           flags=flags if flags is not None else (self.flags or Flags()), shapes=self.shapes,
                           compile=run_option("compile").run_value(self.compile), seed=self.seed,
                           step=self.step, optimizer=self.optimizer, amp=self.amp,
                           model_args=self.parsed_model_args(), seq_len=self.sequence_length(), quant=self.quant,
                           attn=self.attn)

    def parsed_model_args(self) -> tuple:
        return parse_model_args(self.model_args)

    def sequence_length(self) -> int | None:
        """The typed sequence length, checked (a whole number of at least 1), or None for the model's default."""
        return parse_seq_len(self.seq_len) if str(self.seq_len).strip() else None

    def step_text(self) -> str:
        """'infer', 'train (sgd)', 'train (adamw) · amp bf16': what an iteration does, as run lines say it."""
        text = f"train ({self.optimizer})" if self.step == "train" else "infer"
        return text + (f" · amp {self.amp}" if self.amp else "")

    def analysis_params(self) -> dict:
        """The measurement process's "analyse" job, as the CLI's flops sends it: the model at the typed input (with the
        batch; None: its default at the batch)."""
        shape = self.full_shape()
        return {"model": self.model, "batch": self.batch_size(), "input_shape": tuple(shape) if shape else None,
                "dtype": self.dtype, "step": self.step, "model_args": self.parsed_model_args(),
                "seq_len": self.sequence_length()}

    def input_text(self, default_shape: tuple | None = None) -> str:
        """'1x3x224x224' for lines that say what a job is doing: the typed shape, else the model's default
        (as its analysis found it), else words; after the model's overrides, when it has any ('(n_layer=2) 1x128')."""
        overrides = f"({self.model_args.strip()}) " if self.model_args.strip() else ""
        return overrides + self.shape_text(default_shape)

    def shape_text(self, default_shape: tuple | None = None) -> str:
        """input_text without the model's overrides: '1x128', for a line the sidebar's args stand beside."""
        try:
            shape = self.full_shape()
            batch = self.batch_size()
        except Exception:
            return f"input {self.batch}x{self.shape or '(default)'}"
        if shape is None and default_shape:
            shape = (batch, *tuple(default_shape)[1:])
        if shape is not None:
            return format_shape(shape)
        return f"its default input, batch {batch}"
