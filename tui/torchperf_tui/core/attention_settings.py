"""The attention-era flags' values as text: which SDPA backends `F.scaled_dot_product_attention` may choose from,
and float32 matmul precision. Parsed, checked and written one way, for the flag table (core/flag_table.py), the CLI,
the SPECs and the app's UI process alike; how they are applied to torch and read back is the engine's
(engine/measurements/attention_flags.py, and precision_flags.py for the precision).

SDPA backends: a set is written as the backends joined with '+' ('flash+math'), or 'all' (PyTorch's default). On
the CPU only flash and math exist.

Matmul precision: torch.set_float32_matmul_precision (highest, high, medium). On CUDA 'high' and 'medium' allow
TF32 for float32 matmuls (torch ties CUDA's matmul fp32_precision to it), so a set with either has TF32 matmul on; on
the CPU they let oneDNN's matmuls use TF32 ('high') or bfloat16 ('medium') where the CPU has them.
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


def allows_tf32(precision: str) -> bool:
    """Whether float32 matmuls may use TF32 on CUDA at this precision (torch ties CUDA's matmul setting to it)."""
    return precision != DEFAULT_MATMUL_PRECISION
