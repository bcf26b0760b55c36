"""Which kernel each convolution ran under flag set A and under B, side by side, per layer; and beside them which
attention kernel each SDPA call site ran (engine/analysis/attention_kernels.py), so a transformer works too.

cudnn.benchmark, TF32, cudnn.deterministic and oneDNN change *which* implementation a convolution runs,
and the timings alone do not say so. torch.profiler records the kernels, but its operator table merges
every conv of the model into one `aten::cudnn_convolution` row. So every conv module's forward is wrapped
in a profiler range named after its qualified module name (engine/workloads/layer_ranges.py); the ops recorded
inside a range, and the device kernels they launched (`FunctionEvent.kernels`, attached by correlation id
to the op that launched them), belong to that layer. The wrapping is undone afterwards, whatever happens.

A training step (`step="train"`) profiles forward, loss, backward and the optimizer step. The backward of a
layer runs outside its range (in the autograd engine, on CUDA on a thread of its own), so it is found by
the autograd sequence number: the forward ops inside the layer's range carry one, and the backward node
that autograd built for them ('autograd::engine::evaluate_function: ConvolutionBackward0') carries the same
one with the forward's thread. Its GPU kernels are sorted by name into data-gradient ('dgrad') and
weight-gradient ('wgrad') kernels, the rest of the layer's backward as 'bwd' (bias gradient, layout copies, and
the plain GEMMs cuDNN runs for a 1x1 conv's gradients, whose names say neither: seen on an H100);
on the CPU one ATen op computes both gradients, shown as 'bwd'.

Each arm is warmed up under its own flags outside the profiler (cudnn.benchmark autotunes on the first
call, oneDNN creates its primitives) and then profiled for a few iterations.

On the CPU there are no kernels to see, and the profiler does not expose oneDNN's primitives; what it
does show is which ATen implementation ran (aten::mkldnn_convolution, aten::_slow_conv2d_forward,
aten::slow_conv_transpose2d, ...): the deepest conv-named op under the layer's conv call. Its time is
its total CPU time, children included (the slow path's im2col copy is part of its cost). A transposed
conv on oneDNN is called inline by aten::_convolution and shows under that name.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from torchperf_tui.core.attention_settings import sdpa_backends
from torchperf_tui.engine.analysis.attention_result import AttentionSite
from torchperf_tui.engine.analysis.kernel_time import KernelTime
from torchperf_tui.engine.hardware.lazy_torch import torch

from torchperf_tui.engine.measurements.abtest import ArmSpec, ArmThreads
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.workloads.input_facts import InputFacts
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.measurements.flags import applied_flags
from torchperf_tui.engine.hardware.host_noise import HostNoise, HostProbe, noise_marks
from torchperf_tui.engine.workloads.inputs import parse_dtype
from torchperf_tui.engine.workloads.layer_ranges import (BACKWARD_PREFIX, LAYER_PREFIX, attach_layer_ranges, descendants,
                                               on_cpu, profile_iterations)
from torchperf_tui.engine.workloads.workload import forward_errors, model_name, prepare_workload
from torchperf_tui.engine.analysis import attention_kernels as attention
from torchperf_tui.engine.measurements.train_step import StepRunner, grad_context

CONV_TYPE_NAMES = ("Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d")
CUDA_NOTE = ("GPU kernels from CUPTI, grouped by conv layer; autotuning (cudnn.benchmark) ran in the "
             "warm-up, outside the profile")
CPU_NOTE = ("cuDNN kernel choice is a GPU view; on the CPU this shows the ATen convolution implementation "
            "each layer ran (oneDNN primitives are not exposed by the profiler)")
CUDA_TRAIN_NOTE = ("backward kernels sorted by their names: dgrad (data gradient), wgrad (weight gradient), bwd "
                   "(the rest of the layer's backward: kernels whose names say neither, such as the GEMMs cuDNN runs "
                   "for a 1x1 conv's gradients, the bias gradient, layout copies)")
CPU_TRAIN_NOTE = "on the CPU one ATen op computes a conv layer's data and weight gradients: shown as bwd"
ATTENTION_NOTE = ("attention: the kernel each SDPA call ran, from the op under aten::scaled_dot_product_attention; an "
                  "allowed backend passed over is said with torch's reason, found by running that call under it "
                  "alone; another implementation (attn=eager, flex_attention) is named with its ops from the first "
                  "attention op to the last (eager's matmul, softmax, matmul; flex's compiled region), not its "
                  "projections")
PHASES = ("fwd", "dgrad", "wgrad", "bwd")  # the order a layer's kernels are listed in
_WGRAD = re.compile(r"(?i)wgrad|grad_?weight|grad_?filter|backward_?filter|bwd_?filter")
_DGRAD = re.compile(r"(?i)dgrad|grad_?input|backward_?data|bwd_?data|depthwise\dd_backward")


def backward_phase(kernel_name: str) -> str:
    """'dgrad', 'wgrad' or 'bwd' for a kernel launched by a layer's backward, by what its name says."""
    if _WGRAD.search(kernel_name):
        return "wgrad"
    if _DGRAD.search(kernel_name):
        return "dgrad"
    return "bwd"


@dataclass
class LayerKernels:
    """What one conv layer ran under arm A and under arm B, longest first."""

    layer: str
    a: list[KernelTime] = field(default_factory=list)
    b: list[KernelTime] = field(default_factory=list)

    @property
    def a_us(self) -> float:
        return sum(k.us_per_iter for k in self.a)

    @property
    def b_us(self) -> float:
        return sum(k.us_per_iter for k in self.b)

    @property
    def changed(self) -> bool:
        """The two arms ran a different set of kernels (implementations) for this layer."""
        return {(k.phase, k.name) for k in self.a} != {(k.phase, k.name) for k in self.b}

    def phases(self) -> list[tuple[str, "LayerKernels"]]:
        """(pass, its kernels under A and B) for each pass of this layer that ran something (fwd, then a training
        step's dgrad, wgrad, bwd), in that order."""
        present = {k.phase for k in [*self.a, *self.b]}
        return [(phase, LayerKernels(self.layer, [k for k in self.a if k.phase == phase],
                                     [k for k in self.b if k.phase == phase]))
                for phase in PHASES if phase in present]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "a_us": self.a_us, "b_us": self.b_us, "changed": self.changed}


@dataclass
class KernelComparison(InputFacts):
    model: str
    device: str
    input_shape: tuple[int, ...]
    a_spec: str
    b_spec: str
    layers: list[LayerKernels]  # in forward order
    kind: str  # "cuda-kernel" or "cpu-op"
    note: str
    iters: int  # iterations profiled per arm (the fewer of the two; fewer than asked when cancelled)
    cancelled: bool = False
    step: str = "infer"  # what each profiled iteration was: "infer", "train (sgd)", with " · amp bf16"
    amp: str | None = None
    attention: list = field(default_factory=list)  # AttentionSite per SDPA call site and pass, in forward order
    # The host over each arm's profiled passes ("A", "B": the arms run one after the other), and what the app saw
    # beside them: a busy host lengthens an arm's times (not which kernel ran).
    arm_hosts: dict[str, HostNoise] = field(default_factory=dict)
    app_marks: list[str] = field(default_factory=list)

    def disturbance_marks(self) -> list[str]:
        """Every reason the times may not be the arms' alone, one line each: what the app saw, then each arm's host
        ('arm A: noisy host: ...')."""
        return [*self.app_marks, *(f"arm {name}: {line}" for name, noise in self.arm_hosts.items()
                                   for line in noise_marks(noise))]

    @property
    def training(self) -> bool:
        """The profiled iterations were training steps: the layers carry their backward kernels too."""
        return self.step.startswith("train")

    @property
    def changed_layers(self) -> list[LayerKernels]:
        return [layer for layer in self.layers if layer.changed]

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if k != "layers"}
        data["input_shape"] = list(self.input_shape)
        data["layers"] = [layer.to_dict() for layer in self.layers]
        data["attention"] = [site.to_dict() for site in self.attention]
        data["arm_hosts"] = {name: noise.to_dict() for name, noise in self.arm_hosts.items()}
        data["disturbance_marks"] = self.disturbance_marks()
        return data


def conv_layers(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    conv_types = tuple(getattr(torch.nn, name) for name in CONV_TYPE_NAMES)
    return [(name or type(m).__name__, m) for name, m in model.named_modules() if isinstance(m, conv_types)]


def _implementation(op: Any) -> Any:
    """Follow a conv call down its conv-named children to the op that did the work."""
    while True:
        nxt = [c for c in getattr(op, "cpu_children", []) or [] if "conv" in str(c.name).lower()]
        if len(nxt) != 1:
            return op
        op = nxt[0]


def _top_aten_convs(event: Any) -> list[Any]:
    """The outermost ATen conv ops under an event (aten::convolution_backward under ConvolutionBackward0)."""
    found, stack = [], list(getattr(event, "cpu_children", []) or [])
    while stack:
        op = stack.pop()
        name = str(op.name).lower()
        if name.startswith("aten::") and "conv" in name:
            found.append(op)
        else:
            stack.extend(getattr(op, "cpu_children", []) or [])
    return found


def group_by_layer(events: Any, iters: int, on_cuda: bool) -> dict[str, list[KernelTime]]:
    """Layer name -> its kernels (CUDA) or implementation ops (CPU), per iteration, longest first within each
    pass (fwd, then a training step's dgrad, wgrad, bwd), in the order the layers first ran."""
    totals: dict[str, dict[tuple[str, str], list[float]]] = {}
    backward_of: dict[tuple[Any, int], str] = {}  # (forward thread, autograd sequence number) -> layer

    def add(layer: str, phase: str, name: str, us: float) -> None:
        slot = totals.setdefault(layer, {}).setdefault((phase, name), [0.0, 0])
        slot[0] += us
        slot[1] += 1

    ordered = sorted(events, key=lambda e: e.time_range.start)
    for event in ordered:
        if not (str(event.name).startswith(LAYER_PREFIX) and on_cpu(event)):
            continue
        layer = str(event.name)[len(LAYER_PREFIX):]
        totals.setdefault(layer, {})
        for op in descendants(event):
            if getattr(op, "sequence_nr", -1) is not None and getattr(op, "sequence_nr", -1) >= 0:
                backward_of[(getattr(op, "thread", None), op.sequence_nr)] = layer
        if on_cuda:
            found = [(str(k.name), float(k.duration)) for op in descendants(event)
                     for k in getattr(op, "kernels", []) or [] if not str(k.name).startswith(LAYER_PREFIX)]
        else:
            found = [(str(impl.name), float(impl.cpu_time_total)) for impl in
                     (_implementation(op) for op in event.cpu_children if "conv" in str(op.name).lower())]
        for name, us in found:
            add(layer, "fwd", name, us)
    for event in ordered:  # a training step's backward: the autograd nodes built for a layer's forward ops
        if not (str(event.name).startswith(BACKWARD_PREFIX) and on_cpu(event)):
            continue
        layer = backward_of.get((getattr(event, "fwd_thread", None), getattr(event, "sequence_nr", -1)))
        if layer is None:
            continue
        if on_cuda:
            for op in descendants(event):
                for k in getattr(op, "kernels", []) or []:
                    add(layer, backward_phase(str(k.name)), str(k.name), float(k.duration))
        else:
            for impl in map(_implementation, _top_aten_convs(event)):
                add(layer, "bwd", str(impl.name), float(impl.cpu_time_total))
    n = max(iters, 1)
    return {layer: sorted((KernelTime(name, us / n, calls / n, phase) for (phase, name), (us, calls) in per.items()),
                          key=lambda k: (PHASES.index(k.phase), -k.us_per_iter, k.name))
            for layer, per in totals.items()}


def conv_kernels(base: BenchConfig, a: ArmSpec, b: ArmSpec, *, iters: int = 3, warmup: int = 3,
                 should_cancel: Callable[[], bool] | None = None) -> KernelComparison:
    """Profile `base`'s model under arm A, then arm B, and line up each conv layer's kernels (for a training
    step, those of its backward too: both arms run the same step, from the weights the model was built with)."""
    if iters < 1:
        raise TorchperfError(f"iterations must be at least 1, got {iters}")
    step = a.step_spec(base)
    if b.step_spec(base) != step:
        raise TorchperfError("--kernels compares the kernels of one kind of iteration under two flag sets: give "
                             "step, optimizer and amp to both arms alike (or as --step, --optimizer, --amp)")
    arms = {"a": a, "b": b}
    if any(spec.run_of(base).compile is not None for spec in arms.values()):
        raise TorchperfError("--kernels profiles each layer's own kernels, eager: a compiled arm fuses them across "
                             "layers (`bench --compile` times a compiled pass)")
    settings = {arm: spec.run_of(base).model_key() for arm, spec in arms.items()}  # (dtype, channels_last, quant,
    #                                                                                  attn): arms alike share a model
    plan = base.prepare(amp_for=[(step, dtype) for dtype in dict.fromkeys(d for d, *_ in settings.values())],
                        arms=(a, b))
    device, shape = plan.device, plan.shape
    name = model_name(base.model)
    cancelled = should_cancel or (lambda: False)
    on_cuda = device.type == "cuda"
    workloads = {}
    grouped: dict[str, dict[str, list[KernelTime]]] = {"a": {}, "b": {}}
    sites: dict[str, dict] = {"a": {}, "b": {}}  # arm -> (site, pass) -> what ran
    reasons: dict[str, dict] = {"a": {}, "b": {}}  # arm -> site -> {backend: why it could not take the calls}
    conv_names: set[str] = set()
    profiled: list[int] = []  # iterations each arm that ran got to profile
    hosts: dict[str, HostNoise] = {}
    stopped = False
    # torch: the app loads this module's results (KernelComparison) without it
    from torchperf_tui.engine.measurements import attention_calls

    attention_calls.check_attention_sets(base, [a.flags, b.flags], device)  # before anything is built
    try:
        for key in dict.fromkeys(settings.values()):
            workloads[key] = prepare_workload(base.model, plan.inputs, device, parse_dtype(key[0]), key[1],
                                              model_args=base.model_args, quant=key[2], attn=key[3])
        # A training step changes the weights: each arm starts from the built ones (kernel choice does not
        # depend on the values, but a diverging model could reach NaNs, and those take other paths on the CPU).
        initial = ({key: {k: v.detach().clone() for k, v in work.model.state_dict().items()}
                    for key, work in workloads.items()} if step.training else {})
        implementations = {arm: attention.implementation_of(workloads[key].model) for arm, key in settings.items()}
        for arm, spec in arms.items():
            work = workloads[settings[arm]]
            layers = conv_layers(work.model)
            conv_names.update(layer for layer, _ in layers)  # the other ranges are attention sites

            def profile_arm(work=work, layers=layers, spec=spec, key=settings[arm], arm=arm):
                if step.training:
                    work.model.load_state_dict(initial[key])
                handles = []
                try:
                    with applied_flags(spec.flags), grad_context(step), \
                            forward_errors(name, shape, work.dtype, device, action="profiling kernels of"):
                        runner = StepRunner(work.model, step, device, seed=base.seed)
                        # One iteration recorded (its SDPA calls and their modules) before the warm-up.
                        calls = attention_calls.record_calls(work.model, lambda: runner(work.x))
                        attention_sites = list(dict.fromkeys(c.site for c in calls))
                        if not calls and implementations[arm] not in (None, "sdpa"):  # eager, flex_attention
                            attention_sites = attention.attention_modules(work.model)
                        if not layers and not attention_sites:
                            raise TorchperfError(f"{name} has no convolution layers and no attention "
                                                 "(scaled_dot_product_attention) calls: kernel choice needs one")
                        reasons[arm] = attention_calls.probe_sites(calls, sdpa_backends(spec.flags.sdpa),
                                                             device)
                        handles = attach_layer_ranges(layers + [(site, work.model.get_submodule(site))
                                                                for site in attention_sites])
                        return profile_iterations(runner, work.x, device, iters, warmup, cancelled)
                finally:
                    for handle in handles:
                        handle.remove()

            # Each arm on a thread of its own: cuDNN's per-thread algorithm cache must not carry A's
            # choices into B (see ArmThreads).
            host = HostProbe(during="its profiled passes")
            with ArmThreads([arm], separate=on_cuda) as thread:
                host.begin()
                events, done, stopped = thread.run(arm, profile_arm)
                host.end()
            hosts[arm.upper()] = host.summary([], spread="the passes are profiled, not timed one by one")
            profiled.append(done)
            if events is not None:
                grouped[arm] = group_by_layer(events, done, on_cuda)
                sites[arm] = attention.attention_by_site(events, done, on_cuda, implementations[arm])
            if stopped:
                break
    finally:
        for work in workloads.values():
            work.release()
    order = [layer for layer in dict.fromkeys([*grouped["a"], *grouped["b"]]) if layer in conv_names]
    layers = [LayerKernels(layer, grouped["a"].get(layer, []), grouped["b"].get(layer, [])) for layer in order]
    allowed = {"a": a.flags.sdpa, "b": b.flags.sdpa}
    keys = list(dict.fromkeys([*sites["a"], *sites["b"]]))  # forward order first, each site's passes together
    in_order = list(dict.fromkeys(site for site, _ in keys))
    keys.sort(key=lambda key: (in_order.index(key[0]), key[1] != "fwd"))
    attention_sites = [AttentionSite(site, phase, *(attention.attention_run(
                           allowed[arm], sites[arm].get((site, phase)), reasons[arm].get(site, {})) for arm in "ab"))
                       for site, phase in keys]
    note = (CUDA_NOTE if on_cuda else CPU_NOTE) if layers else ""
    if step.training and layers:
        note += "; " + (CUDA_TRAIN_NOTE if on_cuda else CPU_TRAIN_NOTE)
    if attention_sites:
        note = "; ".join(filter(None, [note, ATTENTION_NOTE]))
    return KernelComparison(**base.input_facts(plan.inputs), model=name, device=str(device), input_shape=tuple(shape), a_spec=a.text or "A",
                            b_spec=b.text or "B", layers=layers, kind="cuda-kernel" if on_cuda else "cpu-op",
                            note=note, iters=min(profiled, default=0), cancelled=stopped, step=step.describe(),
                            amp=step.amp, attention=attention_sites, arm_hosts=hosts)
