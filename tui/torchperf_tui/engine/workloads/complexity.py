"""Model complexity: parameters, size, FLOPs/MACs and a per-layer table, computed on the meta device.

Why meta: shapes and FLOPs do not depend on the numbers in the weights, so a forward on meta tensors
gives the same counts as a real one while allocating nothing and doing no arithmetic. A 632 M-parameter
ViT-H/14 at 518 px is analysed in seconds in a few hundred MB.

Why not a real CPU forward: under inference mode nn.MultiheadAttention takes a fused fast path that
FlopCounterMode has no formula for, so attention models would be undercounted; on meta the fast path is
never taken (it requires CPU/CUDA tensors), so attention is counted through its matmuls.

Attention through `F.scaled_dot_product_attention` (transformers' default, nn.MultiheadAttention without weights):
on meta SDPA picks its math kernel (`_fused_sdp_choice_meta` answers "math" for any tensor without a CUDA or HIP
key, so its source reads from torch 2.1 to 2.14; tests/engine/test_complexity_transformers.py checks the torch
installed), which decomposes into the two bmm of QK^T and AV before FlopCounterMode sees anything: each is counted
once, and in a training step the four bmm of their backward. The math kernel computes every score, also under
is_causal (it masks the upper half after the matmul): the count is the full S x S, as the math, efficient and cuDNN
kernels compute it; a flash kernel skips the masked half. The result says so (Complexity.attention). Should a fused
SDPA op ever run instead, the ones FlopCounterMode has no formula for are counted here (SDPA_FORMULAS).
"""

from __future__ import annotations

import contextlib
import sys
import threading

from typing import Any, Iterator
from unittest import mock

import torch
from torch import nn
from torch.nn import functional as F
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode, flop_registry, shape_wrapper

from torchperf_tui.engine.workloads.complexity_result import MB, Complexity, LayerStat
from torchperf_tui.engine.workloads.flop_formulas import SDPA_FORMULAS, AttentionWatch, conv_backward_flops
from torchperf_tui.core.errors import ModelError, ShapeError, TorchperfError, first_line
from torchperf_tui.engine.workloads.input_spec import InputSpec
from torchperf_tui.engine.workloads.inputs import dtype_name, format_shape, parse_dtype
from torchperf_tui.engine.workloads.models import build_model, resolve_model
from torchperf_tui.engine.workloads.workload import FORWARD_ERRORS, model_code_error
from torchperf_tui.engine.workloads.input_facts import input_facts
from torchperf_tui.engine.workloads.layer_ranges import wrap_forwards
from torchperf_tui.engine.workloads.loss import training_loss



def _tensor_leaves(value: Any) -> list[torch.Tensor]:
    return [leaf for leaf in pytree.tree_leaves(value) if isinstance(leaf, torch.Tensor)]


def _first_shape(value: Any) -> tuple[int, ...]:
    tensors = _tensor_leaves(value)
    return tuple(tensors[0].shape) if tensors else ()


def _nbytes(value: Any) -> int:
    return sum(t.numel() * t.element_size() for t in _tensor_leaves(value))


def _is_meta_limitation(exc: BaseException) -> bool:
    # Ops whose output size depends on values (nonzero, nms, masked_select, .item()) cannot run on meta.
    text = str(exc).lower()
    return isinstance(exc, NotImplementedError) or "meta" in text or "data-dependent" in text


# The detection stand-ins are module attributes swapped for the duration of one analysis: two
# analyses on different threads must not interleave their swap/restore, so they take turns.
analysis_lock = threading.Lock()


@contextlib.contextmanager
def _detection_on_meta() -> Iterator[None]:
    """Let torchvision detectors run on meta by assuming every candidate box survives.

    Their post-processing has value-dependent sizes (score thresholds via nonzero, NMS) that meta
    tensors cannot decide. Keeping every candidate is the worst case, and the counts stay bounded
    because the detectors cap candidates by count (pre/post-NMS top-n, detections per image): with
    it, the R-CNN/RetinaNet/FCOS/SSD counts equal torchvision's published `_ops`. Each stand-in acts
    only on meta tensors and calls the real function otherwise, so a detector timed on another
    thread meanwhile is unaffected.
    """
    import torchvision.models.detection.roi_heads as roi_heads
    import torchvision.models.detection.transform as det_transform
    import torchvision.ops.boxes as box_ops

    real_nms, real_paste, real_keypoints = (box_ops.batched_nms, det_transform.paste_masks_in_image,
                                            roi_heads.keypointrcnn_inference)

    def batched_nms(boxes, scores, idxs, iou_threshold):
        if boxes.device.type != "meta":
            return real_nms(boxes, scores, idxs, iou_threshold)
        return torch.arange(boxes.shape[0], device=boxes.device)

    def paste_masks_in_image(masks, boxes, img_shape, padding=1):
        # Resampling each mask into the image (no FLOPs counted) with box corners read as Python ints.
        if masks.device.type != "meta":
            return real_paste(masks, boxes, img_shape, padding=padding)
        return masks.new_empty((masks.shape[0], 1, *img_shape))

    def keypointrcnn_inference(x, boxes):
        if x.device.type != "meta":
            return real_keypoints(x, boxes)
        counts = [len(b) for b in boxes]
        probs = [x.new_empty((n, x.shape[1], 3)) for n in counts]
        scores = [x.new_empty((n, x.shape[1])) for n in counts]
        return probs, scores

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(box_ops, "batched_nms", batched_nms))
        stack.enter_context(mock.patch.object(det_transform, "paste_masks_in_image", paste_masks_in_image))
        stack.enter_context(mock.patch.object(roi_heads, "keypointrcnn_inference", keypointrcnn_inference))
        yield


@contextlib.contextmanager
def _value_dependent_sizes_on_meta() -> Iterator[None]:
    """nonzero on meta assumes every element is non-zero (it refuses by default), and torchvision's detectors run
    on meta (_detection_on_meta) where the model has imported torchvision: a model built without it runs none of
    them, and importing it to stand in for them costs 2-3 s of CPU (it imports torch's compiler)."""
    import torch.fx.experimental._config as fx_config

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(fx_config, "meta_nonzero_assume_all_nonzero", True))
        if "torchvision" in sys.modules:
            stack.enter_context(_detection_on_meta())
        yield


def _fits(func, args: tuple, kwargs: dict) -> bool:
    """Whether a norm's parameters fit its input; if not, the real function runs and says why."""
    x = args[0]
    if func is F.batch_norm:
        stats = args[1] if len(args) > 1 else kwargs.get("running_mean")
        return x.dim() >= 2 and (stats is None or stats.numel() == x.shape[1])
    if func is F.layer_norm:
        shape = tuple(args[1] if len(args) > 1 else kwargs["normalized_shape"])
        return tuple(x.shape[-len(shape):]) == shape
    if func is F.group_norm:
        groups = args[1] if len(args) > 1 else kwargs["num_groups"]
        return x.dim() >= 2 and x.shape[1] % groups == 0
    return True


class _FastMetaShapeKeepers(TorchFunctionMode):
    """Answer normalisations and activations on meta with an empty tensor of the input's shape.

    Their meta kernels are Python decompositions (about 5 ms per BatchNorm), which made them most of
    an analysis' time, and FlopCounterMode counts no FLOPs for them, so skipping changes no count.
    (An in-place activation returns a new tensor here; on meta nothing can tell the difference.)
    """

    SHAPE_KEEPERS = frozenset((F.batch_norm, F.layer_norm, F.group_norm, F.instance_norm,
                               F.relu, F.relu6, F.hardswish, F.hardsigmoid, F.silu, F.gelu,
                               F.hardtanh, F.dropout))

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if (func in self.SHAPE_KEEPERS and args and isinstance(args[0], torch.Tensor)
                and args[0].device.type == "meta" and _fits(func, args, kwargs or {})):
            return torch.empty_like(args[0])
        if (func is F.grid_sample and args and isinstance(args[0], torch.Tensor)
                and args[0].device.type == "meta"):
            # RAFT samples its correlation pyramid 48 times per forward; output is (N, C, *grid[1:-1]).
            grid = args[1] if len(args) > 1 else kwargs["grid"]
            return args[0].new_empty((*args[0].shape[:2], *grid.shape[1:-1]))
        return func(*args, **(kwargs or {}))


class _BackwardByModule(TorchDispatchMode):
    """A training step's backward FLOPs per module, by the autograd node each backward op runs for.

    FlopCounterMode places a backward op in the modules whose backward it thinks is open, from gradient hooks
    on their inputs and outputs; where a block's input feeds two branches (a ResNet block with a downsample)
    the downsample's backward stays open until the other branch's gradient arrives, and every op of the
    other branch was counted in the downsample (56x its forward, and a negative remainder). Here each module
    call's forward records the autograd sequence numbers its ops took (the counter's value as it starts and
    ends; a nested module's range lies inside its parent's), and each backward op is counted in the innermost
    module whose range holds the sequence number of the node it runs for."""

    def __init__(self, registry: dict) -> None:
        super().__init__()
        self.registry = registry
        self.spans: list[tuple[int, int, str]] = []  # (first, past the last sequence number, module name)
        self.by_module: dict[str | None, int] = {}
        self._open: list[tuple[str, int]] = []
        self._owner: dict[int, str | None] = {}

    def attach(self, model: nn.Module) -> list:
        next_number = torch._C._autograd._get_sequence_nr

        def enter(name: str) -> None:
            self._open.append((name, next_number()))

        def leave() -> None:
            if self._open:
                name, first = self._open.pop()
                self.spans.append((first, next_number(), name))

        return wrap_forwards(list(model.named_modules()), enter, leave)

    def owner(self, number: int) -> str | None:
        if number not in self._owner:
            holding = [(end - first, name) for first, end, name in self.spans if first <= number < end]
            self._owner[number] = min(holding)[1] if holding else None
        return self._owner[number]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        formula = self.registry.get(func._overloadpacket)
        if formula is not None:
            node = torch._C._current_autograd_node()
            module = self.owner(node._sequence_nr()) if node is not None else None
            self.by_module[module] = self.by_module.get(module, 0) + int(formula(*args, **kwargs, out_val=out))
        return out


def meta_inputs(model: nn.Module, spec: InputSpec, dtype: torch.dtype) -> Any:
    """The inputs' meta stand-ins, less the all-ones masks passed by a keyword whose default is None.

    A meta tensor has no values, and transformers reads an attention mask's (`padding_mask.all()`, to call SDPA
    with is_causal instead of a mask): on meta that raises. A mask of ones masks nothing, which is what the model
    does without one, and for transformers the same ops run either way (with ones it drops the mask itself)."""
    import inspect

    made = spec.make_meta(dtype)
    ones = {t.name for t, _ in spec.shapes() if t.kind == "mask" and t.name is not None}
    if not ones or spec.factory is not None:
        return made
    try:
        parameters = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return made
    dropped = {name for name in ones if name in parameters and parameters[name].default is None}
    return made if not dropped else type(made)(made.args, {k: v for k, v in made.kwargs.items() if k not in dropped})


def meta_weights(model: nn.Module, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """Meta stand-ins for every parameter and buffer (floating ones at `dtype`); nothing is copied."""
    state: dict[str, torch.Tensor] = {}
    for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
        target_dtype = dtype if tensor.is_floating_point() else tensor.dtype
        state[name] = tensor.detach().to(device="meta", dtype=target_dtype)
    return state


def _size_bytes(model: nn.Module, dtype: torch.dtype) -> int:
    """Parameters and buffers as they would be stored in `dtype` (integer buffers keep their own size)."""
    itemsize = torch.empty((), dtype=dtype).element_size()
    total = 0
    for tensor in [*model.parameters(), *model.buffers()]:
        total += tensor.numel() * (itemsize if tensor.is_floating_point() else tensor.element_size())
    return total


class _ShapeRecorder:
    """Forward hooks on every module: first-call input/output shapes, output bytes, call count. The input is the
    first positional tensor, else the first keyword one (transformers' layers take `hidden_states=` by keyword)."""

    def __init__(self, model: nn.Module) -> None:
        self.records: dict[str, dict[str, Any]] = {}
        self._handles = []
        for name, module in model.named_modules():
            self._handles.append(module.register_forward_hook(self._hook(name), with_kwargs=True))

    def _hook(self, name: str):
        def hook(module: nn.Module, args: Any, kwargs: dict, output: Any) -> None:
            record = self.records.get(name)
            if record is None:
                self.records[name] = {"input_shape": _first_shape(args) or _first_shape(kwargs),
                                      "output_shape": _first_shape(output),
                                      "output_bytes": _nbytes(output), "calls": 1}
            else:
                record["calls"] += 1
                record["output_bytes"] += _nbytes(output)
        return hook

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()


def _called_descendants(name: str, module: nn.Module, recorder: _ShapeRecorder) -> list[str]:
    """The nearest descendants that ran a forward: a ModuleList/ModuleDict is never called itself, so
    its members count as direct children of the module that iterates over them."""
    found = []
    for child_name, child in module.named_children():
        qualified = f"{name}.{child_name}" if name else child_name
        if qualified in recorder.records:
            found.append(qualified)
        else:
            found.extend(_called_descendants(qualified, child, recorder))
    return found


def _layer_table(model: nn.Module, flop_counts: dict[str, dict[Any, int]],
                 recorder: _ShapeRecorder, total: int) -> list[LayerStat]:
    # FlopCounterMode keys modules as "<RootClass>.<qualified.name>" (the root alone for itself).
    root = type(model).__name__
    flops_of = {key: sum(ops.values()) for key, ops in flop_counts.items()}

    def key(qualified: str) -> str:
        return f"{root}.{qualified}" if qualified else root

    rows: list[LayerStat] = []
    for name, module in model.named_modules():
        record = recorder.records.get(name)
        if record is None:
            continue  # never called (e.g. an aux classifier in eval mode)
        children = list(module.named_children())
        own = flops_of.get(key(name), 0) - sum(
            flops_of.get(key(child), 0) for child in _called_descendants(name, module, recorder))
        if children and own <= 0:
            continue
        rows.append(LayerStat(
            name=name or "(root)", type=type(module).__name__,
            input_shape=record["input_shape"], output_shape=record["output_shape"],
            params=sum(p.numel() for p in module.parameters(recurse=not children)),
            flops=max(own, 0), output_bytes=record["output_bytes"], calls=record["calls"],
        ))
    missing = total - sum(r.flops for r in rows)
    if missing:
        # A module shared between two parents is named after one of them by the counter; whatever the
        # tree walk could not place is shown rather than silently dropped, so the rows still sum up.
        rows.append(LayerStat("(unattributed)", "", (), (), 0, missing, 0, 0))
    return rows


def analyse_complexity(spec: str | nn.Module, input_shape: tuple[int, ...], dtype: str = "float32",
                       layers: bool = True, step: str = "infer", *, inputs: InputSpec | None = None,
                       model_args: tuple = ()) -> Complexity:
    """Count parameters, size and FLOPs of `spec` for one forward on an input of `input_shape` (with batch);
    `step="train"` also counts the backward of a training step's loss (engine/measurements/train_step.py), apart.

    `spec` is a catalogue name / `module:factory` (built straight onto meta, no weight memory) or an
    nn.Module (left untouched: its weights are stood in for by meta tensors through functional_call).
    A shape the model rejects -> ShapeError; a model that cannot run on meta -> ModelError.
    `inputs`: what the model takes when it is not one float tensor of `input_shape` (its main input's shape);
    `model_args`: the model's overrides (engine/workloads/model_args.py).
    """
    torch_dtype = parse_dtype(dtype) if isinstance(dtype, str) else dtype
    input_shape = tuple(int(d) for d in input_shape)
    if isinstance(spec, nn.Module):
        model, label = spec, type(spec).__name__
    else:
        label = resolve_model(spec).name
        model = build_model(spec, device="meta", model_args=model_args)

    params_total = sum(p.numel() for p in model.parameters())
    params_trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    size_bytes = _size_bytes(model, torch_dtype)

    state = meta_weights(model, torch_dtype)
    x = meta_inputs(model, inputs.with_shape(input_shape) if inputs is not None else InputSpec(input_shape),
                     torch_dtype)
    recorder = _ShapeRecorder(model) if layers else None
    attention = AttentionWatch()
    counter = FlopCounterMode(display=False, depth=None, custom_mapping=SDPA_FORMULAS)
    # A training step is counted twice at once: the forward alone (`counter`, inside) and forward + backward
    # (`both`, outside); a module's backward is the difference. (A counter opened for the backward alone
    # sees no modules: its module tracker hooks forwards that ran under it.)
    both = FlopCounterMode(display=False, depth=None,
                           custom_mapping={**SDPA_FORMULAS, torch.ops.aten.convolution_backward: conv_backward_flops})
    training = step == "train"
    per_module = _BackwardByModule({**flop_registry, **{op: shape_wrapper(f) for op, f in SDPA_FORMULAS.items()},
                                    torch.ops.aten.convolution_backward: shape_wrapper(conv_backward_flops)}
                                   ) if training and layers else None
    wrapped = per_module.attach(model) if per_module is not None else []
    if training:
        names = {name for name, _ in model.named_parameters()}
        state = {k: v.requires_grad_(True) if k in names and v.is_floating_point() else v for k, v in state.items()}
    try:
        # The fast shape keepers answer with fresh tensors, which would cut the autograd graph a training
        # step's backward walks: it runs the real meta kernels (slower, the same forward count).
        keepers = contextlib.nullcontext() if training else _FastMetaShapeKeepers()
        with analysis_lock, torch.set_grad_enabled(training), _value_dependent_sizes_on_meta(), keepers, \
                (both if training else contextlib.nullcontext()):
            with counter, attention:
                output = torch.func.functional_call(model, state, x.args, x.kwargs, strict=False)
                if training:
                    loss, _ = training_loss(output, lambda n, c: torch.zeros(n, dtype=torch.long, device="meta"), x)
            if training:
                with per_module if per_module is not None else contextlib.nullcontext():
                    loss.backward()
    except (TorchperfError, KeyboardInterrupt):
        raise
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - whatever the model raises is reported as one line
        if isinstance(exc, Exception) and _is_meta_limitation(exc):
            raise ModelError(f"{label} cannot be analysed on the meta device: {first_line(exc)}") from None
        if isinstance(exc, FORWARD_ERRORS):  # on meta any such error is the shape: no pass has run before
            raise ShapeError(f"{label} rejects input {format_shape(input_shape)}: {first_line(exc)}") from None
        error = model_code_error(label, exc, action="analysing", where=f"input {format_shape(input_shape)}")
        if error is None:
            raise
        raise error from None
    finally:
        if recorder is not None:
            recorder.remove()
        for handle in wrapped:
            handle.remove()

    flops = int(counter.get_total_flops())
    table = _layer_table(model, counter.get_flop_counts(), recorder, flops) if recorder else []
    backward_flops = int(both.get_total_flops()) - flops if training else None
    if per_module is not None and recorder is not None:
        table = _with_backward(table, per_module.by_module, backward_flops, model, recorder)
    return Complexity(
        **(input_facts(inputs.with_shape(input_shape), model_args, dtype_name(torch_dtype), model)
           if inputs is not None else {}),
        model=label, input_shape=input_shape, dtype=dtype_name(torch_dtype),
        params_total=params_total, params_trainable=params_trainable,
        size_bytes=size_bytes, size_mb=size_bytes / MB,
        flops=flops, macs=flops // 2, layers=table, step=step,
        backward_flops=backward_flops, attention=attention.result(),
    )


def _with_backward(forward: list[LayerStat], by_module: dict, total: int, model: nn.Module,
                   recorder: _ShapeRecorder) -> list[LayerStat]:
    """The forward table with each row's own backward FLOPs (by_module: module name -> FLOPs, None for ops that
    ran for no module's node). A module whose forward counted nothing of its own but whose backward did gets a
    row of its own; what no module's node did is the unattributed row, so the column sums to `total`."""
    import dataclasses

    rows = [dataclasses.replace(row, backward_flops=0) for row in forward]
    index = {row.name: i for i, row in enumerate(rows)}
    modules = dict(model.named_modules())
    for name, own in by_module.items():
        if name is None or not own:
            continue
        label = name or "(root)"
        if label not in index:
            record = recorder.records.get(name, {})
            rows.append(LayerStat(label, type(modules[name]).__name__ if name in modules else "",
                                  record.get("input_shape", ()), record.get("output_shape", ()), 0, 0, 0,
                                  record.get("calls", 1), backward_flops=0))
            index[label] = len(rows) - 1
        rows[index[label]].backward_flops += own
    missing = total - sum(row.backward_flops for row in rows)
    if missing:
        if "(unattributed)" not in index:
            rows.append(LayerStat("(unattributed)", "", (), (), 0, 0, 0, 0, backward_flops=0))
            index["(unattributed)"] = len(rows) - 1
        rows[index["(unattributed)"]].backward_flops += missing
    return rows
