"""Why it is this fast: the profiler, the kernels each layer ran, time per layer and the roofline."""
