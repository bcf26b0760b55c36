"""The attention-era flags: which SDPA backends `F.scaled_dot_product_attention` may choose from, and float32
matmul precision. How they are applied and read back (engine/measurements/flags.py calls these: it stays the one
place global torch state is changed), and what the documented constraints alone refuse. Their values as text are
the ground floor's (core/attention_settings.py).

SDPA backends: torch.nn.attention.sdpa_kernel is a context manager over four process-wide switches
(torch.backends.cuda.enable_flash_sdp, enable_mem_efficient_sdp, enable_math_sdp, enable_cudnn_sdp); the flags
context sets the same switches and puts them back, as it does every other flag. On the CPU only flash and math
exist. A set is written as the backends joined with '+' ('flash+math'), or 'all' (PyTorch's default).

Matmul precision: torch.set_float32_matmul_precision (highest, high, medium). On CUDA 'high' and 'medium' allow
TF32 for float32 matmuls (torch ties allow_tf32 to it), so a set with either has TF32 matmul on; on the CPU,
oneDNN may use TF32 ('high') or bfloat16 ('medium') for float32 matmuls where the CPU has them.

No torch at import: the CLI's process and the app's UI process check these.
"""

from __future__ import annotations

from torchperf_tui.core.attention_settings import (CPU_SDPA_BACKENDS, DEFAULT_MATMUL_PRECISION, SDPA_ALL, SDPA_LABELS,
                                                   allows_tf32, sdpa_backends, sdpa_text)

# torch >= 2.9 keeps the precision per backend; oneDNN's says what set_float32_matmul_precision last set.
_MKLDNN_PRECISION = {"ieee": "highest", "tf32": "high", "bf16": "medium"}


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
