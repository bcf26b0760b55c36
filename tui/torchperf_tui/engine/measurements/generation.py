"""Generation for a causal LM: the prefill (time to first token) and the decode (time per output token with the
model's own KV cache), greedy, timed step by step.

The loop is written out here rather than left to `model.generate`, which hides the time of each token: a prefill
pass over the prompt that fills the cache and yields the first token (its logits' argmax), then one pass per
further token, each fed the previous argmax and the cache the pass before returned. Each step is synchronised
and timed as every timing here is (engine/measurements/timing.py: CUDA events on a GPU, perf_counter_ns on the CPU),
the argmax inside it (the token is the step's product). One untimed warm-up generation first, then a few timed
ones. N new tokens take one prefill and N - 1 decode steps, so the cache holds P + N - 1 positions at the end
(the last token is produced, never fed back).

The result's module loads without torch (the app's UI process reads it).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable

from torchperf_tui.engine.measurements.watched import watched
from torchperf_tui.engine.measurements.flags import applied_flags, asked_state, Flags
from torchperf_tui.core.stats import TimingStats, compute_stats
from torchperf_tui.core.errors import ModelError, Remedy, ShapeError, TorchperfError
from torchperf_tui.engine.hardware.host_noise import HostNoise, HostProbe, noise_marks
from torchperf_tui.engine.measurements.decode_bandwidth import (CopyCeiling, DecodeBytes, bandwidth_gbs,
                                                                kept_copy_ceiling, mbu_pct, parameter_bytes)
from torchperf_tui.engine.workloads.input_facts import InputFacts, PromptInput
from torchperf_tui.engine.hardware.lazy_torch import torch
from torchperf_tui.engine.workloads.inputs import dtype_name
from torchperf_tui.engine.workloads.model_source import source_of
from torchperf_tui.engine.workloads.workload import forward_errors, prepare_workload

GENERATE_RUNS = 5  # timed generations after the warm-up one: the TTFT's median and spread are over these
DEFAULT_NEW_TOKENS = 64
MIN_NEW_TOKENS = 2  # the first token is the prefill's; at least one decode step to time
CAUSAL_LM = "causal-lm"

OnSample = Callable[[str, int, int, float], None]  # (phase, index, total, ms): "warmup", "prefill", "decode"
ShouldCancel = Callable[[], bool]


STATIC_CACHE = "a static KV cache (transformers' StaticCache, read whole each step) and the decode step torch.compiled"


def method_text(new_tokens: int, prompt_len: int, cache: str = "dynamic") -> str:
    kept = "the model's own KV cache" if cache == "dynamic" else STATIC_CACHE
    return f"greedy, {kept}, {new_tokens} new tokens after a {prompt_len}-token prompt, synchronised per token"


@dataclass
class GenerationResult(InputFacts, PromptInput):
    """Greedy generation under one set of flags: each timed run's time to first token (the prefill) and every
    decode step's time (per output token), the cache's size at the end, and how it was measured."""

    model: str
    device: str
    dtype: str
    batch: int
    prompt_len: int
    new_tokens: int
    flags: Flags
    ttft_ms: list[float]  # per timed run: the prefill (the prompt's pass and the first token's argmax)
    decode_ms: list[float]  # every decode step of every timed run, in order (decode_steps per run)
    decode_steps: int  # per run: new_tokens - 1
    runs_asked: int
    kv_cache_bytes: int | None  # the tensors of the model's cache at the end of the last run
    kv_cache_positions: int | None  # the sequence length the cache holds then (prompt_len + new_tokens - 1)
    kv_cache_kind: str  # the cache's class: DynamicCache, a tuple of tensors...
    method: str
    timer: str  # "cuda-events" or "perf_counter"
    cancelled: bool
    started_at: float
    duration_s: float
    warmup_ttft_ms: float | None = None  # the warm-up generation's, kept apart (one-off costs)
    warmup_decode_ms: list[float] = field(default_factory=list)
    cache_keyword: str = "past_key_values"  # the keyword the model's forward takes its cache under
    last_logits_only: bool = False  # the prefill asked for the last position's logits alone (logits_to_keep=1)
    flags_in_effect: Flags | None = None
    threads_asked: int | None = None
    state_notes: list[str] = field(default_factory=list)
    time_budget_s: float | None = None  # the budget of the warm-up generation and the timed ones together
    budget_stopped: bool = False  # the time budget ended the timed runs before runs_asked
    warmup_stopped: bool = False  # it ran out in the warm-up generation, which stopped there (warmup_decode_ms short)
    next_run_s: float | None = None  # when budget_stopped: the last generation's time, the next one's estimate
    host_noise: HostNoise | None = None
    app_marks: list[str] = field(default_factory=list)
    # What a decode step reads (engine/measurements/decode_bandwidth.py), and the copy ceiling kept for the device
    # (None: none kept; copy_ceiling_problem: why none could be read, a corrupt ceilings file).
    decode_bytes: DecodeBytes | None = None
    copy_ceiling: CopyCeiling | None = None
    copy_ceiling_problem: str | None = None
    # The run it was (a BenchConfig, its device and dtype resolved), kept by its history record.
    config: Any = None
    cache: str = "dynamic"  # the KV cache: "dynamic", or "static" with the decode step compiled

    @property
    def compile_ms(self) -> float | None:
        """A static cache's compiled decode step: its first call, the warm-up's first decode step, which compiles
        (None for a dynamic cache, or a warm-up with no decode step)."""
        return self.warmup_decode_ms[0] if self.cache == "static" and self.warmup_decode_ms else None

    @property
    def runs(self) -> int:
        """Timed runs whose prefill completed."""
        return len(self.ttft_ms)

    @property
    def ttft_stats(self) -> TimingStats | None:
        return compute_stats(self.ttft_ms, batch=self.batch)

    @property
    def decode_stats(self) -> TimingStats | None:
        """Per output token over every decode step of every run; its fps counts tokens (batch per step)."""
        return compute_stats(self.decode_ms, batch=self.batch)

    @property
    def tokens_per_s(self) -> float | None:
        """Decode tokens per second at the per-token median: batch x 1000 / median ms."""
        stats = self.decode_stats
        if stats is None or stats.p50_ms <= 0:
            return None
        return self.batch * 1000.0 / stats.p50_ms

    @property
    def bytes_per_step(self) -> float | None:
        """The bytes a decode step reads: the weights and the KV cache at its position, the mean over the steps."""
        return self.decode_bytes.per_step if self.decode_bytes is not None else None

    @property
    def bandwidth_gbs(self) -> float | None:
        """Achieved bandwidth (GB/s): the bytes a decode step reads over the per-token median."""
        stats = self.decode_stats
        return bandwidth_gbs(self.bytes_per_step, stats.p50_ms if stats is not None else None)

    @property
    def mbu_pct(self) -> float | None:
        """The achieved bandwidth's share of the copy ceiling kept for the device (%), None without one."""
        return mbu_pct(self.bandwidth_gbs, self.copy_ceiling)

    @property
    def threads_used(self) -> int | None:
        in_effect = self.flags_in_effect
        return in_effect.num_threads if in_effect is not None else self.flags.num_threads

    def flags_text(self) -> str:
        return self.flags.describe(self.device, threads_used=self.threads_used, default_threads=self.threads_asked)

    def disturbance_marks(self) -> list[str]:
        return [*self.app_marks, *noise_marks(self.host_noise)]

    def to_dict(self) -> dict:
        data = asdict(self)
        del data["config"]  # its fields are the result's own, said above (the JSON keeps its keys)
        data["flags"] = self.flags.to_dict()
        data["flags_in_effect"] = self.flags_in_effect.to_dict() if self.flags_in_effect is not None else None
        data["input_shape"] = list(self.input_shape)
        for name in ("ttft_stats", "decode_stats"):
            stats = getattr(self, name)
            data[name] = asdict(stats) if stats is not None else None
        data["tokens_per_s"] = self.tokens_per_s
        data["compile_ms"] = self.compile_ms
        mbu = self.mbu_pct
        data.update(bytes_per_step=self.bytes_per_step, bandwidth_gbs=self.bandwidth_gbs, mbu_pct=mbu,
                    mbu_above_ceiling=mbu is not None and mbu > 100.0,
                    copy_ceiling_gbs=self.copy_ceiling.gbs if self.copy_ceiling is not None else None)
        data["host_noise"] = self.host_noise.to_dict() if self.host_noise is not None else None
        data["disturbance_marks"] = self.disturbance_marks()
        return data


# -- checks ----------------------------------------------------------------------------------------------------

def check_new_tokens(new_tokens: Any) -> int:
    if isinstance(new_tokens, bool) or not isinstance(new_tokens, int) or new_tokens < MIN_NEW_TOKENS:
        raise TorchperfError(f"--generate {new_tokens}: give at least {MIN_NEW_TOKENS} new tokens (the first comes "
                             "from the prefill, each further one is a decode step)")
    return new_tokens


def check_causal_lm(spec: Any, model_args: tuple = ()) -> None:
    """TorchperfError unless `spec` is a transformers model built with its causal-LM head (hf: decoders)."""
    if not isinstance(spec, str) or source_of(spec) != "hf":
        raise ModelError(f"{spec}: generation needs a causal language model (an hf: decoder such as hf:gpt2 or "
                         "hf:llama); this one is not a transformers model")
    # torch and numpy: the app loads this module's results without it
    from torchperf_tui.engine.workloads.models import resolve_model

    entry = resolve_model(spec, model_args)
    if entry.task != CAUSAL_LM:
        raise ModelError(f"{spec}: generation needs a causal language model, and this one has no causal-LM head "
                         f"({entry.task}): try a decoder such as hf:gpt2 or hf:llama")


def check_positions(inputs, new_tokens: int) -> None:
    """ShapeError when the prompt and the new tokens need more positions than the model has: the cache holds
    prompt_len + new_tokens - 1 of them at the last decode step."""
    needed = inputs.seq_len + new_tokens - 1
    if inputs.max_len is not None and needed > inputs.max_len:
        key = f" ({inputs.max_len_key})" if inputs.max_len_key else ""
        prompt, tokens = inputs.max_len - new_tokens + 1, inputs.max_len - inputs.seq_len + 1  # what fits beside
        remedies = [*([Remedy("prompt_len", f"{prompt} or less")] if prompt >= 1 else []),
                    *([Remedy("generate", f"{tokens} or fewer")] if tokens >= MIN_NEW_TOKENS else [])]
        raise ShapeError(f"a {inputs.seq_len}-token prompt and {new_tokens} new tokens need {needed} positions, "
                         f"past the model's maximum of {inputs.max_len}{key}", remedies=remedies)


def check_generation(cfg, new_tokens: int) -> None:
    """What a generation refuses before anything is built: the options that do not apply, a model that is not a
    causal LM, too few new tokens."""
    check_new_tokens(new_tokens)
    if cfg.step != "infer":
        raise TorchperfError("generation times inference: leave out --step train")
    if cfg.compile is not None:
        raise TorchperfError("generation times the eager model: leave out --compile")
    if cfg.shapes != "fixed":
        raise TorchperfError("generation times one prompt length: leave out --shapes")
    if cfg.amp is not None:
        raise TorchperfError("generation runs in the model's dtype: give --dtype instead of --amp")
    check_causal_lm(cfg.model, cfg.model_args)


# -- the cache -------------------------------------------------------------------------------------------------

def cache_tensors(cache: Any) -> list:
    """The tensors a model's KV cache holds: a transformers Cache's layers' keys and values (transformers 5), its
    key_cache and value_cache lists (4.x), or nested tuples of tensors (the legacy format)."""
    found: list = []
    seen: set[int] = set()

    def add(item: Any) -> None:
        if isinstance(item, torch.Tensor):
            if id(item) not in seen:
                seen.add(id(item))
                found.append(item)
        elif isinstance(item, (tuple, list)):
            for child in item:
                add(child)

    layers = getattr(cache, "layers", None)
    if isinstance(layers, (list, tuple)):
        for layer in layers:
            add([getattr(layer, name, None) for name in ("keys", "values")])
    elif hasattr(cache, "key_cache"):
        add([getattr(cache, "key_cache", None), getattr(cache, "value_cache", None)])
    else:
        add(cache)
    return found


def cache_bytes(cache: Any) -> int:
    return sum(t.numel() * t.element_size() for t in cache_tensors(cache))


def cache_positions(cache: Any) -> int | None:
    length = getattr(cache, "get_seq_length", None)
    if callable(length):
        try:
            return int(length())
        except Exception:  # noqa: BLE001 - a cache that cannot say: the tensors' own length below
            pass
    tensors = cache_tensors(cache)
    return int(tensors[0].shape[-2]) if tensors and tensors[0].dim() >= 2 else None


# -- the loop --------------------------------------------------------------------------------------------------

class GreedyLoop:
    """One greedy generation of a model on its prompt, a step at a time: `prefill()`, then `decode(k)` for
    k = 1 .. new_tokens - 1, each returning nothing (the timer wraps it) and keeping the cache and next token.

    `cache` "static": transformers' StaticCache, made once for the prompt and every new token and emptied at each
    prefill (its tensors keep their addresses, as CUDA graphs need), each decode step given its position and the
    whole mask, so that every step has the same shapes, and the decode step torch.compiled (fullgraph; on CUDA
    reduce-overhead, CUDA graphs): its first call compiles. The prefill runs eager, as transformers' own generate
    does with a static cache."""

    def __init__(self, model, prompt, new_tokens: int, cache: str = "dynamic") -> None:
        import inspect

        self.model, self.prompt, self.new_tokens = model, prompt, new_tokens
        self.static = cache == "static"
        params = set(inspect.signature(model.forward).parameters)
        # transformers 5.x renamed the forward's past_key_values to cache (5.24 here; older 5.x on the GPU box).
        self.cache_keyword = "cache" if "cache" in params else "past_key_values"
        self.keep = {"logits_to_keep": 1} if "logits_to_keep" in params else {}
        ids = prompt.kwargs.get("input_ids", prompt.first)
        self.batch, self.prompt_len = int(ids.shape[0]), int(ids.shape[-1])
        mask = prompt.kwargs.get("attention_mask")
        # The mask grows by one position a step: made whole once, sliced at each step (a view, no copy).
        self.full_mask = None if mask is None else torch.ones((self.batch, self.prompt_len + new_tokens),
                                                              dtype=mask.dtype, device=mask.device)
        self.cache: Any = None
        self.token = None
        self.generated: list = []  # the tokens of the generation in flight, (batch, 1) each: references, no copy
        self.step_forward = model
        if self.static:
            self._static_cache(ids.device)

    def _static_cache(self, device) -> None:
        """The static cache for the prompt and every new token, each decode step's position, and the compiled
        decode step."""
        from transformers import StaticCache

        config = next((m.config for m in self.model.modules() if hasattr(getattr(m, "config", None), "model_type")),
                      None)
        if config is None:
            raise TorchperfError("cache static: the model has no transformers config to size a StaticCache from")
        self.static_cache = StaticCache(config=config, max_cache_len=self.prompt_len + self.new_tokens)
        self.positions = torch.arange(self.prompt_len + self.new_tokens, device=device)
        self.on_cuda = device.type == "cuda"
        self.step_forward = torch.compile(self.model, fullgraph=True, dynamic=False,
                                          mode="reduce-overhead" if self.on_cuda else None)

    def _take(self, out) -> None:
        self.cache = out.cache if hasattr(out, "cache") else out.past_key_values
        self.token = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
        self.generated.append(self.token)

    def prefill(self) -> None:
        self.cache, self.generated = None, []
        static = {}
        if self.static:
            self.static_cache.reset()
            static = {self.cache_keyword: self.static_cache, "cache_position": self.positions[:self.prompt_len]}
        self._take(self.prompt.call(lambda *a, **kw: self.model(*a, **kw, use_cache=True, **static, **self.keep)))

    def decode(self, step: int) -> None:
        kwargs = {"input_ids": self.token, self.cache_keyword: self.cache, "use_cache": True}
        if self.static:  # the same shapes every step: its position, and the mask over the whole cache
            position = self.prompt_len + step - 1
            kwargs["cache_position"] = self.positions[position:position + 1]
            if self.full_mask is not None:
                kwargs["attention_mask"] = self.full_mask
            if self.on_cuda:  # a new CUDA graph replay: the outputs of the one before are no longer read
                torch.compiler.cudagraph_mark_step_begin()
        elif self.full_mask is not None:
            kwargs["attention_mask"] = self.full_mask[:, :self.prompt_len + step]
        self._take(self.step_forward(**kwargs))


def token_clock(device):
    """How one decode step (or a prefill) is timed on `device`: the timed loop's clock (the seam tests replace)."""
    from torchperf_tui.engine.measurements.timing import sample_clock  # torch: the result types load without it

    return sample_clock(device)


def run_generation(cfg, new_tokens: int = DEFAULT_NEW_TOKENS, *, runs: int = GENERATE_RUNS,
                   on_sample: OnSample | None = None, should_cancel: ShouldCancel | None = None) -> GenerationResult:
    """Greedy generation of `new_tokens` tokens after `cfg`'s prompt (its sequence length: cfg.seq_len, a typed
    shape's, or the model's default), one untimed warm-up generation then `runs` timed ones, under cfg.flags, restored
    afterwards. cfg.time_budget_s covers them all, from the warm-up's first step: a warm-up that reaches it stops
    there, and a timed generation is not started when the last one's time says it would end past it (at least one
    runs). `on_sample(phase, index,
    total, ms)` is told each step: "warmup" (the warm-up generation's steps), "prefill" (a run's TTFT; index the
    run), "decode" (a decode step; index over every run's steps). `should_cancel()` is checked between steps."""

    check_new_tokens(new_tokens)
    return watched(lambda watch: _run_generation(cfg, new_tokens, max(1, int(runs)), watch, on_sample, should_cancel))


def _run_generation(cfg, new_tokens: int, runs: int, watch, on_sample, should_cancel) -> GenerationResult:
    started = time.time()
    plan = cfg.prepare(before_amp=lambda device, step: check_generation(cfg, new_tokens), generates=True)
    device, inputs = plan.device, plan.inputs
    check_positions(inputs, new_tokens)
    emit = on_sample or (lambda phase, index, total, ms: None)
    cancelled = should_cancel or (lambda: False)
    work = prepare_workload(cfg.model, inputs, device, plan.dtype, seed=cfg.seed, model_args=cfg.model_args,
                            quant=cfg.quant, attn=cfg.attn)
    watch.built()
    sample = token_clock(device)
    steps = new_tokens - 1
    ttft: list[float] = []
    decode: list[float] = []
    warm_decode: list[float] = []
    kv_steps: list[tuple[int, int | None]] = []  # the first timed generation's: the cache each decode step read
    warm_ttft = None
    stopped = budget_stopped = warmup_stopped = False
    next_run_s = None
    budget = cfg.time_budget_s
    host = HostProbe()
    loop = None
    try:
        # On CUDA, events and syncs go to the current device, which is per thread: made the run's for its length.
        on_device = torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()
        with applied_flags(cfg.flags), torch.inference_mode(), on_device:
            with forward_errors(cfg.model, inputs.shape, plan.dtype, device, action="generating"):
                loop = GreedyLoop(work.model, work.x, new_tokens, cfg.cache)
                budget_start = time.perf_counter()
                last_run_s = 0.0  # the generation before: how long the next one is expected to take
                timed = False
                for run in range(-1, runs):  # run -1: the warm-up generation
                    if cancelled():
                        stopped = True
                        break
                    now = time.perf_counter()
                    if run > 0 and budget is not None and now - budget_start + last_run_s > budget:
                        budget_stopped, next_run_s = True, last_run_s  # it would end past the budget: not started
                        break
                    if run == 0:
                        host.begin()
                        timed = True
                    run_start = now
                    ms = sample(loop.prefill)
                    if run < 0:
                        warm_ttft = ms
                        emit("warmup", 0, new_tokens, ms)
                    else:
                        ttft.append(ms)
                        emit("prefill", run, runs, ms)
                    for step in range(1, steps + 1):
                        if cancelled():
                            stopped = True
                            break
                        if run < 0 and budget is not None and time.perf_counter() - budget_start >= budget:
                            warmup_stopped = True  # the budget covers the warm-up: it ends here, said
                            break
                        ms = sample(lambda: loop.decode(step))
                        if run < 0:
                            warm_decode.append(ms)
                            emit("warmup", step, new_tokens, ms)
                        else:
                            decode.append(ms)
                            if run == 0:  # outside the timed step: the cache it returned is the one it read
                                kv_steps.append((cache_bytes(loop.cache), cache_positions(loop.cache)))
                            emit("decode", run * steps + step - 1, runs * steps, ms)
                    if stopped:
                        break
                    last_run_s = time.perf_counter() - run_start
                if timed:
                    host.end()
            watch.ran(cfg.flags, during="the generation")
            in_effect = Flags.current()
            complete = not stopped and len(decode) == len(ttft) * steps
            kv_bytes = cache_bytes(loop.cache) if complete and loop.cache is not None else None
            kv_positions = cache_positions(loop.cache) if kv_bytes is not None else None
            kv_kind = type(loop.cache).__name__ if loop.cache is not None else ""
            # Counted once the first timed generation is whole (a cancel within it leaves no figures at all).
            reads = DecodeBytes.of_steps(parameter_bytes(work.model), kv_steps) if len(kv_steps) == steps else None
            # Under the run's flags: a CPU's ceilings are kept per thread count, the run's.
            copy_ceiling, ceiling_problem = kept_copy_ceiling(str(device)) if reads is not None else (None, None)
    finally:
        if loop is not None:
            loop.cache = loop.token = loop.prompt = loop.model = loop.generated = None
        work.release()
    if stopped and (ttft and len(decode) < len(ttft) * steps):
        ttft = ttft[:len(decode) // steps]  # a run cut short by the cancel counts for neither figure
        decode = decode[:len(ttft) * steps]
    return GenerationResult(
        **cfg.input_facts(inputs), model=cfg.model, device=str(device), dtype=dtype_name(plan.dtype),
        batch=inputs.batch, prompt_len=inputs.seq_len, new_tokens=new_tokens, flags=cfg.flags, ttft_ms=ttft,
        decode_ms=decode, decode_steps=steps, runs_asked=runs, kv_cache_bytes=kv_bytes,
        kv_cache_positions=kv_positions, kv_cache_kind=kv_kind,
        method=method_text(new_tokens, inputs.seq_len, cfg.cache),
        timer="cuda-events" if device.type == "cuda" else "perf_counter", cancelled=stopped, started_at=started,
        duration_s=time.time() - started, warmup_ttft_ms=warm_ttft, warmup_decode_ms=warm_decode,
        cache_keyword=loop.cache_keyword if loop is not None else "past_key_values",
        last_logits_only=bool(loop is not None and loop.keep), flags_in_effect=in_effect,
        threads_asked=asked_state(cfg.flags).flags.num_threads, time_budget_s=cfg.time_budget_s,
        budget_stopped=budget_stopped, warmup_stopped=warmup_stopped, next_run_s=next_run_s,
        host_noise=host.summary(decode, spread=True) if ttft else None, decode_bytes=reads,
        copy_ceiling=copy_ceiling, copy_ceiling_problem=ceiling_problem,
        config=replace(cfg, device=str(device), dtype=dtype_name(plan.dtype)), cache=cfg.cache)
