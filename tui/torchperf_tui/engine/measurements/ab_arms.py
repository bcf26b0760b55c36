"""The arms of an A/B comparison: the SPEC a user types ('threads=2,cudnn_benchmark=on', 'dtype=fp16,step=train',
'sdpa=flash+math,matmul_precision=high')
parsed into backend flags and run settings, and whether two arms would run the same thing.

Needs no torch: the CLI's process parses the SPECs before it sends the job, and the app says the refusal of two
identical arms itself.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from torchperf_tui.core.errors import FlagError, TorchperfError
from torchperf_tui.core.flag_table import flag_entry, spec_keys
from torchperf_tui.core.run_option_table import ARM_KEYS, run_option
from torchperf_tui.engine.measurements.flags import Flags, pristine_state
from torchperf_tui.engine.measurements.train_step import check_amp, check_optimizer, check_step, StepSpec
from torchperf_tui.engine.workloads.inputs import canonical_dtype

# SPEC keys: the flag table's (core/flag_table.py: each flag's keys; aliases set the same flags, 'tf32' both TF32
# flags) -> the Flags field(s) each sets; the run options an arm may set apart (core/run_option_table.ARM_KEYS).
_BOOL_WORDS = {"1": True, "true": True, "on": True, "yes": True, "0": False, "false": False, "off": False,
               "no": False}
FLAG_KEYS: dict[str, tuple[str, ...]] = spec_keys()


@dataclass(frozen=True)
class ArmSpec:
    """One arm: backend flags, and run settings that differ from the base run (None: as the base)."""

    flags: Flags
    dtype: str | None = None
    channels_last: bool | None = None
    shapes: str | None = None  # an input-shape schedule (engine/workloads/shapes.py), e.g. "random:192-288"
    text: str = ""
    step: str | None = None  # "infer" or "train"
    optimizer: str | None = None  # a training step's: "sgd" or "adamw"
    amp: str | None = None  # "fp16", "bf16", or "off" (mixed precision off where the base has it on)
    compile: str | None = None  # a torch.compile mode, or "eager" (not compiled where the base is)
    quant: str | None = None  # a quantization scheme, or "off" (none where the base quantizes)
    attn: str | None = None  # a transformers model's attention implementation ("default": the one it picks)
    cache: str | None = None  # a generation's KV cache: "dynamic" or "static"

    def run_of(self, base, **resolved):
        """The run this arm is: `base` (a BenchConfig) with `resolved` (what the comparison resolved of it: its
        device, shape and dtype), then the arm's flags and each run option the arm sets."""
        step = self.step_spec(base)
        run = {**resolved, "flags": self.flags, "shapes": self.shapes or base.shapes, "step": step.step,
               "optimizer": step.optimizer, "amp": step.amp}
        if self.dtype is not None:
            run["dtype"] = self.dtype
        if self.channels_last is not None:
            run["channels_last"] = self.channels_last
        if self.compile is not None:
            run["compile"] = run_option("compile").run_value(self.compile)
        if self.quant is not None:
            run["quant"] = None if self.quant == "off" else self.quant
        if self.attn is not None:
            run["attn"] = None if self.attn == "default" else self.attn
        if self.cache is not None:
            run["cache"] = self.cache
        return dataclasses.replace(base, **run)

    def step_spec(self, base):
        """This arm's StepSpec: its own step, optimizer and mixed precision where it sets them, else the base's."""
        base_step = base.step_spec()
        amp = base_step.amp if self.amp is None else (None if self.amp == "off" else self.amp)
        return StepSpec(step=self.step or base_step.step, optimizer=self.optimizer or base_step.optimizer, amp=amp)


def _parse_bool(key: str, value: str) -> bool:
    try:
        return _BOOL_WORDS[value.strip().lower()]
    except KeyError:
        raise FlagError(f"{key}={value!r}: expected on/off, true/false or 1/0") from None


def parse_arm_spec(text: str, base: Flags | None = None) -> ArmSpec:
    """'threads=2,cudnn_benchmark=on' -> ArmSpec. An empty spec is the base run unchanged. Needs no torch (the
    CLI's process parses the SPECs before it sends the job): a dtype is checked and named by its text."""
    flags = base or Flags()
    settings: dict[str, object] = {}  # the run options the arm sets (ARM_KEYS), by name
    given: dict[str, str] = {}  # what a key sets (aliases set the same thing) -> the key as typed
    parts = [p.strip() for p in text.split(",")] if text.strip() else []
    if "" in parts:  # 'cudnn_benchmark=on,,tf32=on': a setting lost between two commas, not nothing
        raise FlagError(f"{text!r} has an empty item (a comma too many): write key=value,key=value, "
                        "e.g. threads=2,mkldnn=off")
    for part in parts:
        key, sep, value = part.partition("=")
        key = key.strip().lower().replace("-", "_")
        if not sep or not value.strip():
            raise FlagError(f"{part!r} in {text!r}: write key=value, e.g. threads=2")
        for target in FLAG_KEYS.get(key, (key,)):
            if target in given:  # 'mkldnn=on,mkldnn=off': which one would the arm mean?
                same = "given twice" if given[target] == key else f"set by both {given[target]} and {key}"
                raise FlagError(f"{key} {same} in {text!r}: give each setting once per arm")
            given[target] = key
        if key in FLAG_KEYS:
            targets = FLAG_KEYS[key]
            entry = flag_entry(targets[0])  # the flags a key sets are of one kind
            # a bad value is one line: 'sdpa: unknown backend ...', 'threads: must be at least 1 ...'
            setting = _parse_bool(key, value) if entry.kind is bool else entry.parse(value.strip())
            flags = flags.replace(**{target: setting for target in targets})
        elif key in ARM_KEYS:
            try:
                settings[key] = _arm_value(key, value)
            except FlagError:
                raise
            except TorchperfError as exc:
                raise FlagError(f"{part!r} in {text!r}: {exc}") from None
        else:
            known = ", ".join([*FLAG_KEYS, *ARM_KEYS])
            raise FlagError(f"unknown key {key!r} in {text!r}: known keys are {known}")
    return ArmSpec(flags=flags, text=text.strip() or "base", **settings)


def _arm_value(key: str, value: str):
    """The value of run option `key` (one of ARM_KEYS) as an arm's SPEC gives it, checked as the CLI checks it."""
    if key == "dtype":
        return canonical_dtype(value)  # 'fp16' -> 'float16', the name torch gives the dtype
    if key == "channels_last":
        return _parse_bool(key, value)
    if key == "shapes":
        # numpy: the app loads this module's results without it
        from torchperf_tui.engine.workloads.shapes import parse_schedule
        return parse_schedule(value).describe()
    word = value.strip().lower()
    if key == "quant":
        return word if word == "off" else run_option("quant").choose(word)
    if key == "attn":
        return word if word == "default" else run_option("attn").choose(word)
    if key == "cache":
        return run_option("cache").choose(word)
    if key == "compile":
        return word if word == "eager" else run_option("compile").choose(word)
    if key == "amp":
        return word if word == "off" else check_amp(word)
    return {"step": check_step, "optimizer": check_optimizer}[key](word)


def same_arms(base, a: ArmSpec, b: ArmSpec, default_threads: int | None = None) -> bool:
    """Whether arms `a` and `b` of `base` (a bench_config.BenchConfig) would run the same thing: an A/A comparison.
    Compared as they resolve: the flags as torch holds them once applied (Flags.effective), and with
    `default_threads` (the measurement process's own count) an arm's empty thread count as that count, so that
    threads=2 against '' on a box whose default is 2 is the same set-up twice."""
    def effective(arm: ArmSpec):
        flags = arm.flags.effective()
        if flags.num_threads is None and default_threads is not None:
            flags = dataclasses.replace(flags, num_threads=default_threads)
        return (flags, arm.dtype or base.dtype,
                base.channels_last if arm.channels_last is None else arm.channels_last,
                arm.shapes or base.shapes, arm.step_spec(base), arm.run_of(base).quant,
                arm.run_of(base).attn, arm.run_of(base).cache, arm.run_of(base).compile)

    return effective(a) == effective(b)


def refuse_same_arms(base, a: ArmSpec, b: ArmSpec, remedy: str) -> None:
    """TorchperfError (same_arms_refusal) when the arms resolve to the same set-up in this process, the measurement
    process (it reads torch's own thread count: `pristine_state`): arms that differ only in text (threads=2 against
    '' where 2 is the default) are refused there as identical arms are where they are typed."""
    default = pristine_state().flags.num_threads
    if same_arms(base, a, b, default_threads=default):
        why = "" if same_arms(base, a, b) else f"threads left empty runs this machine's default, {default}"
        raise TorchperfError(same_arms_refusal(remedy, why))


# What to do instead of comparing two identical arms: in the CLI (compare), and in the app (a flip's A/B).
AA_REMEDY = "--aa runs an A/A check of the noise on purpose"
FLIP_REMEDY = "flip a flag first: A/B compares the flags before the flip with the current ones"


def same_arms_refusal(remedy: str, flags_text: str = "") -> str:
    """The one sentence that refuses two identical arms, in the CLI and the app alike: `flags_text` the arms'
    flags where the reader has not typed them, `remedy` what to do instead where the refusal is met."""
    flags = f" ({flags_text})" if flags_text else ""
    return f"arms A and B are the same flags{flags}: nothing to compare; {remedy}"
