"""torchvision's model catalogue: every model grouped by task, with its default input size (from its weights'
eval crop) and the published GMACs of its weights; and the catalogue of every source (list_models: torchvision's,
timm's names, transformers' types), which engine/workloads/models.py exports.

Nothing here downloads anything or imports torch at module level: reading a weights enum (for its eval crop size
and published `_ops`) only reads Python metadata. Building a model is engine/workloads/models.py's.
"""

from __future__ import annotations

import functools

from torchperf_tui.core.errors import ModelError
from torchperf_tui.engine.workloads.catalogue_cache import cached
from torchperf_tui.engine.workloads.model_entry import ModelEntry, WeightsReference
from torchperf_tui.engine.workloads import hf_models, timm_models

TASKS: tuple[str, ...] = (
    "classification", "segmentation", "detection", "video", "optical_flow", "quantization", "custom",
)

# Video clips: 16 frames is what torchvision's published `_ops` for the Kinetics weights are measured at.
VIDEO_FRAMES = 16
# Detection models resize every image to their own `min_size` (800 for the R-CNNs) inside the model,
# so the input size mainly matters for the aspect ratio; 800x800 is what they will compute on anyway.
DETECTION_SIZE = {"ssd300_vgg16": 300, "ssdlite320_mobilenet_v3_large": 320,
                  "fasterrcnn_mobilenet_v3_large_320_fpn": 320}
DETECTION_DEFAULT_SIZE = 800
# RAFT downsamples by 8 and builds a 4-level correlation pyramid: sides must be multiples of 8 and the
# coarsest level must not vanish. 520x960 is the Sintel-like size used in torchvision's references.
OPTICAL_FLOW_SHAPE: tuple[int, ...] = (2, 3, 520, 960)

# The sources with a catalogue (`models --source`), in the order they are listed.
LISTED_SOURCES: tuple[str, ...] = ("torchvision", "timm", "hf")

QUANTIZED_REASON = ("int8 quantized kernels run only on CPU backends, cannot run on the meta device and are "
                    "not counted by FlopCounterMode; analyse or time the float model of the same name instead")


@functools.lru_cache(maxsize=1)
def torchvision_tasks() -> dict[str, str]:
    """Every torchvision model name -> its task."""
    import torchvision.models as tvm

    tasks: dict[str, str] = {}
    for task, module in (("segmentation", tvm.segmentation), ("detection", tvm.detection),
                         ("video", tvm.video), ("optical_flow", tvm.optical_flow),
                         ("quantization", tvm.quantization)):
        for name in tvm.list_models(module=module):
            tasks[name] = task
    # Whatever is left in the full list is an image classifier (tvm.list_models(module=tvm) also lists
    # the sub-packages' models, so classification is "all minus the others").
    for name in tvm.list_models():
        tasks.setdefault(name, "classification")
    return tasks


def _weights_enum(name: str):
    import torchvision.models as tvm

    try:
        return tvm.get_model_weights(name)
    except (ValueError, KeyError):
        return None


def _crop_size(weights) -> tuple[int, int] | None:
    """The eval crop of a weights entry, read from its transforms preset without calling anything heavy."""
    transforms = weights.transforms
    keywords = getattr(transforms, "keywords", None) or {}
    crop = keywords.get("crop_size")
    if crop is None:
        # Some presets hide it: build the preset (no download, just a small object) and read its field.
        try:
            crop = getattr(transforms(), "crop_size", None)
        except Exception:  # noqa: BLE001 - a preset we cannot build tells us nothing; fall back below
            crop = None
    if crop is None:
        return None
    if isinstance(crop, int):
        return crop, crop
    crop = list(crop)
    return (crop[0], crop[0]) if len(crop) == 1 else (crop[0], crop[1])


def _needs_image_size(name: str) -> bool:
    # ViT is built for exactly one image size; its SWAG weights set a larger one through the builder.
    return name.startswith("vit_")


@functools.lru_cache(maxsize=None)
def _default_shape(name: str, task: str) -> tuple[int, ...]:
    if task == "detection":
        side = DETECTION_SIZE.get(name, DETECTION_DEFAULT_SIZE)
        return (3, side, side)
    if task == "optical_flow":
        return OPTICAL_FLOW_SHAPE
    if task == "segmentation":
        return (3, 520, 520)  # the resize size of every torchvision segmentation preset
    weights = _weights_enum(name)
    crops = [c for c in (_crop_size(w) for w in (weights or [])) if c is not None]
    if _needs_image_size(name):
        # weights=None builds the 224 model; the 384/512/518 crops belong to a differently built model.
        crops = [c for c in crops if c == (224, 224)] or crops
    # The smallest eval crop among the weights entries: cheapest and always accepted by a weights=None build.
    h, w = min(crops) if crops else (224, 224)
    if task == "video":
        return (3, VIDEO_FRAMES, h, w)
    return (3, h, w)


def catalogue_entry(name: str, task: str) -> ModelEntry:
    """The entry of torchvision model `name` of `task`: its default input shape, and why it is not supported."""
    shape = _default_shape(name, task)
    if task == "quantization":
        return ModelEntry(name, task, shape, supported=False, reason=QUANTIZED_REASON)
    return ModelEntry(name, task, shape)


@functools.lru_cache(maxsize=1)
def _catalogue() -> tuple[ModelEntry, ...]:
    tasks = torchvision_tasks()
    return tuple(sorted((catalogue_entry(name, task) for name, task in tasks.items()),
                        key=lambda e: (TASKS.index(e.task), e.name)))


def list_catalogue(task: str | None = None) -> list[ModelEntry]:
    """The torchvision catalogue, grouped by task (in TASKS order) and sorted by name within a task."""
    if task is not None and task not in TASKS:
        raise ModelError(f"unknown task {task!r}: choose one of {', '.join(TASKS)}")
    return [e for e in _catalogue() if task is None or e.task == task]


def reference_weights(task: str = "classification") -> list[WeightsReference]:
    """Every weights entry of every model of `task` with its published GMACs and eval input shape."""
    refs = []
    for entry in list_catalogue(task):
        for weights in _weights_enum(entry.name) or []:
            ops = weights.meta.get("_ops")
            crop = _crop_size(weights)
            if ops is None or crop is None:
                continue
            kwargs = {"image_size": crop[0]} if _needs_image_size(entry.name) else {}
            shape = (3, VIDEO_FRAMES, *crop) if task == "video" else (3, *crop)
            refs.append(WeightsReference(entry.name, weights.name, shape, float(ops), kwargs))
    return refs


def list_models(source: str | None = None) -> list[ModelEntry]:
    """The models of `source` ("torchvision", "timm", "hf"; None: every installed one), for `models --source` and
    the app's picker. torchvision: its catalogue (list_catalogue), by task. timm: every name, task
    "classification", the input size of its pretrained config. hf: every type with its head as the task; its input
    shape is left empty (it follows the config and --seq-len: resolve_model gives it)."""
    if source is not None and source not in LISTED_SOURCES:
        raise ModelError(f"unknown model source {source!r}: choose one of {', '.join(LISTED_SOURCES)}")
    entries: list[ModelEntry] = []
    for each in LISTED_SOURCES if source is None else (source,):
        try:
            entries.extend(cached(each, lambda: _listed(each)))
        except ModelError:
            if source is not None:  # asked for by name: say it is not installed
                raise
    return entries


def check_task(task: str, entries: list[ModelEntry]) -> str:
    """`task` when some entry has it, else ModelError naming the tasks there are."""
    tasks = list(dict.fromkeys(e.task for e in entries))
    if task not in tasks:
        raise ModelError(f"unknown task {task!r}: choose one of {', '.join(tasks)}")
    return task


def _listed(source: str) -> list[ModelEntry]:
    if source == "torchvision":
        return list_catalogue()
    if source == "timm":
        return [ModelEntry(timm_models.PREFIX + name, "classification", timm_models.input_size(name), source="timm")
                for name in timm_models.model_names()]
    return [ModelEntry(hf_models.PREFIX + name, task, (), source="hf")
            for name, task in sorted(hf_models.type_heads().items())]
