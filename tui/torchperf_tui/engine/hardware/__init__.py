"""The box: the device and its datasheet peaks, NVML and live telemetry, the GPU's conditions beside a run,
the host's noise, and the measured ceilings."""
