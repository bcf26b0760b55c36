"""What one decode step of a generation reads, the bandwidth that reached over the per-token time, and its share of
the copy ceiling measured on this box (MBU): decode at batch 1 is memory-bound, and a per-token latency alone does
not say how near the memory it ran (gpt-fast prints "bandwidth achieved" for this).

The count: every parameter once at its dtype (a tied weight once; a quantized weight as its storage holds it), plus
the KV cache the step's attention reads, which grows by a position a step: read off the cache each decode step of the
first timed generation returned (the positions before the step and its own), its mean over the steps the figure, the
first and last said beside it. Nothing else: activations are left out (small at batch 1), and so are the copies a
cache that grows by concatenation (transformers' DynamicCache) makes of itself each step, so the bytes are what a
step must read, not all it moves. Achieved bandwidth is those bytes over the per-token median.

MBU is that bandwidth over the copy ceiling kept for the device (engine/hardware/ceilings.py), which counts the bytes
a large copy reads and writes per second: both figures are bytes through memory per second, a step's (nearly all
read) against a copy's (half read, half written). No peak is guessed: without a kept ceiling the bandwidth is given
alone, and the result says why there is no MBU.

Loads without torch (the UI process unpickles the results that hold these).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torchperf_tui.core.errors import TorchperfError, user_message
from torchperf_tui.core.formatting import is_positive_number
from torchperf_tui.engine.hardware.ceilings import kept_for


# -- the bytes -------------------------------------------------------------------------------------------------

def tensor_bytes(tensor: Any) -> int:
    """The bytes a tensor holds: numel x element size, or for a wrapper subclass (torchao's quantized weights) the
    sum over the tensors it is made of (its data, scales, zero points)."""
    flatten = getattr(tensor, "__tensor_flatten__", None)
    if callable(flatten):
        names, _ = flatten()
        return sum(tensor_bytes(getattr(tensor, name)) for name in names)
    return tensor.numel() * tensor.element_size()


def parameter_bytes(model: Any) -> int:
    """Every parameter of `model` once, at its dtype: a weight tied to another (gpt2's lm_head and token embeddings)
    is one tensor, counted once."""
    params = {id(p): p for p in model.parameters()}.values()
    return sum(tensor_bytes(p) for p in params)


@dataclass(frozen=True)
class DecodeBytes:
    """What one decode step reads by the count above: the weights, and the KV cache its attention reads at its
    position (first step, mean over the steps, last step)."""

    weight_bytes: int
    kv_first_bytes: int  # the cache the first decode step read (the prompt and that step's position)
    kv_mean_bytes: float  # over every decode step of a generation
    kv_last_bytes: int
    steps: int  # decode steps the mean is over
    first_positions: int | None = None  # the positions the cache held at the first step, and at the last
    last_positions: int | None = None

    @classmethod
    def of_steps(cls, weights: int, kv_steps: list[tuple[int, int | None]]) -> "DecodeBytes":
        """From the weights' bytes and each decode step's (cache bytes, positions), in order."""
        if not kv_steps:
            raise ValueError("no decode step to count")
        kv = [nbytes for nbytes, _ in kv_steps]
        return cls(weight_bytes=int(weights), kv_first_bytes=kv[0], kv_mean_bytes=sum(kv) / len(kv),
                   kv_last_bytes=kv[-1], steps=len(kv), first_positions=kv_steps[0][1],
                   last_positions=kv_steps[-1][1])

    @property
    def per_step(self) -> float:
        """The bytes of a decode step: the weights and the mean KV cache read."""
        return self.weight_bytes + self.kv_mean_bytes

    @property
    def first_step(self) -> int:
        return self.weight_bytes + self.kv_first_bytes

    @property
    def last_step(self) -> int:
        return self.weight_bytes + self.kv_last_bytes


def bandwidth_gbs(bytes_per_step: float | None, per_token_ms: float | None) -> float | None:
    """Achieved bandwidth in GB/s (10^9 bytes a second): the bytes a step reads over the per-token time."""
    if not (is_positive_number(bytes_per_step) and is_positive_number(per_token_ms)):
        return None
    return bytes_per_step / (per_token_ms / 1000.0) / 1e9


# -- the ceiling -----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CopyCeiling:
    """The copy ceiling kept for the device a generation ran on: the bytes a large copy read and wrote per second."""

    bytes_per_s: float
    origin: str  # what gave it: 'copy 256.0 MiB, 2 threads'
    key: str  # the device fingerprint it is kept under (device, torch, threads on a CPU)
    outdated: str | None = None  # kept by an earlier version: why to measure again

    @property
    def gbs(self) -> float:
        return self.bytes_per_s / 1e9


def kept_copy_ceiling(device: str) -> tuple[CopyCeiling | None, str | None]:
    """(the copy ceiling kept for `device` under the thread count in effect now, None) or (None, why there is none
    beyond none kept: a ceilings file that is corrupt or no file). Nothing is measured; a generation's figures stand
    whatever the ceilings file holds."""
    problems: list[str] = []
    try:
        kept = kept_for(device, on_corrupt=problems.append)
    except TorchperfError as exc:  # a ceilings path that is no file to read: said, not raised after the run
        return None, user_message(exc)
    copy = kept.copy() if kept is not None else None
    if copy is None:
        return None, problems[0] if problems else None
    return CopyCeiling(bytes_per_s=copy.value, origin=copy.origin, key=kept.key, outdated=kept.outdated), None


def mbu_pct(achieved_gbs: float | None, ceiling: CopyCeiling | None) -> float | None:
    """The achieved bandwidth as a share of the copy ceiling, in %; None without either."""
    if ceiling is None or not is_positive_number(achieved_gbs) or not is_positive_number(ceiling.bytes_per_s):
        return None
    return 100.0 * achieved_gbs * 1e9 / ceiling.bytes_per_s
