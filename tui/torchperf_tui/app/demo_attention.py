"""The attention story of the hands-free demo (`torchperf-tui --demo hf:llama`): SDPA's math kernel against flash at
a long sequence, told as the CNN story tells cuDNN's trade-offs (app/demo.py), each step announced in a banner:

1. math against flash at the sequence length: an interleaved A/B with its verdict (the sidebar shows the flip);
2. the kernel that actually ran at each attention call under each arm (Kernels tab): the switch says what is
   allowed, the profiler what ran;
3. a silent fallback and its reason: flash allowed beside math, math ran (on the CPU a training step with attention
   dropout, which the CPU's flash kernel does not take; on a GPU a float32 model, which flash does not take);
4. the sequence length as the axis: both arms swept over doubling lengths, math's quadratic memory against flash's
   as two curves (Sweep tab);
5. generation under flash: time to first token, then the per-token latencies filling the histogram (Timing tab).

A transformers model with no overrides given plays in a small config (SMALL_CONFIGS) at DEMO_SEQ_LEN, so the story
takes a minute or two on a CPU box. The director drives the panes only through what their keys call.
"""

from __future__ import annotations

import asyncio

# A llama small enough for a CPU box, long enough for math's S x S scores to show: two layers of width 256, a
# vocabulary of 2,048 (the default 32,000's head would dominate each pass), positions to 2,048 (the sweep stops
# there), and attention dropout, which an inference pass does not use and a training step does (the fallback).
SMALL_CONFIGS = {
    "hf:llama": "num_hidden_layers=2,hidden_size=256,intermediate_size=512,num_attention_heads=4,"
                "num_key_value_heads=4,vocab_size=2048,max_position_embeddings=2048,attention_dropout=0.1",
}
DEMO_SEQ_LEN = "1024"

STEPS = (
    ("SDPA math against flash at sequence {seq}",
     "A/B interleaved in blocks: math builds the full S×S scores, flash never does; the verdict says whether it "
     "matters here"),
    ("the kernel that actually ran at each attention call",
     "the switch says what is allowed, the profiler what ran: math's bmm and softmax against one flash kernel"),
    ("a silent fallback: flash allowed, math ran",
     "{why}: the reason is said beside the call site"),
    ("sequence length as the axis: math's quadratic memory against flash",
     "both arms at doubling lengths, interleaved: latency and peak memory, two curves each"),
    ("generation under flash: time to first token, then each token",
     "greedy with the model's own KV cache: the per-token latencies fill the histogram"),
)
FALLBACK_WHY = {
    "cpu": "a training step with attention dropout (the CPU's flash kernel takes none), flash and math allowed",
    "cuda": "a float32 model (flash takes float16 and bfloat16 only), flash and math allowed",
}


def tells_attention(model: str | None) -> bool:
    """A transformers model plays the attention story; any other model the cuDNN one."""
    return bool(model) and model.startswith("hf:")


def demo_inputs(model: str, model_args: str, seq_len: str) -> tuple[str, str]:
    """The picker's args and seq for the demo of `model`: what was given, else the small config and DEMO_SEQ_LEN
    for a transformers model."""
    if not tells_attention(model):
        return model_args, seq_len
    return model_args or SMALL_CONFIGS.get(model, ""), seq_len or DEMO_SEQ_LEN


def attention_steps(on_gpu: bool, seq_len: str) -> list[tuple[str, str]]:
    """The steps' banners (title, note) on this device at this sequence length."""
    why = FALLBACK_WHY["cuda" if on_gpu else "cpu"]
    return [(title.format(seq=seq_len or "its default"), note.format(why=why)) for title, note in STEPS]


class AttentionStory:
    """The steps, played by a DemoDirector (its banners, waits and pace)."""

    def __init__(self, director, on_gpu: bool) -> None:
        self.director, self.app, self.on_gpu = director, director.app, on_gpu

    def _flip(self, flags_a, flags_b) -> None:
        """Show B in the sidebar as a flip from A would (the Sweep's W and the A/B read the flip)."""
        flags = self.app.pane("flags")
        flags.set_values(flags_b)
        flags.previous = flags_a

    async def _set_dtype(self, dtype: str) -> None:
        """Choose `dtype` in the picker and wait for its analysis, as a user's choice is analysed again."""
        from textual.widgets import Select

        picker = self.app.pane("picker")
        select = picker.query_one("#dtype", Select)
        with select.prevent(Select.Changed):
            select.value = dtype
        picker.update_dtype_note()
        picker.reanalyse()
        await self.director._wait(lambda: picker.complexity is not None, timeout=120)

    async def _kernels(self, flags_a, flags_b) -> None:
        kernels = self.app.pane("kernels")
        before = kernels.result
        kernels.start(flags_a, flags_b)
        await self.director._wait(lambda: kernels.result is not before or "error:" in kernels.status, timeout=300)
        if kernels.result is before:
            raise RuntimeError(kernels.status.split("error:[/]", 1)[-1].strip())
        await asyncio.sleep(self.director.pace * 2)

    async def play(self, count) -> None:
        """`count(i, total)`: the director's banner for step i of the steps (it announces and paces)."""
        director, app = self.director, self.app
        flags, sweep, generation = app.pane("flags"), app.pane("sweep"), app.pane("generation")
        steps = attention_steps(self.on_gpu, app.pane("picker").settings()["seq_len"])
        base = flags.flags
        math, flash = base.replace(sdpa="math"), base.replace(sdpa="flash")
        if self.on_gpu:  # flash takes float16 and bfloat16 only
            await self._set_dtype("bfloat16")

        await count(0, steps)
        self._flip(math, flash)
        await director._ab(math, flash)

        await count(1, steps)
        await self._kernels(math, flash)

        await count(2, steps)
        both = base.replace(sdpa="flash+math")
        self._flip(math, both)
        if self.on_gpu:
            await self._set_dtype("float32")
        else:
            director._set_run_option("step", "train:sgd")
        await self._kernels(math, both)
        if self.on_gpu:
            await self._set_dtype("bfloat16")
        else:
            director._set_run_option("step", "infer")

        await count(3, steps)
        self._flip(math, flash)
        sweep.start_ab()
        await director._wait(lambda: sweep.result is not None or sweep.error is not None, timeout=600)
        await asyncio.sleep(director.pace * 2)

        await count(4, steps)
        generation.start()
        await director._wait(lambda: generation.result is not None or generation.error is not None, timeout=600)
        await asyncio.sleep(director.pace * 2)

        flags.set_values(base)
        flags.previous = None
