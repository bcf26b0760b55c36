"""What to time (`BenchConfig`), and the one preamble every runner starts from (`BenchConfig.prepare`).

`prepare` turns what was asked into what a runner needs, checked once and in one order: the device, the
dtype, the step, the mixed-precision check, then the inputs (`RunPlan`). Needs no torch to import: the
app's UI process builds configs; `prepare` imports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Callable, Iterable

from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.measurements.flags import Flags
from torchperf_tui.engine.workloads.input_facts import input_facts
from torchperf_tui.engine.workloads.input_spec import InputSpec
from torchperf_tui.engine.hardware.device_choice import resolve_device
from torchperf_tui.engine.measurements.train_step import StepSpec, amp_problem
from torchperf_tui.engine.workloads.inputs import canonical_dtype, check_dims, parse_dtype
from torchperf_tui.engine.workloads.quantization import quant_problem
from torchperf_tui.engine.workloads.attention_impl import attn_problem

if TYPE_CHECKING:
    import torch

# The default run: enough timed iterations that p90's 95 % interval lies inside the sample (it needs 54; see
# stats.PercentileInterval), within a time budget so a slow model does not take minutes.
DEFAULT_ITERS = 64
DEFAULT_TIME_BUDGET_S = 60.0

# A runner's own check, given the device and step once they are known (see `BenchConfig.prepare`).
Check = Callable[["torch.device", "StepSpec"], None]


@dataclass(frozen=True)
class RunPlan:
    """What a runner needs, checked: the device, the dtype, the step, and the inputs to make."""

    device: "torch.device"
    dtype: "torch.dtype"
    step: "StepSpec"
    inputs: InputSpec

    @property
    def shape(self) -> tuple[int, ...]:
        return self.inputs.shape


def check_amp(step: "StepSpec", device: "torch.device", dtype: "torch.dtype") -> None:
    """TorchperfError when `step`'s mixed precision cannot run on `device` with a model in `dtype`."""
    problem = amp_problem(step.amp, device, dtype)
    if problem:
        raise TorchperfError(problem)


@dataclass(frozen=True)
class BenchConfig:
    """What to time. `input_shape` includes the batch; when None the catalogue's default is used with `batch`.
    `warmup` is an iteration count, or "auto" to warm up until the latency is stable."""

    model: Any  # a catalogue name or "module:factory" (a determinism check also takes a built module)
    input_shape: tuple[int, ...] | None = None
    batch: int | None = None
    device: str = "auto"
    dtype: str = "float32"
    channels_last: bool = False
    warmup: int | str = 10
    iters: int = DEFAULT_ITERS
    flags: Flags = field(default_factory=Flags)
    compile: str | None = None  # None: eager; else a torch.compile mode, see timing.COMPILE_MODES
    shapes: str = "fixed"  # the timed iterations' input-shape schedule, see engine/workloads/shapes.py
    seed: int = 0  # of the input values and of a random shape schedule
    step: str = "infer"  # "infer" (a forward pass) or "train" (forward, loss, backward, optimizer step)
    optimizer: str = "sgd"  # of a training step: "sgd" (momentum 0.9) or "adamw"
    amp: str | None = None  # mixed precision: None, "fp16" or "bf16" (torch.autocast; not a cast of the model)
    # The timed iterations stop once they have taken this long (None: no budget); the result says so.
    time_budget_s: float | None = DEFAULT_TIME_BUDGET_S
    # The model's overrides: (key, value as typed) pairs, a transformers config's settings or a builder's keyword
    # arguments (engine/workloads/model_args.py).
    model_args: tuple[tuple[str, str], ...] = ()
    seq_len: int | None = None  # a token model's sequence length (None: its default)
    quant: str | None = None  # a quantization scheme of engine/workloads/quantization.py (None: none)
    attn: str | None = None  # a transformers model's attention implementation (None: the one transformers picks)
    cache: str = "dynamic"  # a generation's KV cache: "dynamic" or "static" (with a compiled decode step)

    def to_record(self) -> dict[str, Any]:
        """This config as a history record keeps it (JSON): each field under its name, the flags as Flags.to_dict,
        the input shape and the overrides as lists. engine/records/baseline.py's config_of_record reads it back."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["flags"] = self.flags.to_dict()
        data["input_shape"] = None if self.input_shape is None else list(self.input_shape)
        data["model_args"] = [list(pair) for pair in self.model_args]
        return data

    def prepare(self, *, before_amp: Check | None = None, before_inputs: Check | None = None,
                amp_for: Iterable[tuple["StepSpec", str]] | None = None, arms: Iterable[Any] | None = None,
                generates: bool = False) -> RunPlan:
        """The run's device, dtype, step and inputs, checked in this order: the device, the dtype, the step,
        `before_amp(device, step)` (a runner's own checks), the mixed-precision check, the SDPA backends,
        `before_inputs(device, step)`, then the input shape. `amp_for`: (step, dtype name) pairs to check mixed
        precision for instead of this config's own (the arms of an A/B, each with its own step and dtype); `arms`:
        the ArmSpecs whose flags run instead of this config's (their SDPA sets are checked, each at its arm's
        dtype, step and amp); `generates`: the run is a generation (the only one a KV cache's kind applies to)."""
        device = resolve_device(self.device)
        dtype = parse_dtype(self.dtype)
        step = self.step_spec()
        if before_amp is not None:
            before_amp(device, step)
        if amp_for is None:
            check_amp(step, device, dtype)
        else:
            for arm_step, arm_dtype in amp_for:
                check_amp(arm_step, device, parse_dtype(arm_dtype))
        self._check_attention(device, arms)
        self._check_model_options(device, arms, generates)
        if before_inputs is not None:
            before_inputs(device, step)
        return RunPlan(device=device, dtype=dtype, step=step, inputs=self.input_spec())

    def _check_attention(self, device, arms: Iterable[Any] | None) -> None:
        """An SDPA set that leaves the model's attention no backend on `device` is refused in one line here, before
        anything is built (engine/measurements/attention_calls.py), not a traceback from inside the forward. The
        default set allows every backend: nothing is checked or imported for it."""
        import dataclasses

        sets = [(self, self.flags)] if arms is None else [
            (dataclasses.replace(self, **{k: getattr(arm, k) for k in ("dtype", "step", "amp") if getattr(arm, k)}),
             arm.flags) for arm in arms]
        sets = [(cfg, flags) for cfg, flags in sets if flags.sdpa != "all"]
        if sets:
            # torch and numpy: the app loads this module's results without it
            from torchperf_tui.engine.measurements.attention_calls import check_attention_sets

            for cfg, flags in sets:
                check_attention_sets(cfg, [flags], device)

    def _check_model_options(self, device, arms: Iterable[Any] | None, generates: bool = False) -> None:
        """This run's model options (each arm's): a quantization scheme the box cannot run (its device, its dtype,
        torchao absent), or an attention implementation asked of a model that is not a transformers one or that
        this box cannot run (flash_attention_2 without its package or a GPU), is refused in one line here, before
        anything is built. An implementation the model's class does not support is refused by transformers as it
        builds (engine/workloads/hf_models.py). A static KV cache asked of a run that does not generate, likewise."""
        runs = [self] if arms is None else [arm.run_of(self) for arm in arms]
        for run in runs:
            if run.cache != "dynamic" and not generates:
                raise TorchperfError(f"cache {run.cache}: a KV cache is a generation's (--generate N); this run "
                                     "times passes over the whole input, with no cache to keep")
            for problem in (quant_problem(run.quant, device, canonical_dtype(run.dtype)),
                            attn_problem(run.attn, run.model, device)):
                if problem:
                    raise TorchperfError(problem)

    def model_key(self) -> tuple:
        """What makes this run's model its own, once built: its dtype, memory format, quantization scheme and
        attention implementation. Runs (an A/B's arms, a sweep's) with the same key can share one built model."""
        return (canonical_dtype(self.dtype), self.channels_last, self.quant, self.attn)

    def input_spec(self) -> InputSpec:
        """What the model is fed: its inputs at the typed shape, or at its default (engine/workloads/models.py)."""
        if not isinstance(self.model, str):  # a built module (a determinism check's): the typed shape alone
            return InputSpec(self.resolved_shape())
        # torch and numpy: the app loads this module's results without it
        from torchperf_tui.engine.workloads.models import input_spec_for

        return input_spec_for(self.model, batch=self._batch(), input_shape=self.input_shape, seq_len=self.seq_len,
                              model_args=self.model_args)

    def _batch(self) -> int:
        if self.batch is not None:
            return self.batch
        return self.input_shape[0] if self.input_shape is not None else 1

    def input_facts(self, inputs: InputSpec) -> dict:
        """The InputFacts of a result of this config fed `inputs`."""
        return input_facts(inputs, self.model_args, self.dtype)

    def step_spec(self) -> "StepSpec":
        return StepSpec(step=self.step, optimizer=self.optimizer, amp=self.amp)

    def resolved_shape(self) -> tuple[int, ...]:
        if self.input_shape is None:
            # torch and numpy: the app loads this module's results without it
            from torchperf_tui.engine.workloads.models import default_input_shape

            return check_dims(default_input_shape(self.model, batch=self.batch or 1, model_args=self.model_args))
        if self.batch is not None:
            return check_dims((self.batch, *self.input_shape[1:]))
        return check_dims(self.input_shape)
