"""Determinism check: run one input through the model several times under one set of flags and compare.

Answers "what does cudnn.deterministic (or deterministic algorithms) buy me here?": either every output is
bitwise identical across runs, or how far apart the runs are (max absolute and relative difference, and
how many elements differ). Outputs may be a tensor or any nesting of tuples, lists and dicts of tensors
(segmentation returns a dict, detection a list of dicts): every tensor leaf is compared.

"Bitwise" is meant literally: floats are compared by their bit patterns, so -0.0 vs 0.0 and NaN payloads
count as differences, and a NaN that repeats exactly does not.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator

from torchperf_tui.engine.hardware.lazy_torch import torch

from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.workloads.input_facts import InputFacts
from torchperf_tui.core.errors import ShapeError, TorchperfError
from torchperf_tui.engine.measurements.flags import Flags, applied_flags
from torchperf_tui.engine.workloads.inputs import dtype_name
from torchperf_tui.engine.workloads.workload import forward_errors, model_name, prepare_workload
from torchperf_tui.engine.measurements.train_step import StepRunner

# Same-width integer views for comparing floating-point tensors bit for bit.
_BIT_VIEW_NAMES = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}  # integer dtypes by element size


@dataclass(frozen=True)
class LeafDiff:
    """How one output tensor (at `path`, e.g. "['out']" or "[0]['boxes']") varied across the runs."""

    path: str
    shape: tuple[int, ...]
    dtype: str
    total_elements: int
    differing_elements: int
    max_abs_diff: float
    max_rel_diff: float

    @property
    def bitwise_equal(self) -> bool:
        return self.differing_elements == 0


@dataclass
class DeterminismReport(InputFacts):
    """The outcome of `check_determinism`.

    max_rel_diff is max |a - b| / max(|a|, |b|) over elements, a value in [0, 2] that stays finite where one
    side is zero. differing_elements counts elements that differ in any run from the first run.
    `mismatches` lists structural differences (an output whose shape, dtype or non-tensor value changed
    between runs, as a detector's box count can); those make the runs unequal but have no numeric diff.
    """

    model: str
    input_shape: tuple[int, ...]
    dtype: str
    device: str
    channels_last: bool
    flags: Flags
    runs: int
    bitwise_equal: bool
    max_abs_diff: float
    max_rel_diff: float
    differing_elements: int
    total_elements: int
    leaves: list[LeafDiff] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    step: str = "infer"  # "train": each run is one training step from the same state; the gradients and the
    # updated weights are compared (leaves "grad NAME", "weight NAME" and "loss")
    amp: str | None = None

    def differing_parameters(self) -> list[str]:
        """A training check: the parameters whose gradient differs between the runs, largest difference first."""
        grads = [leaf for leaf in self.leaves if leaf.path.startswith("['grad ") and not leaf.bitwise_equal]
        return [leaf.path[len("['grad "):-2] for leaf in sorted(grads, key=lambda leaf: -leaf.max_abs_diff)]

    def summary(self) -> str:
        """One line for the CLI and a notification."""
        flags = self.flags.describe(self.device)
        what = "output elements" if self.step == "infer" else "values (loss, gradients, updated weights)"
        runs = f"{self.runs} runs" if self.step == "infer" else f"{self.runs} training steps from the same state"
        runs += f" (amp {self.amp})" if self.amp else ""  # autocast changes which kernels run
        if self.bitwise_equal:
            return (f"deterministic: {runs} bitwise identical ({self.total_elements:,} {what}) on {self.device}, "
                    f"flags: {flags}")
        text = (f"not deterministic: {self.differing_elements:,} of {self.total_elements:,} {what} "
                f"differ across {runs} on {self.device} (max abs diff {self.max_abs_diff:.3g}, "
                f"max rel diff {self.max_rel_diff:.3g})")
        differing = self.differing_parameters() if self.step != "infer" else []
        if differing:
            more = f" and {len(differing) - 3} more" if len(differing) > 3 else ""
            text += f"; gradients differ in {', '.join(differing[:3])}{more}"
        if self.mismatches:
            text += f"; {len(self.mismatches)} output(s) changed shape or value: {self.mismatches[0]}"
        return f"{text}, flags: {flags}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["input_shape"] = list(self.input_shape)
        data["flags"] = self.flags.to_dict()
        data["leaves"] = [{**asdict(leaf), "shape": list(leaf.shape)} for leaf in self.leaves]
        # An infinite diff (NaN against a number) is kept as None: strict JSON has no Infinity.
        for key in ("max_abs_diff", "max_rel_diff"):
            if not math.isfinite(data[key]):
                data[key] = None
        for leaf in data["leaves"]:
            for key in ("max_abs_diff", "max_rel_diff"):
                if not math.isfinite(leaf[key]):
                    leaf[key] = None
        return data


# --------------------------------------------------------------------------------------------------
# Walking and comparing outputs


def iter_leaves(output: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(path, leaf) for every leaf of a nested output; tensors and plain values are leaves."""
    if isinstance(output, torch.Tensor):
        yield path or "output", output
    elif isinstance(output, Mapping):
        for key, value in output.items():
            yield from iter_leaves(value, f"{path}[{key!r}]")
    elif isinstance(output, (tuple, list)):  # namedtuples (Inception's outputs) included
        for i, value in enumerate(output):
            yield from iter_leaves(value, f"{path}[{i}]")
    else:
        yield path or "output", output


def _detached(output: Any, depth: int = 0) -> Any:
    """A private copy of the output: a model may hand back views of buffers that its next call overwrites. An object
    that holds tensors in its attributes (a transformers KV cache) becomes a dict of them, so its keys and values
    are compared as tensors, not the object by identity."""
    if isinstance(output, torch.Tensor):
        return output.detach().clone()
    if depth >= 8:
        return type(output).__name__
    if isinstance(output, Mapping):
        return {k: _detached(v, depth + 1) for k, v in output.items()}
    if isinstance(output, (tuple, list)):
        return [_detached(v, depth + 1) for v in output]
    state = getattr(output, "__dict__", None)
    if isinstance(state, dict) and not isinstance(output, type):
        return {f"{type(output).__name__}.{k}": _detached(v, depth + 1) for k, v in state.items()
                if not callable(v) and not k.startswith("__")}
    return output


def _bits(t: torch.Tensor) -> torch.Tensor:
    if t.is_complex():
        t = torch.view_as_real(t)
    if t.is_floating_point():
        return t.contiguous().view(getattr(torch, _BIT_VIEW_NAMES[t.element_size()]))
    return t


@dataclass
class _LeafAccumulator:
    reference: torch.Tensor
    differs: torch.Tensor  # bool mask: differs from the reference in any run so far
    max_abs: float = 0.0
    max_rel: float = 0.0

    def add(self, other: torch.Tensor) -> None:
        ref = self.reference
        mask = _bits(ref) != _bits(other)
        if ref.is_complex():
            mask = mask.any(dim=-1)
        self.differs |= mask
        if not bool(mask.any()):
            return
        a = ref[mask].to(torch.complex128 if ref.is_complex() else torch.float64)
        b = other[mask].to(a.dtype)
        diff = (a - b).abs()
        scale = torch.maximum(a.abs(), b.abs())
        nan_a, nan_b = torch.isnan(a), torch.isnan(b)
        # NaN on one side only is an unbounded difference; NaN on both (different payloads) a zero one.
        diff = torch.where(nan_a ^ nan_b, torch.full_like(diff, math.inf), diff)
        diff = torch.where(nan_a & nan_b, torch.zeros_like(diff), diff)
        rel = torch.where(scale > 0, diff / scale, torch.zeros_like(diff))
        rel = torch.where(torch.isinf(diff), torch.full_like(rel, math.inf), rel)
        self.max_abs = max(self.max_abs, float(diff.max()))
        self.max_rel = max(self.max_rel, float(rel.max()))


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"tensor {tuple(value.shape)} {dtype_name(value.dtype)}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def compare_outputs(outputs: list[Any]) -> tuple[list[LeafDiff], list[str]]:
    """Compare every run's output with the first run's, leaf by leaf: (per-tensor diffs, structural changes)."""
    reference = list(iter_leaves(outputs[0]))
    accumulators: dict[str, _LeafAccumulator] = {}
    mismatches: list[str] = []
    for path, leaf in reference:
        if isinstance(leaf, torch.Tensor):
            accumulators[path] = _LeafAccumulator(leaf, torch.zeros(leaf.shape, dtype=torch.bool,
                                                                    device=leaf.device))
    for run, output in enumerate(outputs[1:], start=2):
        leaves = dict(iter_leaves(output))
        if list(leaves) != [path for path, _ in reference]:
            mismatches.append(f"run {run}: the output's structure changed")
            continue
        for path, ref in reference:
            other = leaves[path]
            if isinstance(ref, torch.Tensor) and isinstance(other, torch.Tensor):
                if ref.shape != other.shape or ref.dtype != other.dtype:
                    mismatches.append(f"run {run} {path}: {_describe(ref)} became {_describe(other)}")
                    accumulators[path].differs.fill_(True)
                else:
                    accumulators[path].add(other)
            elif isinstance(ref, torch.Tensor) or isinstance(other, torch.Tensor) or ref != other:
                mismatches.append(f"run {run} {path}: {_describe(ref)} became {_describe(other)}")
                if path in accumulators:
                    accumulators[path].differs.fill_(True)
    diffs = [LeafDiff(path=path, shape=tuple(acc.reference.shape), dtype=dtype_name(acc.reference.dtype),
                      total_elements=acc.reference.numel(), differing_elements=int(acc.differs.sum()),
                      max_abs_diff=acc.max_abs, max_rel_diff=acc.max_rel)
             for path, acc in accumulators.items()]
    return diffs, mismatches


# --------------------------------------------------------------------------------------------------
# The check


def check_determinism(model_spec: str | torch.nn.Module, input_shape: tuple[int, ...] | None = None,
                      device: str = "auto", dtype: str = "float32", flags: Flags | None = None,
                      runs: int = 2, channels_last: bool = False, step: str = "infer", optimizer: str = "sgd",
                      amp: str | None = None, seed: int = 0) -> DeterminismReport:
    """`determinism_of` from loose arguments, for a script: `flags` None checks under the flags in effect now.

    `model_spec` is a torchvision name or `module:factory` (built with random weights, eval mode), or a
    module you built. `input_shape` includes the batch (None: the catalogue's default for a name).
    """
    cfg = BenchConfig(model=model_spec, input_shape=input_shape, device=device, dtype=dtype,
                      flags=Flags.current() if flags is None else flags, channels_last=channels_last, step=step,
                      optimizer=optimizer, amp=amp, seed=seed)
    return determinism_of(cfg, runs)


def determinism_of(cfg: BenchConfig, runs: int = 2) -> DeterminismReport:
    """Run one input `runs` times under `cfg.flags` and compare the outputs; checked by the one preamble
    (`cfg.prepare()`), in its order, before the model is built. Flags are restored afterwards.

    The global RNG is deliberately not reseeded between runs: a model that draws random numbers in its
    forward pass is not repeatable, and the check should say so.

    `cfg.step="train"`: each run is one training step (engine/measurements/train_step.py) from the same weights,
    buffers and a fresh optimizer, with the RNG reseeded (dropout draws the same masks), so what differs comes
    from the kernels: the backward passes (cuDNN's data- and weight-gradient algorithms, atomics in scatter
    and index_add backward) are where training drifts even when a forward pass is bitwise repeatable.
    """
    if runs < 2:
        raise TorchperfError(f"a determinism check needs at least 2 runs, got {runs}")
    started = time.perf_counter()
    name = model_name(cfg.model)

    def has_a_shape(device, step) -> None:
        if cfg.input_shape is None and isinstance(cfg.model, torch.nn.Module):
            raise ShapeError(f"give an input shape for {name}: a module has no catalogue default")

    # A name without a shape takes the catalogue's default (the registry pulls in torchvision only then).
    plan = cfg.prepare(before_inputs=has_a_shape)
    torch_device, torch_dtype, spec, shape = plan.device, plan.dtype, plan.step, plan.shape
    flags, seed, channels_last = cfg.flags, cfg.seed, cfg.channels_last
    work = prepare_workload(cfg.model, plan.inputs, torch_device, torch_dtype, channels_last,
                            model_args=cfg.model_args if isinstance(cfg.model, str) else (), quant=cfg.quant,
                            attn=cfg.attn)
    model, x = work.model, work.x
    outputs: list[Any] = []
    # With deterministic algorithms on, an op without a deterministic version raises here: it is reported.
    if spec.training:
        initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
        with applied_flags(flags), forward_errors(name, shape, torch_dtype, torch_device):
            for _ in range(runs):
                model.load_state_dict(initial)
                torch.manual_seed(seed)
                outputs.append(StepRunner(model, spec, torch_device, seed=seed).step_once(x))
        del initial
    else:
        with applied_flags(flags), torch.inference_mode(), forward_errors(name, shape, torch_dtype, torch_device):
            for _ in range(runs):
                with StepRunner(model, spec, torch_device).autocast():
                    outputs.append(_detached(x.call(model)))
    leaves, mismatches = compare_outputs(outputs)
    del model, x, outputs
    work.release()
    return DeterminismReport(
        **cfg.input_facts(plan.inputs),
        model=name, input_shape=shape, dtype=dtype_name(torch_dtype), device=str(torch_device),
        channels_last=channels_last, flags=flags, runs=runs,
        bitwise_equal=not mismatches and all(leaf.bitwise_equal for leaf in leaves),
        max_abs_diff=max((leaf.max_abs_diff for leaf in leaves), default=0.0),
        max_rel_diff=max((leaf.max_rel_diff for leaf in leaves), default=0.0),
        differing_elements=sum(leaf.differing_elements for leaf in leaves),
        total_elements=sum(leaf.total_elements for leaf in leaves),
        leaves=leaves, mismatches=mismatches, duration_s=time.perf_counter() - started, step=cfg.step, amp=cfg.amp,
    )
