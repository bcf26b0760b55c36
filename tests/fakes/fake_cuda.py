"""A fake of the torch-device seam (`torchperf_tui.engine.hardware.device.CudaBackend`).

It has the same methods as `TorchCudaBackend`, the small adapter over torch.cuda / torch.backends.cudnn:
is_available, unavailable_reason, is_initialized, device_count, get_device_properties, memory_allocated,
memory_reserved, max_memory_allocated, empty_cache, cudnn_version, runtime_version.

    cuda = FakeCuda([FakeDeviceProperties()], nvml=fake_nvml)   # one H100, linked to a FakeNvml
    cuda.allocate(0, 2 * GiB); cuda.free(0, 2 * GiB)            # reserved stays up, like the caching allocator
    cuda.empty_cache()                                          # reserved drops to allocated; NVML used too
    FakeCuda.unavailable("torch was built without CUDA")        # a CPU box

`h100_fakes()` gives a ready-made (FakeNvml, FakeCuda) pair for one plausible H100 SXM.
"""

from __future__ import annotations

import dataclasses

from tests.fakes.fake_nvml import FakeGpu, FakeNvml, GiB, MiB


@dataclasses.dataclass
class FakeDeviceProperties:
    """What torch.cuda.get_device_properties returns, for an H100 SXM by default (datasheet values).

    clock_rate and memory_clock_rate are in kHz like cudaDeviceProp; set them to None to mimic a torch
    that lacks the attribute (the engine then checks with hasattr).
    """

    name: str = "NVIDIA H100 80GB HBM3"
    major: int = 9
    minor: int = 0
    multi_processor_count: int = 132
    total_memory: int = 81559 * MiB
    L2_cache_size: int = 50 * MiB
    uuid: str = "00000000-0000-0000-0000-000000000000"
    clock_rate: int | None = 1_980_000
    memory_clock_rate: int | None = 2_619_000
    memory_bus_width: int | None = 5120

    def __getattribute__(self, item: str):
        # A None optional attribute behaves as missing, so hasattr() is False as on an older torch.
        value = object.__getattribute__(self, item)
        if value is None and item in ("clock_rate", "memory_clock_rate", "memory_bus_width"):
            raise AttributeError(item)
        return value


@dataclasses.dataclass
class _DeviceMemory:
    allocated: int = 0
    reserved: int = 0
    peak: int = 0


class FakeCuda:
    """A torch.cuda stand-in with per-device allocator counters that tests can move."""

    def __init__(self, devices: list[FakeDeviceProperties] | None = None, *, runtime: str | None = "13.0",
                 cudnn: int | None = 91300, initialized: bool = True, nvml: FakeNvml | None = None,
                 nvml_indices: list[int] | None = None, reason: str | None = None) -> None:
        self.devices = list(devices) if devices is not None else [FakeDeviceProperties()]
        self.runtime = runtime
        self.cudnn = cudnn
        self.initialized = initialized
        self.memory = [_DeviceMemory() for _ in self.devices]
        self.empty_cache_calls = 0
        self._reason = reason
        # Linking a FakeNvml makes allocator traffic show in NVML's used memory, as on a real GPU.
        self.nvml = nvml
        self.nvml_indices = nvml_indices if nvml_indices is not None else list(range(len(self.devices)))

    @classmethod
    def unavailable(cls, reason: str = "torch was built without CUDA") -> FakeCuda:
        """A CPU box: is_available() is False and unavailable_reason() says why."""
        return cls([], runtime=None, cudnn=None, initialized=False, reason=reason)

    # -- controls for tests -------------------------------------------------------------------------------
    def allocate(self, index: int, nbytes: int) -> None:
        mem = self.memory[index]
        mem.allocated += nbytes
        mem.peak = max(mem.peak, mem.allocated)
        grow = max(0, mem.allocated - mem.reserved)
        mem.reserved += grow
        self._nvml_used(index, grow)

    def free(self, index: int, nbytes: int) -> None:
        """Free tensors; like the caching allocator, the memory stays reserved until empty_cache()."""
        mem = self.memory[index]
        mem.allocated = max(0, mem.allocated - nbytes)

    def _nvml_used(self, index: int, delta: int) -> None:
        if self.nvml is not None:
            gpu = self.nvml.gpus[self.nvml_indices[index]]
            gpu.memory_used = max(0, gpu.memory_used + delta)

    # -- the CudaBackend surface ---------------------------------------------------------------------------
    def is_available(self) -> bool:
        return bool(self.devices)

    def unavailable_reason(self) -> str | None:
        return None if self.devices else (self._reason or "no CUDA device")

    def is_initialized(self) -> bool:
        return self.initialized

    def device_count(self) -> int:
        return len(self.devices)

    def get_device_properties(self, index: int) -> FakeDeviceProperties:
        self.initialized = True  # as in torch, asking for properties initialises CUDA
        return self.devices[index]

    def memory_allocated(self, index: int) -> int:
        return self.memory[index].allocated

    def memory_reserved(self, index: int) -> int:
        return self.memory[index].reserved

    def max_memory_allocated(self, index: int) -> int:
        return self.memory[index].peak

    def empty_cache(self) -> None:
        self.empty_cache_calls += 1
        for index, mem in enumerate(self.memory):
            released = mem.reserved - mem.allocated
            mem.reserved = mem.allocated
            self._nvml_used(index, -released)

    def cudnn_version(self) -> int | None:
        return self.cudnn

    def runtime_version(self) -> str | None:
        return self.runtime


def h100_fakes() -> tuple[FakeNvml, FakeCuda]:
    """(FakeNvml, FakeCuda) for one plausible H100 SXM, linked so allocator traffic moves NVML's used memory.

    The allocator starts with 1 GiB allocated and 3 GiB reserved, so empty_cache() releases 2 GiB.
    """
    uuid = "5a1b2c3d-0000-4000-8000-000000000100"
    nvml = FakeNvml(gpus=[FakeGpu(uuid="GPU-" + uuid, memory_used=512 * MiB)])
    cuda = FakeCuda([FakeDeviceProperties(uuid=uuid)], nvml=nvml)
    cuda.allocate(0, 3 * GiB)
    cuda.free(0, 2 * GiB)
    return nvml, cuda
