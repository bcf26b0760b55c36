"""Test doubles for the GPU seams, reused by the engine tests and the TUI's fake-GPU snapshot.

- `fake_nvml.FakeNvml`: a module-like stand-in for `pynvml` (same names, constants, NVMLError) with
  configurable GPUs and injectable errors.
- `fake_cuda.FakeCuda`: a stand-in for the torch-device seam (`engine.hardware.device.CudaBackend`).
- `h100_fakes()`: a linked (FakeNvml, FakeCuda) pair for one plausible H100 SXM.
"""

from tests.fakes.fake_cuda import FakeCuda, FakeDeviceProperties, h100_fakes
from tests.fakes.fake_nvml import FakeGpu, FakeNvml, NVMLError

__all__ = ["FakeCuda", "FakeDeviceProperties", "FakeGpu", "FakeNvml", "NVMLError", "h100_fakes"]
