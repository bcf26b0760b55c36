"""The SDPA backends as a flag: which backends `F.scaled_dot_product_attention` may choose from. How they are applied
and read back (engine/measurements/flags.py calls these: it stays the one place global torch state is changed), and
what the documented constraints alone refuse. Their values as text are the ground floor's
(core/attention_settings.py), as float32 matmul precision's are; that one is applied with TF32 matmul
(engine/measurements/precision_flags.py).

SDPA backends: torch.nn.attention.sdpa_kernel is a context manager over four process-wide switches
(torch.backends.cuda.enable_flash_sdp, enable_mem_efficient_sdp, enable_math_sdp, enable_cudnn_sdp); the flags
context sets the same switches and puts them back, as it does every other flag. On the CPU only flash and math
exist. A set is written as the backends joined with '+' ('flash+math'), or 'all' (PyTorch's default).

No torch at import: the CLI's process and the app's UI process check these.
"""

from __future__ import annotations

from torchperf_tui.core.attention_settings import CPU_SDPA_BACKENDS, SDPA_ALL, SDPA_LABELS, sdpa_backends, sdpa_text


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
