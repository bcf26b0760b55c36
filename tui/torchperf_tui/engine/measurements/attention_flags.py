"""The attention-era flags: which SDPA backends `F.scaled_dot_product_attention` may choose from, and float32
matmul precision. Their values as text, how they are applied and read back (engine/measurements/flags.py calls
these: it stays the one place global torch state is changed), and what the documented constraints alone refuse.

SDPA backends: torch.nn.attention.sdpa_kernel is a context manager over four process-wide switches
(torch.backends.cuda.enable_flash_sdp, enable_mem_efficient_sdp, enable_math_sdp, enable_cudnn_sdp); the flags
context sets the same switches and puts them back, as it does every other flag. On the CPU only flash and math
exist. A set is written as the backends joined with '+' ('flash+math'), or 'all' (PyTorch's default).

Matmul precision: torch.set_float32_matmul_precision (highest, high, medium). On CUDA 'high' and 'medium' allow
TF32 for float32 matmuls (torch ties allow_tf32 to it), so a set with either has TF32 matmul on; on the CPU,
oneDNN may use TF32 ('high') or bfloat16 ('medium') for float32 matmuls where the CPU has them.

No torch at import: the CLI's process and the app's UI process parse and check these.
"""

from __future__ import annotations

from torchperf_tui.core.errors import FlagError

SDPA_BACKENDS = ("flash", "efficient", "cudnn", "math")  # the order a set is written in
CPU_SDPA_BACKENDS = ("flash", "math")
SDPA_ALL = "all"
SDPA_LABELS = {"flash": "flash", "efficient": "memory-efficient", "cudnn": "cuDNN", "math": "math"}
_SDPA_ALIASES = {"flash": "flash", "flash_attention": "flash", "efficient": "efficient", "mem_efficient": "efficient",
                 "memory_efficient": "efficient", "efficient_attention": "efficient", "cudnn": "cudnn",
                 "cudnn_attention": "cudnn", "math": "math"}
# The sidebar's choices (any set can be typed in the CLI and a SPEC).
SDPA_CHOICES = (SDPA_ALL, "flash", "efficient", "cudnn", "math", "flash+math")

MATMUL_PRECISIONS = ("highest", "high", "medium")
DEFAULT_MATMUL_PRECISION = "highest"
# torch >= 2.9 keeps the precision per backend; oneDNN's says what set_float32_matmul_precision last set.
_MKLDNN_PRECISION = {"ieee": "highest", "tf32": "high", "bf16": "medium"}


def parse_sdpa(text: str) -> str:
    """'flash+math' (any order, aliases, any case) -> the set as written canonically; 'all' for every backend.
    An unknown name is one line."""
    words = [w.strip().lower().replace("-", "_") for w in str(text).split("+")]
    if not any(words):
        raise FlagError("sdpa: name one or more backends joined with '+', e.g. flash+math "
                        f"(known: {', '.join(SDPA_BACKENDS)}, or {SDPA_ALL})")
    if len(words) == 1 and words[0] in (SDPA_ALL, "any", "default"):
        return SDPA_ALL
    chosen = set()
    for word in words:
        if word not in _SDPA_ALIASES:
            raise FlagError(f"sdpa: unknown backend {word!r}: known backends are "
                            f"{', '.join(SDPA_BACKENDS)} (joined with '+'), or {SDPA_ALL}")
        if _SDPA_ALIASES[word] in chosen:  # 'flash+flash': a typo for another backend, not a set
            raise FlagError(f"sdpa: {_SDPA_ALIASES[word]} given twice in {text!r}: name each backend once")
        chosen.add(_SDPA_ALIASES[word])
    return sdpa_text(chosen)


def sdpa_text(backends) -> str:
    """A set of backend names as written: 'all' for the four, else 'flash+math' in SDPA_BACKENDS' order ('none'
    for an empty set, which only user code can leave)."""
    chosen = [name for name in SDPA_BACKENDS if name in set(backends)]
    if len(chosen) == len(SDPA_BACKENDS):
        return SDPA_ALL
    return "+".join(chosen) or "none"


def sdpa_backends(value: str) -> tuple[str, ...]:
    """The backends a set allows, in SDPA_BACKENDS' order."""
    if value == SDPA_ALL:
        return SDPA_BACKENDS
    return tuple(name for name in SDPA_BACKENDS if name in value.split("+"))


def parse_matmul_precision(text: str) -> str:
    value = str(text).strip().lower()
    if value not in MATMUL_PRECISIONS:
        raise FlagError(f"matmul precision {text!r}: choose one of {', '.join(MATMUL_PRECISIONS)}")
    return value


def parsed_values(changes: dict) -> dict:
    """Flag changes with an SDPA set and a matmul precision parsed (checked, written canonically)."""
    parse = {"sdpa": parse_sdpa, "matmul_precision": parse_matmul_precision}
    return {name: parse[name](value) if name in parse else value for name, value in changes.items()}


def allows_tf32(precision: str) -> bool:
    """Whether float32 matmuls may use TF32 on CUDA at this precision (torch ties allow_tf32 to it)."""
    return precision != DEFAULT_MATMUL_PRECISION


# -- applying and reading (torch) -----------------------------------------------------------------------------

def _sdpa_switches():
    import torch

    cuda = torch.backends.cuda
    return {"flash": (cuda.flash_sdp_enabled, cuda.enable_flash_sdp),
            "efficient": (cuda.mem_efficient_sdp_enabled, cuda.enable_mem_efficient_sdp),
            "cudnn": (getattr(cuda, "cudnn_sdp_enabled", None), getattr(cuda, "enable_cudnn_sdp", None)),
            "math": (cuda.math_sdp_enabled, cuda.enable_math_sdp)}


def current_sdpa() -> str:
    """The set of SDPA backends enabled now (the switches sdpa_kernel sets)."""
    enabled = [name for name, (read, _) in _sdpa_switches().items() if read is None or read()]
    return sdpa_text(enabled)


def apply_sdpa(value: str) -> None:
    allowed = set(sdpa_backends(value)) if value != "none" else set()
    for name, (_, enable) in _sdpa_switches().items():
        if enable is not None:
            enable(name in allowed)


def current_matmul_precision() -> str:
    """torch's float32 matmul precision. Read from oneDNN's setting where torch keeps one per backend (asking
    torch for the one precision raises once allow_tf32 and the precision were set apart)."""
    import torch

    mkldnn = getattr(getattr(torch.backends.mkldnn, "matmul", None), "fp32_precision", None)
    if mkldnn in _MKLDNN_PRECISION:
        return _MKLDNN_PRECISION[mkldnn]
    try:
        return torch.get_float32_matmul_precision()
    except RuntimeError:
        return DEFAULT_MATMUL_PRECISION


def apply_matmul_precision(precision: str, tf32_matmul: bool) -> None:
    """Set the precision, then TF32 matmul where the precision leaves it free ('highest'): at 'high' and 'medium'
    TF32 is on (turning it off there would set CUDA's precision apart from oneDNN's, a state torch refuses to
    report)."""
    import torch

    torch.set_float32_matmul_precision(precision)
    if not allows_tf32(precision):
        torch.backends.cuda.matmul.allow_tf32 = tf32_matmul


# -- what the documented constraints refuse, before anything runs (no torch) ----------------------------------

def sdpa_refusal(value: str, device_kind: str, dtype: str = "float32", amp: str | None = None) -> str | None:
    """One line when the set leaves attention no backend on `device_kind` ("cpu"/"cuda") by PyTorch's documented
    constraints alone, else None: on the CPU only flash and math exist; on CUDA flash and cuDNN attention take
    float16 and bfloat16 only. (A model's own call can rule out more: engine/measurements/attention_calls.py runs it.)"""
    allowed = set(sdpa_backends(value)) if value != "none" else set()
    if "math" in allowed:
        return None
    if not allowed:
        return "sdpa allows no backend: attention cannot run; name at least one (math always runs)"
    if not device_kind.startswith("cuda"):
        if allowed & set(CPU_SDPA_BACKENDS):
            return None
        names = " and ".join(SDPA_LABELS[name] for name in sdpa_backends(value))
        return (f"sdpa={value} leaves attention no backend on the CPU: {names} attention "
                f"{'exists' if len(allowed) == 1 else 'exist'} only on CUDA (the CPU has flash and math, by "
                f"PyTorch's documented constraints): allow flash or math")
    half = dtype in ("float16", "bfloat16") or amp in ("fp16", "bf16")
    if not half and allowed <= {"flash", "cudnn"}:
        names = " and ".join(SDPA_LABELS[name] for name in sdpa_backends(value))
        return (f"sdpa={value} leaves attention no backend for a {dtype} model on CUDA: {names} attention "
                f"{'takes' if len(allowed) == 1 else 'take'} float16 or bfloat16 only (PyTorch's documented "
                f"constraints): allow efficient or math, or run in half precision (dtype bfloat16 or amp bf16)")
    return None


def absent_lines(value: str, device_kind: str) -> list[str]:
    """A line when a set allows backends that do not exist on `device_kind` (efficient and cuDNN on the CPU):
    allowing them there changes nothing."""
    if device_kind.startswith("cuda") or value == SDPA_ALL:
        return []
    absent = [name for name in sdpa_backends(value) if name not in CPU_SDPA_BACKENDS]
    verb = "does" if len(absent) == 1 else "do"
    return [f"sdpa={value}: {' and '.join(absent)} attention {verb} not exist on the CPU; allowing it there changes "
            "nothing"] if absent else []
