"""The one seam for NVML: every failing query becomes an `NA` with a readable reason, here and nowhere else.

Like nvitop's thin NVML wrapper, but on a box without NVML we do not exit: `Nvml.open()` never raises,
it returns an instance whose `available` is False and whose `reason` says why, and every query on it
answers `NA(reason)`. Tests inject a fake module (tests/fakes/fake_nvml.py) in place of `pynvml`.

This module imports neither torch nor textual, so it is cheap to import.
"""

from __future__ import annotations

import atexit
import dataclasses
import threading
from collections.abc import Mapping
from typing import Any


@dataclasses.dataclass(frozen=True)
class NA:
    """A value that is not available, with the reason why. Falsy, so `value or default` reads naturally."""

    reason: str

    def __str__(self) -> str:
        return f"n/a ({self.reason})"

    def __bool__(self) -> bool:
        return False


def is_na(value: object) -> bool:
    return isinstance(value, NA)


def to_jsonable(value: Any) -> Any:
    """Dataclasses, lists and dicts to plain JSON types; NA becomes "n/a (reason)".

    `dataclasses.asdict` would turn NA into {"reason": ...}, which reads badly in an export, hence this walk.
    """
    if isinstance(value, NA):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return value


# NVML error codes by constant name, with what a user should read. Looked up by name on the module in use,
# so a fake module and any nvidia-ml-py version agree on the numbers.
_ERROR_TEXT: dict[str, str] = {
    "NVML_ERROR_UNINITIALIZED": "NVML not initialised",
    "NVML_ERROR_INVALID_ARGUMENT": "invalid argument to NVML",
    "NVML_ERROR_NOT_SUPPORTED": "not supported on this GPU",
    "NVML_ERROR_NO_PERMISSION": "no permission to read this",
    "NVML_ERROR_NOT_FOUND": "not found",
    "NVML_ERROR_DRIVER_NOT_LOADED": "NVIDIA driver not loaded",
    "NVML_ERROR_TIMEOUT": "NVML timed out",
    "NVML_ERROR_LIBRARY_NOT_FOUND": "NVML library (libnvidia-ml.so.1) not found: no NVIDIA driver installed",
    "NVML_ERROR_FUNCTION_NOT_FOUND": "this driver's NVML lacks the function",
    "NVML_ERROR_CORRUPTED_INFOROM": "GPU infoROM is corrupted",
    "NVML_ERROR_GPU_IS_LOST": "GPU is lost (fell off the bus); a reset or reboot is needed",
    "NVML_ERROR_RESET_REQUIRED": "GPU needs a reset",
    "NVML_ERROR_OPERATING_SYSTEM": "the operating system blocked the request",
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH": ("NVML library and kernel driver versions differ "
                                           "(driver updated without a reboot?)"),
    "NVML_ERROR_IN_USE": "GPU is in use",
    "NVML_ERROR_MEMORY": "NVML ran out of memory",
    "NVML_ERROR_NO_DATA": "no data yet",
    "NVML_ERROR_INSUFFICIENT_RESOURCES": "insufficient resources",
    "NVML_ERROR_NOT_READY": "not ready",
    "NVML_ERROR_GPU_NOT_FOUND": "GPU not found",
    "NVML_ERROR_UNKNOWN": "unknown NVML error",
}


def _decode(value: Any) -> Any:
    # nvmlDeviceGetName and friends return bytes in older nvidia-ml-py releases and str in newer ones.
    return value.decode(errors="replace") if isinstance(value, bytes) else value


# What each query the app makes must return; anything else (None, a string where a struct belongs, a
# negative count from a broken binding) is NA here, so no caller ever reads a field of a malformed value.
_STRUCT_FIELDS: dict[str, tuple[str, ...]] = {
    "nvmlDeviceGetMemoryInfo": ("total", "used", "free"),
    "nvmlDeviceGetUtilizationRates": ("gpu", "memory"),
    "nvmlGpmQueryDeviceSupport": ("isSupportedDevice",),
}
_COUNTS = frozenset({"nvmlDeviceGetCount", "nvmlDeviceGetTemperature", "nvmlDeviceGetPowerUsage",
                     "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetClockInfo", "nvmlDeviceGetMaxClockInfo",
                     "nvmlDeviceGetMemoryBusWidth", "nvmlSystemGetCudaDriverVersion",
                     "nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetCurrentClocksEventReasons",
                     "nvmlDeviceGetCurrentClocksThrottleReasons"})
_TEXTS = frozenset({"nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlSystemGetDriverVersion"})


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def checked_result(function: str, value: Any) -> Any:
    """`value` if it has the form `function` returns, else NA saying what came back instead."""
    def malformed(what: str) -> NA:
        return NA(f"NVML returned a malformed value for {function}: {what}")

    if value is None:
        return malformed("None")
    if function in _STRUCT_FIELDS:
        for name in _STRUCT_FIELDS[function]:
            field = getattr(value, name, None)
            if not _is_count(field):
                return malformed(f"{type(value).__name__} without a whole number {name!r}")
    elif function in _COUNTS:
        if not _is_count(value):
            return malformed(f"{type(value).__name__} {value!r}"[:160])
    elif function in _TEXTS:
        if not isinstance(value, str):
            return malformed(f"{type(value).__name__}, not text")
    elif function in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        if not isinstance(value, (list, tuple)) or not all(_is_count(getattr(p, "pid", None)) for p in value):
            return malformed(f"{type(value).__name__} without a pid per process")
    elif function == "nvmlDeviceGetCudaComputeCapability":
        if not (isinstance(value, (tuple, list)) and len(value) == 2 and all(_is_count(v) for v in value)):
            return malformed(f"{type(value).__name__} {value!r}"[:160])
    return value


def pcie_words(generation: int, width: int) -> str:
    """A PCIe link in nvidia-smi's words: 'Gen4 x16'."""
    return f"Gen{generation} x{width}"


def pcie_link(nvml: "Nvml", index: int | NA) -> str | NA:
    """GPU `index`'s PCIe link as NVML reads it now against the most it can run at: 'Gen5 x16 (max Gen5 x16)'.
    An idle GPU drops its link to save power, so a run's conditions read it again under load."""
    if isinstance(index, NA):
        return index
    figures = {name: nvml.query(index, f"nvmlDevice{name}") for name in (
        "GetCurrPcieLinkGeneration", "GetCurrPcieLinkWidth", "GetMaxPcieLinkGeneration", "GetMaxPcieLinkWidth")}
    missing = next((v for v in figures.values() if isinstance(v, NA)), None)
    if missing is not None:
        return missing
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in figures.values()):
        return NA("NVML gave no PCIe link figures")
    return (f"{pcie_words(figures['GetCurrPcieLinkGeneration'], figures['GetCurrPcieLinkWidth'])} (max "
            f"{pcie_words(figures['GetMaxPcieLinkGeneration'], figures['GetMaxPcieLinkWidth'])})")


class Nvml:
    """A handle on NVML (real `pynvml` or an injected fake). Build it with `Nvml.open()`."""

    def __init__(self, module: Any, available: bool, reason: str | None) -> None:
        self.module = module
        self.available = available
        self.reason = reason
        self._handles: dict[int, Any] = {}
        self._count: int | None = None
        self._lock = threading.Lock()
        self._codes: dict[int, str] = {}
        if module is not None:
            for name, text in _ERROR_TEXT.items():
                code = getattr(module, name, None)
                if isinstance(code, int):
                    self._codes[code] = text

    @classmethod
    def open(cls, module: Any = None) -> Nvml:
        """Import pynvml (unless a module is given) and call nvmlInit; never raises."""
        if module is None:
            try:
                import pynvml as module  # package nvidia-ml-py
            except Exception as exc:  # ImportError, or a broken install raising anything at import
                return cls(None, False, f"nvidia-ml-py (pynvml) is not importable: {exc}")
        nvml = cls(module, False, None)
        try:
            module.nvmlInit()
        except Exception as exc:
            nvml.reason = f"NVML init failed: {nvml.describe_error(exc)}"
            return nvml
        nvml.available = True
        return nvml

    def describe_error(self, exc: BaseException) -> str:
        """One readable line for an exception raised by an NVML call."""
        code = getattr(exc, "value", None)
        if isinstance(code, int) and code in self._codes:
            return self._codes[code]
        try:
            text = str(exc)
        except Exception:  # the real NVMLError.__str__ calls into the library, which may itself be gone
            text = ""
        if isinstance(code, int):
            return f"NVML error {code}" + (f": {text}" if text else "")
        if isinstance(exc, AttributeError):
            return f"this nvidia-ml-py lacks the call ({text})"
        return f"{type(exc).__name__}: {text}" if text else type(exc).__name__

    def _unavailable(self) -> NA:
        return NA(self.reason or "NVML not available")

    def device_count(self) -> int:
        """How many GPUs NVML sees (0 when unavailable). Read once: GPUs do not come and go mid-session."""
        if not self.available:
            return 0
        if self._count is None:
            value = self.query_system("nvmlDeviceGetCount")
            self._count = value if isinstance(value, int) else 0
        return self._count

    def handle(self, index: int) -> Any:
        """The device handle for an NVML index (cached), or NA."""
        if not self.available:
            return self._unavailable()
        with self._lock:
            cached = self._handles.get(index)
        if cached is not None:
            return cached
        value = self.query_system("nvmlDeviceGetHandleByIndex", index)
        if not isinstance(value, NA):
            with self._lock:
                self._handles[index] = value
        return value

    def query(self, index: int, function: str, *args: Any) -> Any:
        """Call `function(handle_of(index), *args)`; any failure becomes NA with a readable reason."""
        handle = self.handle(index)
        if isinstance(handle, NA):
            return handle
        return self._call(function, handle, *args)

    def query_system(self, function: str, *args: Any) -> Any:
        """Call a device-less NVML function (nvmlSystemGetDriverVersion, ...); failure becomes NA."""
        if not self.available:
            return self._unavailable()
        return self._call(function, *args)

    def _call(self, function: str, *args: Any) -> Any:
        try:
            value = _decode(getattr(self.module, function)(*args))
        except Exception as exc:  # every NVML failure, whatever its kind, degrades to NA right here
            return NA(self.describe_error(exc))
        return checked_result(function, value)

    # -- the readings more than one module takes (telemetry, run conditions) ---------------------------
    _CLOCK_DEFAULTS = {"NVML_CLOCK_GRAPHICS": 0, "NVML_CLOCK_SM": 1, "NVML_CLOCK_MEM": 2}

    def clock_mhz(self, index: int, clock: str = "NVML_CLOCK_SM", maximum: bool = False) -> int | NA:
        """The current clock `clock` (an NVML_CLOCK_* name) in MHz, or with `maximum` its limit; or NA."""
        function = "nvmlDeviceGetMaxClockInfo" if maximum else "nvmlDeviceGetClockInfo"
        return self.query(index, function, self.const(clock, self._CLOCK_DEFAULTS[clock]))

    def temperature_c(self, index: int) -> int | NA:
        """The GPU's core temperature in Celsius, or NA."""
        return self.query(index, "nvmlDeviceGetTemperature", self.const("NVML_TEMPERATURE_GPU", 0))

    def power_w(self, index: int) -> float | NA:
        """The power draw in watts (NVML reports milliwatts), or NA."""
        milliwatts = self.query(index, "nvmlDeviceGetPowerUsage")
        return milliwatts if isinstance(milliwatts, NA) else milliwatts / 1000.0

    def const(self, name: str, default: int) -> int:
        """An NVML constant (NVML_CLOCK_SM, ...) from the module in use, with the ABI value as fallback."""
        value = getattr(self.module, name, default)
        return value if isinstance(value, int) else default

    def shutdown(self) -> None:
        """Release NVML; later queries answer NA. Safe to call twice."""
        if not self.available:
            return
        self.available = False
        self.reason = "NVML was shut down"
        self._handles.clear()
        try:
            self.module.nvmlShutdown()
        except Exception:
            pass  # shutting down a library that is already gone is not worth reporting


_default: Nvml | None = None
_default_lock = threading.Lock()


def default_nvml() -> Nvml:
    """The process-wide NVML instance, opened on first use and shut down at exit."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Nvml.open()
            atexit.register(_default.shutdown)
        return _default
