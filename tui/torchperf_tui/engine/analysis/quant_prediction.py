"""Will a quantization scheme pay? A prediction per Linear layer from its GEMM's shape and the device's measured
ceilings, before (or beside) the measurement.

Each Linear of the model, counted on the meta device at the run's input (engine/workloads/complexity.py), is a GEMM
of M rows (every position of its input), K input and N output features. Its time at a precision is a roofline's:
the longer of its operations over the compute ceiling of the dtype it computes in, and its bytes over the measured
copy bandwidth. As it is: 2·M·K·N operations in the model's dtype, the weights (K·N), input (M·K) and output (M·N)
at the dtype's size. Weight-only schemes (int8wo, int4wo, fp8wo) read their weights at 1 byte (int4: half) and
compute in the model's dtype; schemes that quantize activations (int8dq, fp8) compute at the int8 (float8) ceiling
and also write and read the quantized input once. The model's predicted ratio holds what no Linear owns fixed:
B/A = (T − Σ now + Σ quantized) / T, with T a measured time of the pass. A scheme whose compute ceiling is not
measured here (float8 on a box that has none) has no prediction, and says so.

This is a model of the GEMMs alone: a kernel's own overheads (its launch, unpacking int4) are not in it, which is
what the measurement beside it shows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from torchperf_tui.engine.workloads.quantization import MIN_FEATURES, SCHEMES

# What a scheme computes in (None: the model's dtype) and the bytes of one weight.
COMPUTES_IN = {"int8wo": None, "int4wo": None, "fp8wo": None, "int8dq": "int8", "fp8": "float8"}
WEIGHT_BYTES = {"int8wo": 1.0, "int8dq": 1.0, "int4wo": 0.5, "fp8": 1.0, "fp8wo": 1.0}
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


@dataclass(frozen=True)
class LayerPrediction:
    """One Linear's GEMM (M x K by K x N) and its predicted time now and quantized, with what bounds each."""

    name: str
    m: int
    k: int
    n: int
    now_ms: float
    quantized_ms: float
    now_bound: str  # "compute" or "memory"
    quantized_bound: str


@dataclass
class QuantPrediction:
    """A scheme's prediction for a model at one input and dtype: each converted Linear's, their sums, and the model's
    ratio once a measured pass time is given (`ratio`). `missing`: why there is no prediction (then no layers)."""

    scheme: str
    dtype: str
    layers: list[LayerPrediction] = field(default_factory=list)
    missing: str | None = None
    ceilings: str = ""  # which measured ceilings it used, in words

    @property
    def now_ms(self) -> float:
        return sum(layer.now_ms for layer in self.layers)

    @property
    def quantized_ms(self) -> float:
        return sum(layer.quantized_ms for layer in self.layers)

    def ratio(self, unquantized_ms: float) -> float | None:
        """The model's predicted time quantized over its time as it is (`unquantized_ms`, a measured pass), what no
        Linear owns held fixed; None without a prediction or a time."""
        if self.missing is not None or not unquantized_ms or unquantized_ms <= 0:
            return None
        rest = max(unquantized_ms - self.now_ms, 0.0)
        return (rest + self.quantized_ms) / (rest + self.now_ms) if rest + self.now_ms > 0 else None

    def to_dict(self) -> dict:
        return {**asdict(self), "now_ms": self.now_ms, "quantized_ms": self.quantized_ms}


def gemm_time_ms(m: int, k: int, n: int, ops_per_s: float, bytes_per_s: float, weight_bytes: float,
                 act_bytes: float, extra_bytes: float = 0.0) -> tuple[float, str]:
    """A GEMM's roofline time (ms) and what bounds it: 2·m·k·n operations at `ops_per_s` against its bytes (weights
    k·n at `weight_bytes`, input m·k and output m·n at `act_bytes`, plus `extra_bytes`) at `bytes_per_s`."""
    compute_s = 2.0 * m * k * n / ops_per_s
    memory_s = (k * n * weight_bytes + (m * k + m * n) * act_bytes + extra_bytes) / bytes_per_s
    return (max(compute_s, memory_s) * 1e3, "compute" if compute_s >= memory_s else "memory")


def predict(layers, scheme: str, dtype: str, compute: dict[str, float], copy_bytes_per_s: float | None,
            converted: set[str] | None = None) -> QuantPrediction:
    """The prediction for `scheme` on a model in `dtype` whose per-layer table is `layers` (LayerStat rows with their
    input and output shapes). `compute`: the measured compute ceilings by dtype (ops/s); `copy_bytes_per_s`: the
    measured copy bandwidth. `converted`: the Linear layers the scheme converts (default: every Linear with at least
    MIN_FEATURES input and output features and whole groups where the scheme groups them)."""
    prediction = QuantPrediction(scheme=scheme, dtype=dtype)
    computes_in = COMPUTES_IN[scheme] or dtype
    missing = [name for name in dict.fromkeys((dtype, computes_in)) if not compute.get(name)]
    if copy_bytes_per_s is None:
        missing.append("the copy bandwidth")
    if missing:
        prediction.missing = (f"no measured ceiling for {' or '.join(missing)} on this device"
                              + (": measure them (C / torchperf-tui ceilings --refresh)" if computes_in != "float8"
                                 else ": measure them (C / torchperf-tui ceilings --refresh) on a device that runs "
                                      "float8 matmuls (CUDA compute capability 8.9+)"))
        return prediction
    act = DTYPE_BYTES.get(dtype, 4)
    group = SCHEMES[scheme].group_size
    for layer in layers:
        if layer.type != "Linear" or len(layer.input_shape) < 1 or len(layer.output_shape) < 1:
            continue
        k, n = int(layer.input_shape[-1]), int(layer.output_shape[-1])
        m = 1
        for size in layer.input_shape[:-1]:
            m *= int(size)
        chosen = (layer.name in converted if converted is not None
                  else min(k, n) >= MIN_FEATURES and not (group and k % group))
        if not chosen:
            continue
        now, now_bound = gemm_time_ms(m, k, n, compute[dtype], copy_bytes_per_s, act, act)
        # activations quantized at each call: the input read, written at 1 byte and read again by the GEMM
        extra = 2.0 * m * k if COMPUTES_IN[scheme] else 0.0
        quantized, bound = gemm_time_ms(m, k, n, compute[computes_in], copy_bytes_per_s, WEIGHT_BYTES[scheme], act,
                                        extra)
        prediction.layers.append(LayerPrediction(layer.name, m, k, n, now, quantized, now_bound, bound))
    used = sorted(dict.fromkeys((dtype, computes_in)))
    prediction.ceilings = f"from the {' and '.join(used)} compute and the copy ceilings measured here"
    return prediction


def ratio_of_quantized(prediction: QuantPrediction, quantized_ms: float) -> float | None:
    """The predicted ratio quantized / as it is, from a measured time of the quantized pass (`bench --quant`): what
    no Linear owns is that time less the Linears' predicted quantized time."""
    if prediction.missing is not None or not quantized_ms or quantized_ms <= 0:
        return None
    rest = max(quantized_ms - prediction.quantized_ms, 0.0)
    return prediction.ratio(rest + prediction.now_ms)


def prediction_for(run, scheme: str, device: str, ceilings, converted: tuple[str, ...] | None = None) -> QuantPrediction:
    """The prediction for `scheme` on `run` (a BenchConfig, as measured: its device, input and dtype resolved) from
    `ceilings` (the device's kept CeilingsResult, or None) and the layers the scheme converted in the run."""
    if ceilings is None:
        return QuantPrediction(scheme=scheme, dtype=run.dtype, missing=f"no measured ceilings kept for {device}: "
                                                                         "measure them (C / torchperf-tui ceilings)")
    # torch: the app loads this module's results without it
    from torchperf_tui.engine.workloads.complexity import analyse_complexity

    inputs = run.input_spec()
    complexity = analyse_complexity(run.model, inputs.shape, dtype=run.dtype, layers=True, inputs=inputs,
                                    model_args=run.model_args)
    compute = {c.dtype: c.value for c in ceilings.ceilings if c.kind in ("compute", "matmul")}
    copy = ceilings.copy()
    return predict(complexity.layers, scheme, run.dtype, compute, copy.value if copy is not None else None,
                   set(converted) if converted is not None else None)
