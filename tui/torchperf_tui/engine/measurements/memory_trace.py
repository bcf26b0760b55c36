"""Memory sampled between a run's iterations, as it goes: the CUDA caching allocator, or the process RSS."""

from __future__ import annotations

import time
from typing import Callable

from torchperf_tui.engine.hardware.lazy_torch import torch

OnMemory = Callable[[tuple[float, int, int], str], None]  # ((time, allocated, reserved), kind)


class MemoryTrace:
    """Memory sampled between iterations: the caching allocator on CUDA (cheap host-side counters),
    the process RSS on the CPU. Bounded: past LIMIT points every other one is dropped."""

    LIMIT = 2000

    def __init__(self, device: torch.device, on_point: OnMemory | None = None) -> None:
        self.device = device
        self.on_point = on_point
        self.points: list[tuple[float, int, int]] = []
        self.kind = "cuda-allocator" if device.type == "cuda" else "rss"
        self._process = None
        if device.type != "cuda":
            try:
                import psutil

                self._process = psutil.Process()
            except Exception:
                self.kind = ""

    def sample(self) -> None:
        if len(self.points) >= self.LIMIT:
            self.points = self.points[::2]
        if self.kind == "cuda-allocator":
            point = (time.time(), int(torch.cuda.memory_allocated(self.device)),
                     int(torch.cuda.memory_reserved(self.device)))
        elif self._process is not None:
            rss = int(self._process.memory_info().rss)
            point = (time.time(), rss, rss)
        else:
            return
        self.points.append(point)
        if self.on_point is not None:
            self.on_point(point, self.kind)
